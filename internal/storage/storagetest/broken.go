package storagetest

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The negative controls: deliberately wrong stores, each a wrapper around a
// real store that breaks exactly one rule of the contract (broken_*.go, by
// area). Every Case names the one it must fail; CheckNegativeControls
// proves it does. Never use them outside tests.

// EpochBlind wraps a store so that its fenced execution updates ignore the
// epoch and owner the caller names: a superseded attempt can act again. It is
// the deliberately wrong implementation that the conformance suite and the
// scheduler's property test must reject (their negative controls). Never use
// it outside tests.
func EpochBlind(s storage.Store) storage.Store { return epochBlind{s} }

type epochBlind struct{ storage.Store }

func (s epochBlind) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(epochBlindTx{tx}) })
}

type epochBlindTx struct{ storage.Tx }

func (t epochBlindTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	if cur, err := t.GetExecution(ctx, p.ID); err == nil {
		q := *p
		q.Epoch, q.Owner = cur.Epoch, ""
		p = &q
	}
	return t.Tx.UpdateExecution(ctx, p)
}

func (t epochBlindTx) RenewLease(ctx context.Context, p *storage.RenewLeaseParams) (storage.Execution, error) {
	if cur, err := t.GetExecution(ctx, p.ID); err == nil {
		q := *p
		q.Epoch, q.Owner = cur.Epoch, cur.Owner
		p = &q
	}
	return t.Tx.RenewLease(ctx, p)
}

var epochBlindControl = stateless("epoch_blind", "fenced execution updates and lease renewals ignore the epoch and owner", EpochBlind)

// stateless is a control whose wrapper keeps no state.
func stateless(name, breaks string, wrap func(storage.Store) storage.Store) Control {
	return Control{Name: name, Breaks: breaks, New: func() func(storage.Store) storage.Store { return wrap }}
}

// txControl is a control that wraps every transaction of the store; the
// wrapper also gets the store, to read what committed.
func txControl(name, breaks string, wrap func(s storage.Store, tx storage.Tx) storage.Tx) Control {
	return stateless(name, breaks, func(s storage.Store) storage.Store { return txWrapped{Store: s, wrap: wrap} })
}

type txWrapped struct {
	storage.Store
	wrap func(s storage.Store, tx storage.Tx) storage.Tx
}

func (s txWrapped) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(s.wrap(s.Store, tx)) })
}

// afterReopen is a control that is the real store until the case reopens
// the database, and wrap's store from then on: an engine that keeps
// something in memory only and loses it at a restart.
func afterReopen(name, breaks string, wrap func(storage.Store) storage.Store) Control {
	return Control{Name: name, Breaks: breaks, New: func() func(storage.Store) storage.Store {
		opens := 0
		return func(s storage.Store) storage.Store {
			opens++
			if opens == 1 {
				return s
			}
			return wrap(s)
		}
	}}
}
