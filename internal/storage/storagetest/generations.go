package storagetest

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Committed configuration generations, numbered 1, 2, … without gaps, and
// the committed scope records.

func generationCases() []Case {
	return []Case{
		{Name: "generation_sequence", Run: plain(generationSequence), Control: swallowsOutOfOrderGenerations},
		{Name: "generation_round_trip", Run: generationRoundTrip, Control: latestGenerationIsFirst},
		{Name: "scope_records", Run: plain(scopeRecords), Control: scopePutKeepsFirst},
	}
}

func generation(n int64) *storage.Generation {
	return &storage.Generation{Number: n, Hash: fmt.Sprintf("hash-%d", n), Normalized: []byte(fmt.Sprintf(`{"version":1,"n":%d}`, n)),
		Actor: "operator:local", CreatedAt: at(int(n))}
}

func insertGeneration(ctx context.Context, s storage.Store, g *storage.Generation) error {
	return s.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertGeneration(ctx, g) })
}

func generationSequence(ctx context.Context, s storage.Store) error {
	_, none := s.LatestGeneration(ctx)
	_, noOne := s.GetGeneration(ctx, 1)
	if err := first(wantErr(none, storage.ErrNotFound, "the latest generation before the first"), wantErr(noOne, storage.ErrNotFound, "generation 1 before it")); err != nil {
		return err
	}
	zero := insertGeneration(ctx, s, generation(0))
	early := insertGeneration(ctx, s, generation(2))
	if err := insertGeneration(ctx, s, generation(1)); err != nil {
		return fmt.Errorf("generation 1: %w", err)
	}
	again := insertGeneration(ctx, s, &storage.Generation{Number: 1, Hash: "other", CreatedAt: at(9)})
	skip := insertGeneration(ctx, s, generation(3))
	if err := insertGeneration(ctx, s, generation(2)); err != nil {
		return fmt.Errorf("generation 2 after 1: %w", err)
	}
	one, err := s.GetGeneration(ctx, 1)
	if err != nil {
		return err
	}
	latest, err := s.LatestGeneration(ctx)
	if err != nil {
		return err
	}
	_, three := s.GetGeneration(ctx, 3)
	return first(
		wantSomeErr(zero, "generation 0"),
		wantErr(early, storage.ErrFenced, "generation 2 before 1"),
		wantErr(again, storage.ErrDuplicate, "generation 1 twice"),
		wantErr(skip, storage.ErrFenced, "generation 3 after 1"),
		want(one.Hash == "hash-1", "generation 1 = %+v, want the first one kept", one),
		want(latest.Number == 2, "the latest generation = %d, want 2", latest.Number),
		wantErr(three, storage.ErrNotFound, "the refused generation 3"),
	)
}

func generationRoundTrip(ctx context.Context, env *Env) error {
	for n := int64(1); n <= 3; n++ {
		if err := insertGeneration(ctx, env.Store, generation(n)); err != nil {
			return err
		}
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	s := env.Store
	latest, err := s.LatestGeneration(ctx)
	if err != nil {
		return fmt.Errorf("the latest generation (after a reopen): %w", err)
	}
	if !same(latest, *generation(3)) {
		return fmt.Errorf("the latest generation = %+v (normalized %s), want %+v", latest, latest.Normalized, generation(3))
	}
	for n := int64(1); n <= 2; n++ {
		g, err := s.GetGeneration(ctx, n)
		if err != nil {
			return err
		}
		if !same(g, *generation(n)) {
			return fmt.Errorf("generation %d = %+v, want %+v", n, g, generation(n))
		}
	}
	return nil
}

// scopeRecords: PutScopeRecord creates or replaces a scope's record whole;
// ListScopeRecords lists every record by id, and an empty list is empty,
// not nil.
func scopeRecords(ctx context.Context, s storage.Store) error {
	if empty, err := s.ListScopeRecords(ctx); err != nil || empty == nil || len(empty) != 0 {
		return fmt.Errorf("scope records of an empty store = %#v, %v; want an empty list", empty, err)
	}
	setup := storage.ScopeRecord{ID: "setup", Enabled: true, Active: true, Bindings: []string{"shell", "http"}, Routes: []string{"r1"}, Generation: 1, UpdatedAt: at(1)}
	alpha := storage.ScopeRecord{ID: "alpha", Parent: "setup", Enabled: true, Bindings: []string{"shell"}, Generation: 1, UpdatedAt: at(1)}
	removed := storage.ScopeRecord{ID: "setup", Parent: "root", Removed: true, Generation: 2, UpdatedAt: at(2)}
	put := func(rs ...storage.ScopeRecord) error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			for i := range rs {
				if err := tx.PutScopeRecord(ctx, &rs[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := put(setup, alpha); err != nil {
		return err
	}
	before, err := s.ListScopeRecords(ctx)
	if err != nil {
		return err
	}
	if len(before) != 2 || !same(before[0], alpha) || !same(before[1], setup) {
		return fmt.Errorf("scope records = %+v, want alpha then setup as put", before)
	}
	if err := put(removed); err != nil {
		return err
	}
	after, err := s.ListScopeRecords(ctx)
	if err != nil {
		return err
	}
	return want(len(after) == 2 && same(after[0], alpha) && same(after[1], removed) && len(after[1].Bindings) == 0 && len(after[1].Routes) == 0,
		"scope records after setup was replaced = %+v, want alpha and the replacement", after)
}
