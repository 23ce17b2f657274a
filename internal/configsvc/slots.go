package configsvc

import (
	"context"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// checkSlots holds the promise that a removed scope keeps its slot: a
// scope id an earlier generation removed (a tombstone, or no longer named)
// cannot come back as a different scope (another parent, or other
// bindings) while any Work of the old one is in the store. The same scope
// coming back (same parent, same bindings) is allowed. Each refusal is a
// scope_slot_taken diagnostic at the scope; it names only ids.
func checkSlots(ctx context.Context, rd storage.Reader, snap *config.Snapshot) ([]config.Diagnostic, error) {
	recs, err := rd.ListScopeRecords(ctx)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]storage.ScopeRecord, len(recs))
	for _, r := range recs {
		byID[r.ID] = r
	}
	var out []config.Diagnostic
	for _, d := range snap.DomainScopes() {
		old, ok := byID[d.ID]
		if !ok || !old.Removed || d.Removed {
			continue
		}
		if old.Parent == d.Parent && slices.Equal(old.Bindings, d.Bindings) {
			continue
		}
		n, err := rd.CountWork(ctx, d.ID, everyWorkState)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		out = append(out, config.Diagnostic{Pointer: "/scopes/" + d.ID, Code: config.CodeScopeSlotTaken,
			Remedy: fmt.Sprintf("scope id %s was removed in generation %d and %d Work of that scope is still in the store; give this scope another id, or bring the old one back with its own parent and bindings", d.ID, old.Generation, n)})
	}
	return out, nil
}

// ValidateStored is Validate with the checks that read the store: a
// scope's slot an earlier generation removed is not taken by another
// scope (scope_slot_taken). The validate route answers through it, and
// Apply refuses what it refuses.
func (s *Service) ValidateStored(ctx context.Context, data []byte) (*config.Snapshot, config.Result, error) {
	snap, res := s.Validate(s.keepRedacted(data))
	if !res.Valid() {
		return snap, res, nil
	}
	diags, err := checkSlots(ctx, s.opts.Store, snap)
	if err != nil {
		return nil, config.Result{}, err
	}
	if len(diags) > 0 {
		// Refused like any invalid configuration: no snapshot, no hash.
		return nil, config.Result{Diagnostics: diags, Warnings: nil}, nil
	}
	return snap, res, nil
}

// everyWorkState is every state a Work can be in: a finished Work holds
// its scope's slot as much as a running one.
var everyWorkState = []storage.WorkState{storage.WorkReady, storage.WorkRunning, storage.WorkWaiting,
	storage.WorkSucceeded, storage.WorkFailed, storage.WorkCancelled}
