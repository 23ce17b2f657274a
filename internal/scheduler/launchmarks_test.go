package scheduler_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// recording is an executor whose segments succeed at once and which
// records the executions it ran.
type recording struct {
	mu  sync.Mutex
	ran []string
}

func (r *recording) Info() executor.Info {
	return executor.Info{Name: "recording", Transport: executor.TransportNone}
}

func (r *recording) Run(_ context.Context, req executor.RunRequest) (executor.Result, error) {
	r.mu.Lock()
	r.ran = append(r.ran, req.ExecutionID)
	r.mu.Unlock()
	return executor.Result{Outcome: executor.Succeeded}, nil
}

func (r *recording) Recover(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	return r.Run(ctx, req)
}

func (r *recording) Resume(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	return r.Run(ctx, req)
}

func (r *recording) Stop(context.Context, executor.RunRequest, time.Duration) error { return nil }

func (r *recording) executions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

// marksStore hands every transaction's MarkLaunched to before, which may
// wait or write first, and records the launches of each call.
type marksStore struct {
	storage.Store
	before func(ctx context.Context, tx storage.Tx, p *storage.MarkLaunchedParams) error

	mu    sync.Mutex
	calls [][]storage.Launch
}

func (s *marksStore) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(marksTx{Tx: tx, s: s}) })
}

func (s *marksStore) launches() [][]storage.Launch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

type marksTx struct {
	storage.Tx
	s *marksStore
}

func (t marksTx) MarkLaunched(ctx context.Context, p *storage.MarkLaunchedParams) ([]string, error) {
	t.s.mu.Lock()
	t.s.calls = append(t.s.calls, slices.Clone(p.Launches))
	t.s.mu.Unlock()
	if t.s.before != nil {
		if err := t.s.before(ctx, t.Tx, p); err != nil {
			return nil, err
		}
	}
	return t.Tx.MarkLaunched(ctx, p)
}

func launchHarness(t *testing.T, ex executor.Executor, wrap func(storage.Store) storage.Store) *harness {
	t.Helper()
	h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
		o.Limits.MaxRunning = 4
		o.Executors["recording"] = ex
		o.Toolbelt, o.ToolbeltEndpoints = nil, nil
		o.Bindings = func(context.Context, scheduler.BindingQuery) (scheduler.Binding, error) {
			return scheduler.Binding{Executor: "recording", Generation: 1, NoSecrets: true}, nil
		}
	}, wrap)
	t.Cleanup(h.close)
	return h
}

// TestLaunchMarksWrittenTogether: the launch marks of preparations that
// ask while a batch is being written go together into the next one, one
// MarkLaunched for all of them, and every segment starts.
func TestLaunchMarksWrittenTogether(t *testing.T) {
	ex := &recording{}
	release := make(chan struct{})
	var once sync.Once
	ms := &marksStore{}
	ms.before = func(context.Context, storage.Tx, *storage.MarkLaunchedParams) error {
		// The first batch waits until the others queued behind it.
		once.Do(func() { <-release })
		return nil
	}
	h := launchHarness(t, ex, func(s storage.Store) storage.Store { ms.Store = s; return ms })
	var works []string
	for range 4 {
		works = append(works, h.create("bi").ID)
	}
	ctx := context.Background()
	if n, err := h.s.Claim(ctx); err != nil || n != 4 {
		t.Fatalf("claimed %d: %v", n, err)
	}
	for h.s.QueuedLaunchMarks() < 3 {
		runtime.Gosched()
	}
	close(release)
	if err := h.s.WaitPrepared(ctx); err != nil {
		t.Fatal(err)
	}
	calls := ms.launches()
	if len(calls) != 2 || len(calls[0]) != 1 || len(calls[1]) != 3 {
		t.Fatalf("MarkLaunched calls %v, want one of 1 launch and one of the 3 that queued behind it", calls)
	}
	for _, ts := range h.s.Tracked() {
		if err := h.s.WaitSegment(ctx, ts.ExecutionID, ts.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	h.tick()
	if got := ex.executions(); len(got) != 4 {
		t.Fatalf("segments run %v, want all 4", got)
	}
	for _, id := range works {
		w := h.work(id)
		if w.State != storage.WorkSucceeded {
			t.Errorf("Work %s is %s, want succeeded", id, w.State)
		}
		exes, err := h.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: id})
		if err != nil || len(exes) != 1 || exes[0].LaunchedEpoch != 1 {
			t.Errorf("Work %s's executions %+v (%v), want one launched at epoch 1", id, exes, err)
		}
	}
}

// TestLaunchMarkFencedNotStarted: an attempt superseded between its claim
// and its launch mark is not marked and its segment never starts, while
// the launch marked with it starts as usual.
func TestLaunchMarkFencedNotStarted(t *testing.T) {
	ex := &recording{}
	ms := &marksStore{}
	var superseded string
	ms.before = func(ctx context.Context, tx storage.Tx, p *storage.MarkLaunchedParams) error {
		if superseded != "" {
			return nil
		}
		// Another daemon takes the first launch's execution over first.
		l := p.Launches[0]
		superseded = l.Execution
		_, err := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: l.Execution, FromEpoch: l.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			Owner: "daemon-2", LeaseExpiresAt: t0.Add(time.Hour), Now: t0})
		return err
	}
	h := launchHarness(t, ex, func(s storage.Store) storage.Store { ms.Store = s; return ms })
	h.create("bi")
	h.create("bi")
	h.tick()
	for _, ts := range h.s.Tracked() {
		if err := h.s.WaitSegment(context.Background(), ts.ExecutionID, ts.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	ran := ex.executions()
	if superseded == "" || slices.Contains(ran, superseded) || len(ran) != 1 {
		t.Fatalf("segments run %v; superseded %q must not be among them and the other must", ran, superseded)
	}
	if e := h.execution(superseded); e.Launched() || e.Owner != "daemon-2" || e.Epoch != 2 {
		t.Fatalf("the superseded execution reads %+v, want epoch 2 of daemon-2, not launched", e)
	}
}
