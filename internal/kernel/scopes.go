package kernel

import (
	"context"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
)

// Scopes is the kernel's port onto the configuration: what a scope has in
// one configuration generation. The configuration service answers it from
// its snapshots (the daemon and the test stack hand it to Control and to
// the toolbelt alike); the kernel never reads the configuration itself.
type Scopes interface {
	// Scope returns scope id as configuration generation generation has
	// it, 0 meaning the active generation. ok is false when that
	// generation has no such scope or cannot be read; the view then still
	// names the generation when it is known.
	Scope(ctx context.Context, generation int64, id string) (view ScopeView, ok bool)
}

// ScopeView is what the rules of operator events and new Work need to
// know of a scope: ids and flags only, never a configured value.
type ScopeView struct {
	ID string
	// Generation is the configuration generation the view was read from.
	Generation int64
	// Active: enabled, not removed and every ancestor active. Only an
	// active scope takes operator events and new Work.
	Active bool
	// Removed: the generation keeps the scope only as a tombstone.
	Removed bool
	// Bindings are the scope's bindings by id.
	Bindings map[string]BindingView
}

// BindingView is what the rules need to know of a binding.
type BindingView struct {
	// Grants are the ids of the binding's named grants.
	Grants []string
}

// ScopeTable is a fixed Scopes: every generation has the same scopes, each
// under its key (the view's ID is set from it).
type ScopeTable map[string]ScopeView

// Scope returns the table's view of id.
func (t ScopeTable) Scope(_ context.Context, _ int64, id string) (ScopeView, bool) {
	v, ok := t[id]
	if ok {
		v.ID = id
	}
	return v, ok
}

// lookupScope reads a scope through the port; a scope it does not know is
// an inactive view of that id.
func lookupScope(ctx context.Context, scopes Scopes, generation int64, id string) ScopeView {
	v, ok := scopes.Scope(ctx, generation, id)
	if !ok {
		return ScopeView{ID: id, Generation: v.Generation}
	}
	v.ID = id
	return v
}

// requireActive is the rule of where an operator's event or Work may go:
// a scope active in the view's generation.
func (v ScopeView) requireActive() error {
	if !v.Active {
		return Refuse(extension.ErrInvalid, ErrScopeInactive.Code, "scope %s is not an active scope of configuration generation %d (open-conduit scopes lists them)", clip(v.ID), v.Generation)
	}
	return nil
}

// ActiveScope refuses, with scope_inactive, a scope that is not active in
// the active configuration generation.
func ActiveScope(ctx context.Context, scopes Scopes, id string) error {
	return lookupScope(ctx, scopes, 0, id).requireActive()
}

// WorkBinding applies the rules of a new Work's binding to the scope it is
// created in, as configuration generation generation has it (0: the active
// one): the scope is active there; the binding is the one named or, when
// none is, the scope's only binding (binding_required when it has several);
// it is one of the scope's bindings (unknown_binding); and every grant
// asked for is one of that binding's (unknown_grant). It returns the
// binding the Work runs with. Control.CreateWork applies it to the active
// generation; the toolbelt's create_work to its attempt's pinned one, after
// defaulting the binding to the attempt's own.
func WorkBinding(ctx context.Context, scopes Scopes, generation int64, scope, binding string, grants []string) (string, error) {
	v := lookupScope(ctx, scopes, generation, scope)
	if err := v.requireActive(); err != nil {
		return "", err
	}
	if binding == "" {
		if len(v.Bindings) != 1 {
			names := make([]string, 0, len(v.Bindings))
			for id := range v.Bindings {
				names = append(names, id)
			}
			slices.Sort(names)
			return "", Refuse(extension.ErrInvalid, ErrBindingRequired.Code, "scope %s has %d bindings (%s); name one with binding", v.ID, len(names), strings.Join(names, ", "))
		}
		for id := range v.Bindings {
			binding = id
		}
	}
	b, ok := v.Bindings[binding]
	if !ok {
		return "", Refuse(extension.ErrInvalid, ErrUnknownBinding.Code, "scope %s has no binding %s; name one of its bindings (open-conduit scopes lists them)", v.ID, clip(binding))
	}
	for _, g := range grants {
		if !slices.Contains(b.Grants, g) {
			return "", Refuse(extension.ErrInvalid, ErrUnknownGrant.Code, "binding %s of scope %s has no grant %s; ask only for the binding's own grants", binding, v.ID, clip(g))
		}
	}
	return binding, nil
}

// clip bounds a caller's text quoted back in a refusal.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
