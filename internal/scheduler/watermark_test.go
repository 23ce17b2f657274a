package scheduler_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// TestDeclaredWaitIsNotSatisfiedByAnAcknowledgedInput: a backscanned wake
// queues an older event behind newer inputs, so the last input position is
// not the attempt's latest acknowledged event. The next attempt's wait must
// still start after everything that attempt acknowledged: an input it was
// already given never satisfies its wait again.
func TestDeclaredWaitIsNotSatisfiedByAnAcknowledgedInput(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.routes["s1"] = []kernel.Route{{ID: "queue", MatchType: "in.*", Effect: kernel.EffectQueue}}
	w := h.create("b1", "pr/9")
	h.tick()
	seg := h.plain.Next(t)

	// While the first attempt runs: b (no route: recorded, not queued),
	// then a (queued as input).
	b, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "ev.b", CorrelationKey: "pr/9"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "in.a", CorrelationKey: "pr/9"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Decision.Effect != kernel.EffectQueue || b.Decision.Effect != kernel.EffectUnmatched {
		t.Fatalf("decisions: a %+v, b %+v", a.Decision, b.Decision)
	}
	// The first attempt waits for ev.b: the backscan finds b and queues it
	// after a.
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"ev.b"}}})
	h.finish(seg, executor.Result{Outcome: executor.Succeeded})
	ins, _ := h.store.ListInputs(ctx, &storage.ListInputsParams{Work: w.ID})
	if len(ins) != 3 || ins[1].Event != a.Event.ID || ins[2].Event != b.Event.ID {
		t.Fatalf("inputs = %+v", ins)
	}

	// The second attempt acknowledges a and b, then waits for in.a: a was
	// already given to it, so only a new in.a may wake the Work.
	seg2 := h.plain.Next(t)
	if got := h.execution(seg2.Req.ExecutionID); got.InputWatermark != 3 {
		t.Fatalf("second attempt acknowledged %d inputs, want 3", got.InputWatermark)
	}
	h.declare(seg2, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"in.a"}}})
	h.finish(seg2, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkWaiting {
		wt, _ := h.store.ListWaits(ctx, &storage.ListWaitsParams{Work: w.ID})
		t.Fatalf("the Work is %s, not waiting: its wait was satisfied by an input it had already acknowledged (waits %+v)", got.State, wt)
	}
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatalf("a third attempt started with no new input: %+v", extra.Req)
	}
	// A new in.a wakes it.
	a2, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "in.a", CorrelationKey: "pr/9"})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Decision.Effect != kernel.EffectWake {
		t.Fatalf("a new in.a: %+v", a2.Decision)
	}
}
