package configsvc_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// TestScopeViews: the service answers the kernel's Scopes port from the
// active generation (0) or a pinned one, ids and flags only.
func TestScopeViews(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	var scopes kernel.Scopes = b.svc
	setup, ok := scopes.Scope(ctx, 0, "setup")
	want := kernel.ScopeView{ID: "setup", Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"shell": {Grants: []string{"extra"}}}}
	if !ok || !reflect.DeepEqual(setup, want) {
		t.Fatalf("setup = %+v, %v; want %+v", setup, ok, want)
	}
	if v, ok := scopes.Scope(ctx, 0, "nope"); ok || v.Generation != 1 || v.Active {
		t.Errorf("an unknown scope = %+v, %v", v, ok)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: noTeam, ExpectedGeneration: 1, ExpectedHash: hashOf(t, noTeam), Actor: "operator:local"}); err != nil {
		t.Fatal(err)
	}
	if v, ok := scopes.Scope(ctx, 0, "team"); !ok || v.Active || len(v.Bindings) != 0 || v.Generation != 2 {
		t.Errorf("a removed scope = %+v, %v", v, ok)
	}
	if v, ok := scopes.Scope(ctx, 1, "team"); !ok || !v.Active || len(v.Bindings) != 2 || v.Generation != 1 {
		t.Errorf("the scope in its pinned generation = %+v, %v", v, ok)
	}
	if v, ok := scopes.Scope(ctx, 9, "setup"); ok || v.Active {
		t.Errorf("an unknown generation = %+v, %v", v, ok)
	}
}
