package scheduler_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// An operator's hold without stop lets the running attempt go on: a new
// daemon adopts it as any other, and it ends its Work; while the hold
// lasts no other attempt starts.
func TestOperatorHoldLetsTheRunningAttemptBeAdopted(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "freeze"}); err != nil {
		t.Fatal(err)
	}
	h.restart("daemon-2")
	h.settle(seg)
	if n, err := h.s.RecoverOrphans(ctx); err != nil || n != 1 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	rec := h.plain.Next(t)
	if rec.Kind != "recover" || rec.Req.Epoch != 2 {
		t.Fatalf("adoption = %s %+v", rec.Kind, rec.Req)
	}
	h.finish(rec, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkSucceeded || got.Held() {
		t.Fatalf("work = %+v", got)
	}
}

// A hold with stop fences the attempt, and no new attempt starts until
// the hold is released.
func TestOperatorHoldStartsNothingUntilRelease(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "freeze", Stop: true}); err != nil {
		t.Fatal(err)
	}
	h.tick() // stops the fenced attempt
	h.settle(seg)
	h.tick()
	if got := h.execution(seg.Req.ExecutionID); got.State != storage.ExecutionFinished {
		t.Fatalf("the stopped attempt = %+v", got)
	}
	h.tick()
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatal("a held Work started")
	}
	if _, err := h.ctl.Release(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	if next := h.plain.Next(t); next.Req.ExecutionID == seg.Req.ExecutionID || h.work(w.ID).Attempts != 2 {
		t.Fatalf("release started %+v", next.Req)
	}
}
