package scheduler_test

import (
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// preflighting is an executor that says it cannot run here.
type preflighting struct {
	executor.Executor
	err error
}

func (p preflighting) Preflight(json.RawMessage) error { return p.err }

func TestPreflightHoldsTheWorkWithTheExecutorsReason(t *testing.T) {
	h := newHarness(t, func(o *scheduler.Options) {
		o.Executors["plain"] = preflighting{Executor: o.Executors["plain"], err: &executor.UnavailableError{
			Reason: executor.ReasonSandboxUnavailable, Detail: "install the bubblewrap package and retry the Work"}}
	})
	w := h.create("b1")
	h.tick()
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatal("the attempt started although the executor said it cannot run it")
	}
	got := h.work(w.ID)
	if got.BlockedReason != "sandbox_unavailable" || got.BlockedDetail != "install the bubblewrap package and retry the Work" || got.State != storage.WorkReady {
		t.Fatalf("work = %+v", got)
	}
	h.tokens.mu.Lock()
	n := len(h.tokens.calls)
	h.tokens.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d tokens issued before the preflight refused", n)
	}
}
