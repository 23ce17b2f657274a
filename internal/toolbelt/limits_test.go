package toolbelt_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
)

// An execution's first emission off a new root pins the kernel's current
// causal limits, which the toolbelt reads; a root pinned before SetCausal
// keeps its own.
func TestToolbeltSetCausalReachesTheNextNewRoot(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	early, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(early.Token, "emit", `{"type":"test.note"}`, ""); err != nil {
		t.Fatal(err)
	}

	f.Env.Runtime.SetCausal(kernel.CausalLimits{MaxDepth: 8, PerMinute: 2})
	for i := range 3 {
		if _, err := f.Call(early.Token, "emit", `{"type":"test.note"}`, ""); err != nil {
			t.Fatalf("emission %d of a root pinned before SetCausal: %v", i+2, err)
		}
	}
	late, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := f.Call(late.Token, "emit", `{"type":"test.note"}`, ""); err != nil {
			t.Fatalf("emission %d under the new limits: %v", i+1, err)
		}
	}
	_, err = f.Call(late.Token, "emit", `{"type":"test.note"}`, "")
	mustCode(t, err, "causal_rate_exceeded")
	// create_work is bounded by the same limits.
	_, err = f.Call(late.Token, "create_work", `{}`, "")
	mustCode(t, err, "causal_rate_exceeded")

	for root, want := range map[string]int{early.Work.CreatedEvent: 1000, late.Work.CreatedEvent: 2} {
		pin, err := f.Env.Store.GetCausalRoot(ctx, root)
		if err != nil || pin.PerMinute != want {
			t.Fatalf("root %s pinned %+v (%v), want %d a minute", root, pin, err, want)
		}
	}
}
