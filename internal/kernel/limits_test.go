package kernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func (b *bundle) pin(t *testing.T, root string) storage.CausalRoot {
	t.Helper()
	pin, err := b.store.GetCausalRoot(context.Background(), root)
	if err != nil {
		t.Fatalf("causal root %s: %v", root, err)
	}
	return pin
}

// A route start takes the causal limits current at that moment; a root
// pinned earlier keeps its own.
func TestRuntimeSetCausalReachesTheNextRouteStart(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = []kernel.Route{{ID: "loop", MatchType: "loop.*", Binding: "b", Effect: kernel.EffectStart}}
	if got := b.rt.Causal(); got != kernel.DefaultCausalLimits {
		t.Fatalf("causal limits at start = %+v, want the defaults %+v", got, kernel.DefaultCausalLimits)
	}
	// A chain pinned under the defaults.
	old, _ := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "old-0"})
	oldChild, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "old-1", Parent: old.ID})
	if d.Started == "" {
		t.Fatalf("depth 1 under the defaults: %+v", d)
	}

	// A route start's core.work.created is one step below the event, so
	// depth 2 lets a root and its child start Work, not a grandchild.
	b.rt.SetCausal(kernel.CausalLimits{MaxDepth: 2})
	if got := b.rt.Causal(); got.MaxDepth != 2 || got.PerMinute != kernel.DefaultCausalLimits.PerMinute {
		t.Fatalf("causal limits after SetCausal = %+v, want depth 2 and the default rate", got)
	}
	// The pinned root keeps its depth: depth 2 still starts.
	if _, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "old-2", Parent: oldChild.ID}); d.Started == "" {
		t.Fatalf("depth 2 of a root pinned before SetCausal: %+v, want started under its pinned limits", d)
	}
	if pin := b.pin(t, old.ID); pin.MaxDepth != kernel.DefaultCausalLimits.MaxDepth {
		t.Fatalf("the earlier root's pin changed to %+v", pin)
	}
	// A new root pins the new limits at its first start.
	root, _ := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "new-0"})
	child, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "new-1", Parent: root.ID})
	if d.Started == "" {
		t.Fatalf("depth 1 under the new limits: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "new-2", Parent: child.ID})
	if d.Started != "" || d.Effect != kernel.EffectDrop || !strings.Contains(d.Detail, "causal_depth_exceeded") {
		t.Fatalf("depth 2 of a root pinned after SetCausal(depth 2): %+v, want dropped", d)
	}
	if pin := b.pin(t, root.ID); pin.MaxDepth != 2 {
		t.Fatalf("the new root pinned %+v, want depth 2", pin)
	}
}

// An operator's derived event takes the kernel's current causal limits
// on a root not pinned yet.
func TestControlSetCausalReachesTheNextDerivedEmit(t *testing.T) {
	b := setup(t)
	b.rt.SetCausal(kernel.CausalLimits{MaxDepth: 8, PerMinute: 100})
	early, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note", Parent: early.Event.ID}); err != nil {
		t.Fatal(err)
	}

	b.rt.SetCausal(kernel.CausalLimits{MaxDepth: 4, PerMinute: 1})
	// The early root was pinned at 100 a minute: a second emission passes.
	if _, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note", Parent: early.Event.ID}); err != nil {
		t.Fatalf("a root pinned before SetCausal took the new rate: %v", err)
	}
	late, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note", Parent: late.Event.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note", Parent: late.Event.ID})
	mustCode(t, err, "causal_rate_exceeded")
	if pin := b.pin(t, early.Event.ID); pin.MaxDepth != 8 || pin.PerMinute != 100 {
		t.Fatalf("the early root is pinned %+v, want 8 and 100", pin)
	}
	if pin := b.pin(t, late.Event.ID); pin.MaxDepth != 4 || pin.PerMinute != 1 {
		t.Fatalf("the late root is pinned %+v, want 4 and 1", pin)
	}
}
