package storagetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Approvals: the human extension's records of held calls and starts. One
// open approval per key, decided once, consumed once, listed by scope and
// state, and surviving a restart.

func approvalCases() []Case {
	return []Case{
		{Name: "approval_round_trip", Run: plain(approvalRoundTrip), Control: approvalLosesHash},
		{Name: "approval_one_open_per_key", Run: plain(approvalOneOpenPerKey), Control: approvalSwallowsDuplicate},
		{Name: "approval_decided_once", Run: plain(approvalDecidedOnce), Control: approvalRedecides},
		{Name: "approval_consumed_once", Run: plain(approvalConsumedOnce), Control: approvalReconsumes},
		{Name: "approval_list_filters", Run: plain(approvalListFilters), Control: approvalListIgnoresScope},
		{Name: "approval_survives_reopen", Run: approvalSurvivesReopen, Control: forgetsApprovalsOnReopen},
	}
}

func sampleApproval(id, scope, work string, sec int) storage.Approval {
	return storage.Approval{
		ID: id, Scope: scope, Work: work, Binding: "deploy", Kind: storage.ApprovalCall, Operation: "github.pr.merge",
		InputHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", State: storage.ApprovalPending,
		CreatedAt: at(sec), ExpiresAt: at(sec + 3600),
	}
}

func insertApproval(ctx context.Context, s storage.Store, a storage.Approval) error {
	return s.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertApproval(ctx, &a) })
}

func keyOf(a storage.Approval) storage.ApprovalKey {
	return storage.ApprovalKey{Work: a.Work, Kind: a.Kind, Operation: a.Operation, InputHash: a.InputHash}
}

func approvalRoundTrip(ctx context.Context, s storage.Store) error {
	a := sampleApproval("apr_1", "ops", "wrk_1", 1)
	start := storage.Approval{ID: "apr_2", Scope: "ops", Work: "wrk_2", Binding: "deploy", Kind: storage.ApprovalStart, State: storage.ApprovalPending, CreatedAt: at(2)}
	if err := first(insertApproval(ctx, s, a), insertApproval(ctx, s, start)); err != nil {
		return err
	}
	got, err := s.GetApproval(ctx, a.ID)
	if err != nil {
		return err
	}
	open, err := s.GetOpenApproval(ctx, keyOf(a))
	if err != nil {
		return fmt.Errorf("the open approval of its key: %w", err)
	}
	gs, err := s.GetOpenApproval(ctx, keyOf(start))
	_, missing := s.GetApproval(ctx, "apr_none")
	return first(err,
		want(got == a, "the approval read back = %+v, want %+v", got, a),
		want(open == a, "the open approval of its key = %+v, want %+v", open, a),
		want(gs == start, "the start approval read back = %+v, want %+v", gs, start),
		wantErr(missing, storage.ErrNotFound, "an approval that does not exist"),
	)
}

func approvalOneOpenPerKey(ctx context.Context, s storage.Store) error {
	a := sampleApproval("apr_1", "ops", "wrk_1", 1)
	if err := insertApproval(ctx, s, a); err != nil {
		return err
	}
	again := sampleApproval("apr_2", "ops", "wrk_1", 2)
	dup := insertApproval(ctx, s, again)
	sameID := sampleApproval("apr_1", "ops", "wrk_9", 2)
	dupID := insertApproval(ctx, s, sameID)
	other := sampleApproval("apr_3", "ops", "wrk_1", 3)
	other.InputHash = "another"
	otherErr := insertApproval(ctx, s, other)
	if err := first(
		wantErr(dup, storage.ErrDuplicate, "a second open approval of the same key"),
		wantErr(dupID, storage.ErrDuplicate, "an approval whose id exists"),
		want(otherErr == nil, "an approval of another input: %v", otherErr),
	); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error { _, err := tx.ConsumeApproval(ctx, a.ID, at(4)); return err }); err != nil {
		return err
	}
	if err := insertApproval(ctx, s, again); err != nil {
		return fmt.Errorf("a new approval of a key whose approval was consumed: %w", err)
	}
	open, err := s.GetOpenApproval(ctx, keyOf(a))
	return first(err, want(open.ID == again.ID, "the open approval of the key = %s, want %s", open.ID, again.ID))
}

func approvalDecidedOnce(ctx context.Context, s storage.Store) error {
	a := sampleApproval("apr_1", "ops", "wrk_1", 1)
	if err := insertApproval(ctx, s, a); err != nil {
		return err
	}
	decide := func(id, state, actor, note string, sec int) (storage.Approval, error) {
		var out storage.Approval
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			out, err = tx.DecideApproval(ctx, &storage.DecideApprovalParams{ID: id, State: state, Actor: actor, Note: note, At: at(sec)})
			return err
		})
		return out, err
	}
	got, err := decide(a.ID, storage.ApprovalDenied, "operator:alice", "not on a Friday", 5)
	if err != nil {
		return err
	}
	_, again := decide(a.ID, storage.ApprovalApproved, "operator:bob", "", 6)
	_, missing := decide("apr_none", storage.ApprovalApproved, "operator:bob", "", 6)
	read, err := s.GetApproval(ctx, a.ID)
	return first(err,
		want(got.State == storage.ApprovalDenied && got.Actor == "operator:alice" && got.Note == "not on a Friday" && got.DecidedAt.Equal(at(5)),
			"the decided approval = %+v", got),
		wantErr(again, storage.ErrFenced, "deciding an approval a second time"),
		wantErr(missing, storage.ErrNotFound, "deciding an approval that does not exist"),
		want(read.State == storage.ApprovalDenied && read.Actor == "operator:alice", "after a second decision the approval = %+v, want the first", read),
		want(read.ConsumedAt.IsZero(), "a decision consumed the approval"),
	)
}

func approvalConsumedOnce(ctx context.Context, s storage.Store) error {
	a := sampleApproval("apr_1", "ops", "wrk_1", 1)
	if err := insertApproval(ctx, s, a); err != nil {
		return err
	}
	consume := func(id string, sec int) (storage.Approval, error) {
		var out storage.Approval
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			out, err = tx.ConsumeApproval(ctx, id, at(sec))
			return err
		})
		return out, err
	}
	got, err := consume(a.ID, 7)
	if err != nil {
		return err
	}
	_, again := consume(a.ID, 8)
	_, missing := consume("apr_none", 8)
	_, open := s.GetOpenApproval(ctx, keyOf(a))
	read, err := s.GetApproval(ctx, a.ID)
	return first(err,
		want(got.ConsumedAt.Equal(at(7)), "the consumed approval = %+v", got),
		wantErr(again, storage.ErrFenced, "consuming an approval a second time"),
		wantErr(missing, storage.ErrNotFound, "consuming an approval that does not exist"),
		wantErr(open, storage.ErrNotFound, "the open approval of a consumed one's key"),
		want(read.ConsumedAt.Equal(at(7)), "after a second consumption the approval was consumed at %v, want %v", read.ConsumedAt, at(7)),
	)
}

func approvalListFilters(ctx context.Context, s storage.Store) error {
	for i, a := range []storage.Approval{
		sampleApproval("apr_1", "ops", "wrk_1", 1),
		sampleApproval("apr_2", "dev", "wrk_2", 2),
		sampleApproval("apr_3", "ops", "wrk_3", 3),
		sampleApproval("apr_4", "ops", "wrk_4", 4),
	} {
		if err := insertApproval(ctx, s, a); err != nil {
			return fmt.Errorf("approval %d: %w", i, err)
		}
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.DecideApproval(ctx, &storage.DecideApprovalParams{ID: "apr_3", State: storage.ApprovalApproved, Actor: "operator:alice", At: at(5)})
		return err
	}); err != nil {
		return err
	}
	ids := func(p storage.ListApprovalsParams) ([]string, error) {
		rows, err := s.ListApprovals(ctx, &p)
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out, err
	}
	ops, err1 := ids(storage.ListApprovalsParams{Scope: "ops"})
	pending, err2 := ids(storage.ListApprovalsParams{Scope: "ops", State: storage.ApprovalPending})
	work, err3 := ids(storage.ListApprovalsParams{Work: "wrk_2"})
	page, err4 := ids(storage.ListApprovalsParams{Scope: "ops", Page: storage.Page{After: &storage.Position{CreatedAt: at(1), ID: "apr_1"}, Limit: 1}})
	none, err5 := s.ListApprovals(ctx, &storage.ListApprovalsParams{Scope: "nowhere"})
	return first(errors.Join(err1, err2, err3, err4, err5),
		want(fmt.Sprint(ops) == "[apr_1 apr_3 apr_4]", "the approvals of scope ops = %v", ops),
		want(fmt.Sprint(pending) == "[apr_1 apr_4]", "the pending approvals of scope ops = %v", pending),
		want(fmt.Sprint(work) == "[apr_2]", "the approvals of Work wrk_2 = %v", work),
		want(fmt.Sprint(page) == "[apr_3]", "the page after apr_1 = %v", page),
		want(none != nil && len(none) == 0, "the approvals of a scope with none = %v, want an empty list", none),
	)
}

func approvalSurvivesReopen(ctx context.Context, env *Env) error {
	a := sampleApproval("apr_1", "ops", "wrk_1", 1)
	if err := insertApproval(ctx, env.Store, a); err != nil {
		return err
	}
	if err := env.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.DecideApproval(ctx, &storage.DecideApprovalParams{ID: a.ID, State: storage.ApprovalApproved, Actor: "operator:alice", Note: "ok", At: at(2)})
		return err
	}); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	got, err := env.Store.GetOpenApproval(ctx, keyOf(a))
	if err != nil {
		return fmt.Errorf("the approval after a reopen: %w", err)
	}
	list, err := env.Store.ListApprovals(ctx, &storage.ListApprovalsParams{Scope: "ops"})
	return first(err,
		want(got.State == storage.ApprovalApproved && got.Actor == "operator:alice" && got.Note == "ok", "the approval after a reopen = %+v", got),
		want(len(list) == 1, "the approvals listed after a reopen = %d, want 1", len(list)),
	)
}
