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
	mu   sync.Mutex
	ran  []string
	reqs []executor.RunRequest
	// dirless: the executor keeps nothing on disk (executor.Info.Dirless).
	dirless bool
}

func (r *recording) Info() executor.Info {
	return executor.Info{Name: "recording", Transport: executor.TransportNone, Dirless: r.dirless}
}

func (r *recording) Run(_ context.Context, req executor.RunRequest) (executor.Result, error) {
	r.mu.Lock()
	r.ran = append(r.ran, req.ExecutionID)
	r.reqs = append(r.reqs, req)
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

func (r *recording) requests() []executor.RunRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// TestClaimLaunchesAQuickDirlessAttempt: a new attempt with nothing to
// prepare that could wait (no token, endpoint, secret or directory) is
// inserted launched by its claim and starts once the claim commits: no
// MarkLaunched, and its segment gets what a prepared one would (its
// inputs, the claim's epoch and deadline, no directory).
func TestClaimLaunchesAQuickDirlessAttempt(t *testing.T) {
	ex := &recording{dirless: true}
	ms := &marksStore{}
	h := launchHarness(t, ex, func(s storage.Store) storage.Store { ms.Store = s; return ms })
	var works []storage.Work
	for range 3 {
		works = append(works, h.create("bi"))
	}
	ctx := context.Background()
	if n, err := h.s.Claim(ctx); err != nil || n != 3 {
		t.Fatalf("claimed %d: %v", n, err)
	}
	for _, ts := range h.s.Tracked() {
		if err := h.s.WaitSegment(ctx, ts.ExecutionID, ts.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	if calls := ms.launches(); len(calls) != 0 {
		t.Fatalf("MarkLaunched calls %v, want none: the claims are the launches", calls)
	}
	reqs := map[string]executor.RunRequest{}
	for _, r := range ex.requests() {
		reqs[r.WorkID] = r
	}
	for _, w := range works {
		exes, err := h.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: w.ID})
		if err != nil || len(exes) != 1 {
			t.Fatalf("Work %s's executions %+v (%v), want one", w.ID, exes, err)
		}
		e, r := exes[0], reqs[w.ID]
		if !e.Launched() || e.LaunchedEpoch != 1 {
			t.Errorf("execution %s reads launched at %d, want 1", e.ID, e.LaunchedEpoch)
		}
		if r.ExecutionID != e.ID || r.Epoch != 1 || !r.Deadline.Equal(e.Deadline) || r.Dir != "" {
			t.Errorf("the segment of %s was asked %+v, want execution %s, epoch 1, deadline %v, no directory", w.ID, r, e.ID, e.Deadline)
		}
		if len(r.Events) != 1 || r.Events[0].ID != w.CreatedEvent {
			t.Errorf("the segment of %s was given events %+v, want its created event %s", w.ID, r.Events, w.CreatedEvent)
		}
	}
	h.tick()
	for _, w := range works {
		if got := h.work(w.ID); got.State != storage.WorkSucceeded {
			t.Errorf("Work %s is %s, want succeeded", w.ID, got.State)
		}
	}
}

// stopAfterInsert cancels the round's context once a transaction that
// inserted an execution commits: the daemon stopping between a claim and
// its start.
type stopAfterInsert struct {
	storage.Store
	cancel context.CancelFunc
}

func (s *stopAfterInsert) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	inserted := false
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(insertSeenTx{Tx: tx, seen: &inserted}) })
	if err == nil && inserted {
		s.cancel()
	}
	return err
}

type insertSeenTx struct {
	storage.Tx
	seen *bool
}

func (t insertSeenTx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	*t.seen = true
	return t.Tx.InsertExecution(ctx, p)
}

func (t insertSeenTx) InsertExecutions(ctx context.Context, ps []storage.InsertExecutionParams) ([]storage.Execution, error) {
	*t.seen = true
	return t.Tx.InsertExecutions(ctx, ps)
}

// TestClaimLaunchGivenBackWhenStopped: when the round ends between the
// claim that launched an attempt and its start, nothing starts and the
// claim is given back as any unstarted one: the execution finishes
// cancelled, the Work is ready again and the attempt is not counted.
func TestClaimLaunchGivenBackWhenStopped(t *testing.T) {
	ex := &recording{dirless: true}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := launchHarness(t, ex, func(s storage.Store) storage.Store { return &stopAfterInsert{Store: s, cancel: cancel} })
	w := h.create("bi")
	if _, err := h.s.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.s.WaitPrepared(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ran := ex.executions(); len(ran) != 0 {
		t.Fatalf("segments run %v, want none", ran)
	}
	exes, err := h.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: w.ID})
	if err != nil || len(exes) != 1 {
		t.Fatalf("executions %+v (%v), want one", exes, err)
	}
	if e := exes[0]; e.State != storage.ExecutionFinished || e.Result != storage.ResultCancelled {
		t.Fatalf("the execution reads %s/%s, want finished cancelled", e.State, e.Result)
	}
	if got := h.work(w.ID); got.State != storage.WorkReady || got.Attempts != 0 || got.Held() {
		t.Fatalf("the Work reads %s, %d attempts, held %v; want ready, 0 attempts, not held", got.State, got.Attempts, got.Held())
	}
}
