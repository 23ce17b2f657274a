package configsvc

import (
	"context"
	"slices"

	"github.com/open-conduit/open-conduit/internal/kernel"
)

var _ kernel.Scopes = (*Service)(nil)

// Scope answers the kernel's rules of operator events and new Work (and
// the toolbelt's create_work) from a generation's snapshot: generation 0
// is the active one, another the generation an attempt is pinned to. A
// removed scope is inactive and has no bindings; only ids and flags are
// passed on, never a configured value.
func (s *Service) Scope(ctx context.Context, generation int64, id string) (kernel.ScopeView, bool) {
	snap := s.Active()
	if generation != 0 {
		var err error
		if snap, err = s.Snapshot(ctx, generation); err != nil {
			return kernel.ScopeView{Generation: generation}, false
		}
	}
	if snap == nil {
		return kernel.ScopeView{Generation: generation}, false
	}
	v := kernel.ScopeView{ID: id, Generation: snap.Generation}
	sc, ok := snap.Scope(id)
	if !ok {
		return v, false
	}
	v.Active = sc.Active && sc.Bindings != nil
	v.Removed = sc.Removed
	v.Bindings = make(map[string]kernel.BindingView, len(sc.Bindings))
	for bid, b := range sc.Bindings {
		grants := make([]string, 0, len(b.Grants))
		for g := range b.Grants {
			grants = append(grants, g)
		}
		slices.Sort(grants)
		v.Bindings[bid] = kernel.BindingView{Grants: grants}
	}
	return v, true
}
