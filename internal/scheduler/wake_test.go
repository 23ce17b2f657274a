package scheduler_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The store the daemon hands its request handlers wakes the scheduler
// after a transaction that could start or wake Work, and only then: an
// Event no route takes and a refused control wake nothing; created Work
// and a cancel each wake it once.
func TestWakeOnWritesWakesOnlyForWhatARoundActsOn(t *testing.T) {
	var wakes atomic.Int64
	h := buildHarness(t, t.TempDir(), nil, func(s storage.Store) storage.Store {
		return scheduler.WakeOnWrites(s, func() { wakes.Add(1) })
	})
	t.Cleanup(h.close)
	step := func(what string, want int64, do func() error) {
		t.Helper()
		before := wakes.Load()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := wakes.Load() - before; got != want {
			t.Fatalf("%s woke the scheduler %d times, want %d", what, got, want)
		}
	}
	step("an Event no route takes", 0, func() error {
		_, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "bench.tick", Data: json.RawMessage(`{}`)})
		return err
	})
	var w storage.Work
	step("created Work", 1, func() error {
		res, err := h.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: "b1", Keys: []string{"k"}})
		w = res.Work
		return err
	})
	step("an Event keyed to the Work that no route takes", 0, func() error {
		_, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "bench.tick", CorrelationKey: "k", Data: json.RawMessage(`{}`)})
		return err
	})
	step("a refused write", 0, func() error {
		_, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: "wrk_missing"})
		if err == nil {
			t.Fatal("a cancel of unknown Work was accepted")
		}
		return nil
	})
	step("a cancel", 1, func() error {
		_, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID})
		return err
	})
}
