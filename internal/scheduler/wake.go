package scheduler

import (
	"context"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// WakeOnWrites returns store, with one difference: a write transaction
// that commits having written something a scheduler round acts on calls
// wake once, after the commit. Those writes are the ones that can make
// Work claimable or give a round something to do: a Work created or
// changed (ready, released, retried, rebound, cancelled), an input queued
// (it can ready a waiting Work), a wait or timer registered, satisfied or
// fired, an execution created or changed (fenced by a cancel, stopped, so
// its slot is free). A transaction that only records (an Event no route
// takes, a toolbelt call record, a token, an Idempotency-Key record, a
// declaration the segment's end applies) wakes nothing, so a request that
// cannot start or wake Work costs no round.
//
// The daemon hands it to everything that writes on behalf of a request
// (the operator controls, the toolbelt), and the scheduler, which acts
// on its own writes in the same round, the store itself.
func WakeOnWrites(store storage.Store, wake func()) storage.Store {
	return &wakingStore{Store: store, wake: wake}
}

type wakingStore struct {
	storage.Store
	wake func()
}

func (s *wakingStore) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	var t *wakingTx
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		t = &wakingTx{Tx: tx}
		return fn(t)
	})
	if err == nil && t != nil && t.wakes {
		s.wake()
	}
	return err
}

// wakingTx marks the writes a round acts on.
type wakingTx struct {
	storage.Tx
	wakes bool
}

func (t *wakingTx) mark(err error) error {
	if err == nil {
		t.wakes = true
	}
	return err
}

func (t *wakingTx) InsertWork(ctx context.Context, p *storage.InsertWorkParams) (storage.Work, error) {
	w, err := t.Tx.InsertWork(ctx, p)
	return w, t.mark(err)
}

func (t *wakingTx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	w, err := t.Tx.UpdateWork(ctx, p)
	return w, t.mark(err)
}

func (t *wakingTx) QueueInput(ctx context.Context, p *storage.QueueInputParams) (storage.Input, error) {
	in, err := t.Tx.QueueInput(ctx, p)
	return in, t.mark(err)
}

func (t *wakingTx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	e, err := t.Tx.InsertExecution(ctx, p)
	return e, t.mark(err)
}

func (t *wakingTx) AdvanceEpoch(ctx context.Context, p *storage.AdvanceEpochParams) (storage.Execution, error) {
	e, err := t.Tx.AdvanceEpoch(ctx, p)
	return e, t.mark(err)
}

func (t *wakingTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	e, err := t.Tx.UpdateExecution(ctx, p)
	return e, t.mark(err)
}

func (t *wakingTx) InsertWait(ctx context.Context, p *storage.InsertWaitParams) (storage.Wait, error) {
	w, err := t.Tx.InsertWait(ctx, p)
	return w, t.mark(err)
}

func (t *wakingTx) UpdateWait(ctx context.Context, p *storage.UpdateWaitParams) (storage.Wait, error) {
	w, err := t.Tx.UpdateWait(ctx, p)
	return w, t.mark(err)
}

func (t *wakingTx) InsertTimer(ctx context.Context, tm *storage.Timer) error {
	return t.mark(t.Tx.InsertTimer(ctx, tm))
}

func (t *wakingTx) FireTimer(ctx context.Context, id string, at time.Time) error {
	return t.mark(t.Tx.FireTimer(ctx, id, at))
}
