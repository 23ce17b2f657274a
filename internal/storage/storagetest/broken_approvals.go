package storagetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the approvals area.

// approvalLosesHash stores an approval without its input's hash.
var approvalLosesHash = txControl("approval_loses_hash", "an approval is stored without its input's hash",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return losesHashTx{tx} })

type losesHashTx struct{ storage.Tx }

func (t losesHashTx) InsertApproval(ctx context.Context, a *storage.Approval) error {
	c := *a
	c.InputHash = ""
	return t.Tx.InsertApproval(ctx, &c)
}

// approvalSwallowsDuplicate reports success for an approval it refused.
var approvalSwallowsDuplicate = txControl("approval_swallows_duplicate", "InsertApproval of a key with an open approval reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsApprovalTx{tx} })

type swallowsApprovalTx struct{ storage.Tx }

func (t swallowsApprovalTx) InsertApproval(ctx context.Context, a *storage.Approval) error {
	if err := t.Tx.InsertApproval(ctx, a); !errors.Is(err, storage.ErrDuplicate) {
		return err
	}
	return nil
}

// approvalRedecides lets a decided approval be decided again.
var approvalRedecides = txControl("approval_redecides", "DecideApproval decides an approval that is no longer pending",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return redecidesTx{tx} })

type redecidesTx struct{ storage.Tx }

func (t redecidesTx) DecideApproval(ctx context.Context, p *storage.DecideApprovalParams) (storage.Approval, error) {
	a, err := t.Tx.DecideApproval(ctx, p)
	if !errors.Is(err, storage.ErrFenced) {
		return a, err
	}
	a, err = t.Tx.GetApproval(ctx, p.ID)
	a.State, a.Actor, a.Note, a.DecidedAt = p.State, p.Actor, p.Note, p.At
	return a, err
}

// approvalReconsumes lets an approval be consumed again.
var approvalReconsumes = txControl("approval_reconsumes", "ConsumeApproval of a consumed approval reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return reconsumesTx{tx} })

type reconsumesTx struct{ storage.Tx }

func (t reconsumesTx) ConsumeApproval(ctx context.Context, id string, at time.Time) (storage.Approval, error) {
	a, err := t.Tx.ConsumeApproval(ctx, id, at)
	if errors.Is(err, storage.ErrFenced) {
		return t.Tx.GetApproval(ctx, id)
	}
	return a, err
}

// approvalListIgnoresScope lists the approvals of every scope.
var approvalListIgnoresScope = stateless("approval_list_ignores_scope", "ListApprovals ignores the scope it is given",
	func(s storage.Store) storage.Store { return ignoresScope{s} })

type ignoresScope struct{ storage.Store }

func (s ignoresScope) ListApprovals(ctx context.Context, p *storage.ListApprovalsParams) ([]storage.Approval, error) {
	q := *p
	q.Scope = ""
	return s.Store.ListApprovals(ctx, &q)
}

// forgetsApprovalsOnReopen keeps approvals in memory: a restarted host has
// none.
var forgetsApprovalsOnReopen = afterReopen("forgets_approvals_on_reopen", "approvals stored before a reopen are gone after it",
	func(s storage.Store) storage.Store { return forgetsApprovals{s} })

type forgetsApprovals struct{ storage.Store }

func (s forgetsApprovals) GetApproval(_ context.Context, id string) (storage.Approval, error) {
	return storage.Approval{}, fmt.Errorf("%w: approval %s", storage.ErrNotFound, id)
}

func (s forgetsApprovals) GetOpenApproval(_ context.Context, k storage.ApprovalKey) (storage.Approval, error) {
	return storage.Approval{}, fmt.Errorf("%w: open approval of Work %s", storage.ErrNotFound, k.Work)
}

func (s forgetsApprovals) ListApprovals(context.Context, *storage.ListApprovalsParams) ([]storage.Approval, error) {
	return []storage.Approval{}, nil
}
