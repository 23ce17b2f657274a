package storagetest

import (
	"context"
	"errors"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the generations area: configuration generations and scope
// records.

var swallowsOutOfOrderGenerations = txControl("swallows_out_of_order_generations", "InsertGeneration of a number that is not the next reports success (and writes nothing)",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsGenerationsTx{tx} })

type swallowsGenerationsTx struct{ storage.Tx }

func (t swallowsGenerationsTx) InsertGeneration(ctx context.Context, g *storage.Generation) error {
	if err := t.Tx.InsertGeneration(ctx, g); !errors.Is(err, storage.ErrFenced) {
		return err
	}
	return nil
}

var latestGenerationIsFirst = stateless("latest_generation_is_first", "LatestGeneration returns the lowest generation, not the highest",
	func(s storage.Store) storage.Store { return firstGeneration{s} })

func lowestGeneration(ctx context.Context, r storage.Reader) (storage.Generation, error) {
	if _, err := r.LatestGeneration(ctx); err != nil {
		return storage.Generation{}, err
	}
	return r.GetGeneration(ctx, 1)
}

// lowestGenerationGuard is the guard whose LatestGeneration is
// lowestGeneration's.
func lowestGenerationGuard(ctx context.Context, r storage.Reader, exeID string) (storage.CallGuard, error) {
	g, err := r.GetCallGuard(ctx, exeID)
	if err != nil {
		return g, err
	}
	if low, err := lowestGeneration(ctx, r); err == nil {
		g.LatestGeneration = low.Number
	}
	return g, nil
}

type firstGeneration struct{ storage.Store }

func (s firstGeneration) GetCallGuard(ctx context.Context, exeID string) (storage.CallGuard, error) {
	return lowestGenerationGuard(ctx, s.Store, exeID)
}

func (s firstGeneration) LatestGeneration(ctx context.Context) (storage.Generation, error) {
	return lowestGeneration(ctx, s.Store)
}

func (s firstGeneration) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(firstGenerationTx{tx}) })
}

type firstGenerationTx struct{ storage.Tx }

func (t firstGenerationTx) GetCallGuard(ctx context.Context, exeID string) (storage.CallGuard, error) {
	return lowestGenerationGuard(ctx, t.Tx, exeID)
}

func (t firstGenerationTx) LatestGeneration(ctx context.Context) (storage.Generation, error) {
	return lowestGeneration(ctx, t.Tx)
}

var scopePutKeepsFirst = txControl("scope_put_keeps_first", "PutScopeRecord of a scope with a record keeps the old record",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return keepsScopeTx{tx} })

type keepsScopeTx struct{ storage.Tx }

func (t keepsScopeTx) PutScopeRecord(ctx context.Context, r *storage.ScopeRecord) error {
	rs, err := t.ListScopeRecords(ctx)
	if err != nil {
		return err
	}
	for _, old := range rs {
		if old.ID == r.ID {
			return nil
		}
	}
	return t.Tx.PutScopeRecord(ctx, r)
}
