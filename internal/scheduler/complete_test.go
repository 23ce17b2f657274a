package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The tests of applying a completed segment's steps, each alone (see
// Scheduler.Complete for their order).

// inTx runs f in a transaction of the harness's store.
func (h *harness) inTx(f func(ctx context.Context, tx storage.Tx) error) error {
	ctx := context.Background()
	return h.store.WithTx(ctx, func(tx storage.Tx) error { return f(ctx, tx) })
}

// started creates a Work on binding and has the scheduler start it.
func (h *harness) started(t *testing.T, binding string, ex *schedulertest.Executor) (storage.Work, *schedulertest.Segment) {
	t.Helper()
	w := h.create(binding)
	h.tick()
	return w, ex.Next(t)
}

func TestCompleteStepFence(t *testing.T) {
	tests := []struct {
		name     string
		prepare  func(t *testing.T, h *harness, seg *schedulertest.Segment) (string, int64)
		stopping bool
		code     string
	}{
		{name: "the live epoch passes the fence", prepare: func(t *testing.T, h *harness, seg *schedulertest.Segment) (string, int64) {
			return seg.Req.ExecutionID, seg.Req.Epoch
		}},
		{name: "an unknown execution", code: kernel.ErrExecutionNotFound.Code, prepare: func(t *testing.T, h *harness, seg *schedulertest.Segment) (string, int64) {
			return "exe_unknown", 1
		}},
		{name: "another epoch is stale", code: kernel.ErrStaleEpoch.Code, prepare: func(t *testing.T, h *harness, seg *schedulertest.Segment) (string, int64) {
			return seg.Req.ExecutionID, seg.Req.Epoch + 1
		}},
		{name: "a finished segment is stale", code: kernel.ErrStaleEpoch.Code, prepare: func(t *testing.T, h *harness, seg *schedulertest.Segment) (string, int64) {
			h.finish(seg, executor.Result{Outcome: executor.Succeeded})
			return seg.Req.ExecutionID, seg.Req.Epoch
		}},
		{name: "a stopping attempt is its physical stop", stopping: true, prepare: func(t *testing.T, h *harness, seg *schedulertest.Segment) (string, int64) {
			if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
				t.Fatal(err)
			}
			if e := h.execution(seg.Req.ExecutionID); e.State != storage.ExecutionStopping {
				t.Fatalf("a cancelled execution is %s, want stopping", e.State)
			}
			return seg.Req.ExecutionID, seg.Req.Epoch
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			_, seg := h.started(t, "b1", h.plain)
			id, epoch := tt.prepare(t, h, seg)
			var exe storage.Execution
			var stopping bool
			err := h.inTx(func(ctx context.Context, tx storage.Tx) error {
				var err error
				exe, stopping, err = h.s.Fence(ctx, tx, id, epoch)
				return err
			})
			if tt.code != "" {
				mustCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if stopping != tt.stopping || exe.ID != id || exe.Epoch != epoch {
				t.Fatalf("fence = %s@%d stopping %v, want %s@%d stopping %v", exe.ID, exe.Epoch, stopping, id, epoch, tt.stopping)
			}
		})
	}
}

func TestCompleteStepReadDeclaration(t *testing.T) {
	wait := kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}, Timeout: time.Hour}}
	outcome := kernel.Declaration{Outcome: &kernel.OutcomeSpec{Outcome: storage.WorkFailed, Message: "no"}}
	tests := []struct {
		name    string
		declare *kernel.Declaration
	}{
		{name: "no declaration"},
		{name: "a declared wait", declare: &wait},
		{name: "a declared outcome", declare: &outcome},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			_, seg := h.started(t, "b1", h.plain)
			if tt.declare != nil {
				h.declare(seg, *tt.declare)
			}
			exe := h.execution(seg.Req.ExecutionID)
			var d kernel.Declaration
			var ok bool
			if err := h.inTx(func(ctx context.Context, tx storage.Tx) (err error) {
				d, ok, err = scheduler.ReadDeclaration(ctx, tx, exe)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if ok != (tt.declare != nil) {
				t.Fatalf("pending declaration found %v, want %v", ok, tt.declare != nil)
			}
			if ok && ((d.Wait == nil) != (tt.declare.Wait == nil) || (d.Outcome == nil) != (tt.declare.Outcome == nil)) {
				t.Fatalf("read %+v, want %+v", d, *tt.declare)
			}
			if ok && d.Wait != nil && (d.Wait.Types[0] != "review.done" || d.Wait.Timeout != time.Hour) {
				t.Fatalf("read wait %+v", *d.Wait)
			}
		})
	}
}

func TestCompleteStepPathOf(t *testing.T) {
	wait := kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"a.b"}}}
	outcome := kernel.Declaration{Outcome: &kernel.OutcomeSpec{Outcome: storage.WorkSucceeded}}
	tests := []struct {
		name    string
		d       kernel.Declaration
		ok      bool
		outcome executor.Outcome
		want    string
	}{
		{"no declaration: the executor's result", kernel.Declaration{}, false, executor.Succeeded, "result"},
		{"a wait of a succeeded segment", wait, true, executor.Succeeded, "wait"},
		{"a wait of a suspended segment", wait, true, executor.Suspended, "wait"},
		{"a wait of a failed segment is discarded", wait, true, executor.Failed, "result"},
		{"a wait of a cancelled segment is discarded", wait, true, executor.Cancelled, "result"},
		{"an outcome replaces a success", outcome, true, executor.Succeeded, "outcome"},
		{"an outcome replaces a failure", outcome, true, executor.Failed, "outcome"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scheduler.PathOf(tt.d, tt.ok, executor.Result{Outcome: tt.outcome}); got != tt.want {
				t.Fatalf("path %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCompleteStepParks(t *testing.T) {
	plain := schedulertest.New(executor.Info{Name: "plain"})
	resumer := schedulertest.New(executor.Info{Name: "resumer", Capabilities: []executor.Capability{executor.CapResume}})
	tests := []struct {
		name    string
		outcome executor.Outcome
		ex      executor.Executor
		want    bool
	}{
		{"a resume-capable executor that suspended parks", executor.Suspended, resumer, true},
		// An agent's turn ends normally once it declared its wait.
		{"a resume-capable executor that succeeded parks", executor.Succeeded, resumer, true},
		{"a resume-capable executor that failed ends", executor.Failed, resumer, false},
		{"a resume-capable executor that was cancelled ends", executor.Cancelled, resumer, false},
		{"any other executor that succeeded ends", executor.Succeeded, plain, false},
		{"any other executor ends", executor.Suspended, plain, false},
		{"an executor no longer configured ends", executor.Suspended, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scheduler.Parks(executor.Result{Outcome: tt.outcome}, tt.ex); got != tt.want {
				t.Fatalf("parks = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCompleteStepExecutorVerdict(t *testing.T) {
	tests := []struct {
		name   string
		res    executor.Result
		result storage.ExecutionResult
		state  storage.WorkState
		msg    string
	}{
		{"succeeded", executor.Result{Outcome: executor.Succeeded, Message: "done"}, storage.ResultSucceeded, storage.WorkSucceeded, "done"},
		{"cancelled", executor.Result{Outcome: executor.Cancelled}, storage.ResultCancelled, storage.WorkCancelled, ""},
		{"failed keeps its message", executor.Result{Outcome: executor.Failed, Message: "boom", ExitCode: 2}, storage.ResultFailed, storage.WorkFailed, "boom"},
		{"failed without a message names the exit code", executor.Result{Outcome: executor.Failed, ExitCode: 2}, storage.ResultFailed, storage.WorkFailed, "the segment failed (exit code 2)"},
		{"suspended without a declared wait fails", executor.Result{Outcome: executor.Suspended, Message: "zz"}, storage.ResultFailed, storage.WorkFailed, "the segment suspended without a declared wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			result, state, msg := scheduler.ExecutorVerdict(tt.res)
			if result != tt.result || state != tt.state || msg != tt.msg {
				t.Fatalf("verdict = %s %s %q, want %s %s %q", result, state, msg, tt.result, tt.state, tt.msg)
			}
		})
	}
}

func TestCompleteStepGoesOn(t *testing.T) {
	tests := []struct {
		name  string
		w     storage.Work
		mark  int64
		going bool
	}{
		{"no input after the watermark ends", storage.Work{InputCount: 2, State: storage.WorkRunning}, 2, false},
		{"input after the watermark goes on", storage.Work{InputCount: 3, State: storage.WorkRunning}, 2, true},
		{"a Work no longer running does not", storage.Work{InputCount: 3, State: storage.WorkCancelled}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scheduler.GoesOn(tt.w, storage.Execution{InputWatermark: tt.mark}); got != tt.going {
				t.Fatalf("goes on = %v, want %v", got, tt.going)
			}
		})
	}
}

// errRollback undoes a test's transaction.
var errRollback = errors.New("rollback")

func TestCompleteStepApplyWait(t *testing.T) {
	tests := []struct {
		name     string
		binding  string
		outcome  executor.Outcome
		exeState storage.ExecutionState
		rollback bool
	}{
		{"a plain executor's execution finishes and the Work waits", "b1", executor.Succeeded, storage.ExecutionFinished, false},
		{"a resume-capable executor's suspended execution parks", "br", executor.Suspended, storage.ExecutionParked, false},
		{"nothing of it stays when the transaction does not commit", "b1", executor.Succeeded, storage.ExecutionRunning, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			ex := map[string]*schedulertest.Executor{"b1": h.plain, "br": h.resumer}[tt.binding]
			w, seg := h.started(t, tt.binding, ex)
			h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}, Timeout: time.Hour}})
			err := h.inTx(func(ctx context.Context, tx storage.Tx) error {
				exe, _, err := h.s.Fence(ctx, tx, seg.Req.ExecutionID, seg.Req.Epoch)
				if err != nil {
					return err
				}
				if err := h.s.ApplyWait(ctx, tx, exe, executor.Result{Outcome: tt.outcome}); err != nil {
					return err
				}
				if tt.rollback {
					return errRollback
				}
				return nil
			})
			if tt.rollback != errors.Is(err, errRollback) || (!tt.rollback && err != nil) {
				t.Fatal(err)
			}
			ctx := context.Background()
			e, got := h.execution(seg.Req.ExecutionID), h.work(w.ID)
			wt, werr := h.store.GetActiveWait(ctx, w.ID)
			timers, err := h.store.ListDueTimers(ctx, h.clock.Now().Add(2*time.Hour), 10)
			if err != nil {
				t.Fatal(err)
			}
			if tt.rollback {
				if e.State != storage.ExecutionRunning || got.State != storage.WorkRunning || !errors.Is(werr, storage.ErrNotFound) || len(timers) != 0 {
					t.Fatalf("after a rollback: execution %s, Work %s, wait %v, timers %d; want none of it", e.State, got.State, werr, len(timers))
				}
				return
			}
			if e.State != tt.exeState || got.State != storage.WorkWaiting || werr != nil || wt.Types[0] != "review.done" || len(timers) != 1 {
				t.Fatalf("applied: execution %s, Work %s, wait %+v (%v), timers %d; want %s, waiting, the Wait and its timer",
					e.State, got.State, wt, werr, len(timers), tt.exeState)
			}
			var pending bool
			if err := h.inTx(func(ctx context.Context, tx storage.Tx) (err error) {
				_, pending, err = scheduler.ReadDeclaration(ctx, tx, e)
				return err
			}); err != nil || pending {
				t.Fatalf("after the wait applied the declaration is still pending (%v)", err)
			}
		})
	}
}

// writeCounter counts, per execution, the updates its transactions make.
type writeCounter struct {
	storage.Store
	mu      sync.Mutex
	updates map[string]int
}

func (w *writeCounter) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return w.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(writeCountTx{Tx: tx, w: w}) })
}

type writeCountTx struct {
	storage.Tx
	w *writeCounter
}

func (t writeCountTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	t.w.mu.Lock()
	t.w.updates[p.ID]++
	t.w.mu.Unlock()
	return t.Tx.UpdateExecution(ctx, p)
}

// A live attempt's completion is fenced by its own write of the
// execution: one update (finished), where the fence's update came first
// before; a superseded attempt's result still changes nothing.
func TestLiveCompletionWritesItsExecutionOnce(t *testing.T) {
	var wc *writeCounter
	h := buildHarness(t, t.TempDir(), nil, func(s storage.Store) storage.Store {
		wc = &writeCounter{Store: s, updates: map[string]int{}}
		return wc
	})
	t.Cleanup(h.close)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	wc.mu.Lock()
	clear(wc.updates)
	wc.mu.Unlock()
	h.finish(seg, executor.Result{Outcome: executor.Succeeded})
	wc.mu.Lock()
	n := wc.updates[seg.Req.ExecutionID]
	wc.mu.Unlock()
	if n != 1 {
		t.Fatalf("the completion updated its execution %d times, want once", n)
	}
	if got := h.work(w.ID); got.State != storage.WorkSucceeded {
		t.Fatalf("Work is %s, want succeeded", got.State)
	}

	// Superseded between its end and its completion: another owner's
	// epoch 2 stays as it is.
	other := h.create("b1")
	h.tick()
	seg = h.plain.Next(t)
	if err := h.inTx(func(ctx context.Context, tx storage.Tx) error {
		_, err := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: seg.Req.ExecutionID, FromEpoch: seg.Req.Epoch,
			FromStates: []storage.ExecutionState{storage.ExecutionRunning}, Owner: "daemon-2", LeaseExpiresAt: t0.Add(time.Hour), Now: t0})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h.finish(seg, executor.Result{Outcome: executor.Succeeded})
	if e := h.execution(seg.Req.ExecutionID); e.State != storage.ExecutionRunning || e.Epoch != 2 || e.Owner != "daemon-2" {
		t.Fatalf("the superseded execution reads %+v, want epoch 2 of daemon-2, running", e)
	}
	if got := h.work(other.ID); got.State.Terminal() {
		t.Fatalf("a superseded attempt's result finished its Work: %s", got.State)
	}
}
