// Package humanport adapts the daemon's coordination storage and its
// kernel to the human extension's Port: the extension keeps its approvals
// without knowing the store.
//
// It must never decide an approval without accepting, in the same
// transaction, the Event that wakes the Work when the extension asks for
// it, and never list approvals without the scope a query names.
package humanport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/human"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Port is the human extension's port over storage.
type Port struct {
	Store   storage.Store
	Runtime *kernel.Runtime
	IDs     *ids.Generator
}

var _ human.Port = (*Port)(nil)

func fromStorage(a storage.Approval) human.Approval {
	return human.Approval{
		ID: a.ID, Scope: a.Scope, Work: a.Work, Binding: a.Binding, Kind: a.Kind, Operation: a.Operation, InputHash: a.InputHash,
		State: a.State, Actor: a.Actor, Note: a.Note, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, DecidedAt: a.DecidedAt, ConsumedAt: a.ConsumedAt,
	}
}

// conflict maps storage's lost races to extension.ErrConflict.
func conflict(err error) error {
	if errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrDuplicate) {
		return fmt.Errorf("%w: %v", extension.ErrConflict, err)
	}
	return err
}

// Get returns an approval.
func (p *Port) Get(ctx context.Context, id string) (human.Approval, error) {
	a, err := p.Store.GetApproval(ctx, id)
	return fromStorage(a), err
}

// Open returns the open approval of key.
func (p *Port) Open(ctx context.Context, k human.Key) (human.Approval, error) {
	a, err := p.Store.GetOpenApproval(ctx, storage.ApprovalKey{Work: k.Work, Kind: k.Kind, Operation: k.Operation, InputHash: k.InputHash})
	return fromStorage(a), err
}

// Create stores a pending approval with a new id.
func (p *Port) Create(ctx context.Context, a human.Approval) (human.Approval, error) {
	rec := storage.Approval{
		ID: p.IDs.New(ids.Approval), Scope: a.Scope, Work: a.Work, Binding: a.Binding, Kind: a.Kind, Operation: a.Operation,
		InputHash: a.InputHash, State: storage.ApprovalPending, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
	}
	err := p.Store.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertApproval(ctx, &rec) })
	return fromStorage(rec), conflict(err)
}

// Decide decides a pending approval and, with d.Wake, accepts and routes
// the human.approval.decided Event correlated to its Work in the same
// transaction.
func (p *Port) Decide(ctx context.Context, d human.Decision) (human.Approval, error) {
	var out storage.Approval
	err := p.Store.WithTx(ctx, func(tx storage.Tx) error {
		a, err := tx.DecideApproval(ctx, &storage.DecideApprovalParams{ID: d.ID, State: d.State, Actor: d.Actor, Note: d.Note, At: d.At})
		if err != nil {
			return err
		}
		out = a
		if !d.Wake {
			return nil
		}
		data, err := json.Marshal(map[string]string{"approval": a.ID, "state": a.State, "kind": a.Kind, "operation": a.Operation, "work": a.Work})
		if err != nil {
			return err
		}
		ev, err := p.Runtime.AcceptInTx(ctx, tx, storage.Event{
			Type: human.EventDecided, Source: kernel.SourceAction, Scope: a.Scope, CorrelationKey: a.Work,
			Data: data, Parent: d.Cause, Actor: d.Actor, DeliveryID: "human.decided:" + a.ID,
		})
		if err != nil {
			return err
		}
		_, err = p.Runtime.Route(ctx, tx, ev)
		return err
	})
	return fromStorage(out), conflict(err)
}

// Consume uses an open approval up.
func (p *Port) Consume(ctx context.Context, id string, at time.Time) (human.Approval, error) {
	var out storage.Approval
	err := p.Store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		out, err = tx.ConsumeApproval(ctx, id, at)
		return err
	})
	return fromStorage(out), conflict(err)
}

// List lists a scope's approvals.
func (p *Port) List(ctx context.Context, q human.ListQuery) ([]human.Approval, error) {
	if q.Scope == "" {
		return nil, errors.New("humanport: a list names its scope")
	}
	rows, err := p.Store.ListApprovals(ctx, &storage.ListApprovalsParams{Scope: q.Scope, Work: q.Work, State: q.State, Page: storage.Page{Limit: q.Limit}})
	if err != nil {
		return nil, err
	}
	out := make([]human.Approval, 0, len(rows))
	for _, a := range rows {
		out = append(out, fromStorage(a))
	}
	return out, nil
}
