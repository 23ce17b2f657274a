package storagetest

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

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
