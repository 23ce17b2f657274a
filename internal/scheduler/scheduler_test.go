package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func TestNewRefusesToolbeltWithoutEndpoints(t *testing.T) {
	h := newHarness(t, nil)
	_, err := scheduler.New(scheduler.Options{
		Store: h.store, Runtime: h.rt, Owner: "x", ExecutionsDir: h.dir, Toolbelt: h.tokens,
		Bindings: func(context.Context, scheduler.BindingQuery) (scheduler.Binding, error) {
			return scheduler.Binding{}, nil
		},
	})
	if err == nil || !strings.Contains(err.Error(), "ToolbeltEndpoints") {
		t.Fatalf("New with a toolbelt and no endpoints: %v", err)
	}
	if _, err := scheduler.New(scheduler.Options{}); err == nil {
		t.Fatal("empty options were accepted")
	}
}

func TestClaimRunComplete(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	req := seg.Req
	if seg.Kind != "run" || req.WorkID != w.ID || req.Epoch != 1 || req.ScopeID != "s1" || req.BindingID != "b1" || string(req.Config) != `{"binding":"b1"}` {
		t.Fatalf("run request = %+v", req)
	}
	if !req.Deadline.Equal(t0.Add(time.Hour)) || !exists(req.Dir) || filepath.Base(req.Dir) != req.ExecutionID {
		t.Fatalf("deadline %v, dir %s", req.Deadline, req.Dir)
	}
	if req.Context.ToolbeltDir != "/opt/oc/bin" || req.Context.PlaybookDir != "/state/playbooks" {
		t.Fatalf("context = %+v", req.Context)
	}
	exe := h.execution(req.ExecutionID)
	if exe.State != storage.ExecutionRunning || exe.Owner != "daemon-1" || !exe.LeaseExpiresAt.Equal(t0.Add(30*time.Second)) || exe.InputWatermark != 1 {
		t.Fatalf("claimed execution = %+v", exe)
	}
	if got := h.work(w.ID); got.State != storage.WorkRunning || got.Attempts != 1 || got.InputWatermark != 1 {
		t.Fatalf("claimed work = %+v", got)
	}
	// Nothing else to claim, and the running Work is not claimed twice.
	h.tick()
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatalf("a second segment started: %+v", extra.Req)
	}

	log := filepath.Join(t.TempDir(), "log")
	os.WriteFile(log, []byte("hello\n"), 0o600)
	h.finish(seg, executor.Result{Outcome: executor.Succeeded, Message: "exit 0", Artifacts: []executor.Artifact{{Name: "log", MediaType: "text/plain", Path: log}}})

	h.restart("daemon-1")
	ctx := context.Background()
	got := h.work(w.ID)
	exe = h.execution(req.ExecutionID)
	if got.State != storage.WorkSucceeded || got.OutcomeMessage != "exit 0" || exe.State != storage.ExecutionFinished || exe.Result != storage.ResultSucceeded {
		t.Fatalf("after completion: work %+v, execution %+v", got, exe)
	}
	fin, _ := h.store.ListEvents(ctx, &storage.ListEventsParams{Type: kernel.TypeWorkFinished, Work: w.ID})
	if len(fin) != 1 {
		t.Fatalf("core.work.finished events: %+v", fin)
	}
	arts, _ := h.store.ListArtifacts(ctx, &storage.ListArtifactsParams{Execution: exe.ID})
	if len(arts) != 1 || arts[0].Size != 6 || arts[0].Work != w.ID {
		t.Fatalf("artifacts = %+v", arts)
	}
	_, f, err := h.arts.Open(ctx, arts[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 6)
	if _, err := f.Read(b); err != nil || string(b) != "hello\n" {
		t.Fatalf("artifact bytes %q, %v", b, err)
	}
}

// A Dirless executor's attempts get no directory: not at their run, not
// at their recovery, and none appears under ExecutionsDir.
func TestDirlessExecutorGetsNoDirectory(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("bd")
	h.tick()
	run := h.dirless.Next(t)
	if run.Req.Dir != "" {
		t.Fatalf("a Dirless executor's run was given dir %q", run.Req.Dir)
	}
	if exists(filepath.Join(h.dir, "executions", run.Req.ExecutionID)) {
		t.Fatal("a directory was created for a Dirless executor's execution")
	}
	// The lease lapses and the attempt is recovered: still no directory.
	h.clock.Advance(31 * time.Second)
	h.tick()
	rec := h.dirless.Next(t)
	if rec.Kind != "recover" || rec.Req.Dir != "" {
		t.Fatalf("recovery = %s, dir %q", rec.Kind, rec.Req.Dir)
	}
	h.settle(run)
	h.finish(rec, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkSucceeded {
		t.Fatalf("work = %+v", got)
	}
	if exists(filepath.Join(h.dir, "executions", run.Req.ExecutionID)) {
		t.Fatal("a directory was created for a Dirless executor's execution")
	}
}

func TestFailureEndsWork(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1", "pr/1")
	h.tick()
	seg := h.plain.Next(t)
	h.finish(seg, executor.Result{Outcome: executor.Failed, ExitCode: 3})
	got := h.work(w.ID)
	if got.State != storage.WorkFailed || !strings.Contains(got.OutcomeMessage, "exit code 3") {
		t.Fatalf("work = %+v", got)
	}
	if e := h.execution(seg.Req.ExecutionID); e.Result != storage.ResultFailed || e.ExitCode == nil || *e.ExitCode != 3 {
		t.Fatalf("execution = %+v", e)
	}
	if _, err := h.store.GetKeyOwner(context.Background(), "s1", "pr/1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal("a failed Work kept its key")
	}
	// An executor error follows the same failure policy.
	w2 := h.create("b1")
	h.tick()
	seg2 := h.plain.Next(t)
	seg2.Fail(errors.New("lost the pipe"))
	h.settle(seg2)
	h.tick()
	if got := h.work(w2.ID); got.State != storage.WorkFailed || !strings.Contains(got.OutcomeMessage, "lost the pipe") {
		t.Fatalf("work after an executor error = %+v", got)
	}
	// The executor saw no exit: none is recorded.
	if e := h.execution(seg2.Req.ExecutionID); e.Result != storage.ResultFailed || e.ExitCode != nil {
		t.Fatalf("execution after an executor error = %+v (exit %v)", e, e.ExitCode)
	}
}

func TestMaxRunning(t *testing.T) {
	h := newHarness(t, func(o *scheduler.Options) { o.Limits.MaxRunning = 2 })
	for range 3 {
		h.create("b1")
	}
	h.tick()
	a, b := h.plain.Next(t), h.plain.Next(t)
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatal("a third segment started past MaxRunning")
	}
	h.finish(a, executor.Result{Outcome: executor.Succeeded})
	h.tick()
	c := h.plain.Next(t)
	if c.Req.ExecutionID == b.Req.ExecutionID {
		t.Fatal("the same execution started twice")
	}
}

func TestCompleteRefusesSupersededEpoch(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	run := h.plain.Next(t)
	exeID := run.Req.ExecutionID
	// The lease lapses (no heartbeat) and the attempt is recovered.
	h.clock.Advance(31 * time.Second)
	h.tick()
	rec := h.plain.Next(t)
	if rec.Kind != "recover" || rec.Req.Epoch != 2 || rec.Req.Dir != run.Req.Dir {
		t.Fatalf("recovery = %s %+v", rec.Kind, rec.Req)
	}
	// The first observation was detached when its epoch was superseded.
	h.settle(run)
	ctx := context.Background()
	err := h.s.Complete(ctx, exeID, 1, executor.Result{Outcome: executor.Failed})
	mustCode(t, err, "stale_epoch")
	if !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("%v is not forbidden", err)
	}
	if got := h.execution(exeID); got.State != storage.ExecutionRunning || got.Epoch != 2 {
		t.Fatalf("the stale completion changed the execution: %+v", got)
	}
	if err := h.s.Complete(ctx, exeID, 3, executor.Result{Outcome: executor.Failed}); kernel.CodeOf(err) != "stale_epoch" {
		t.Fatalf("a future epoch: %v", err)
	}
	h.finish(rec, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkSucceeded {
		t.Fatalf("work = %s", got.State)
	}
	// The same result once more is refused: the execution finished.
	mustCode(t, h.s.Complete(ctx, exeID, 2, executor.Result{Outcome: executor.Failed}), "stale_epoch")
}

func TestHeartbeatRenewsAndStopsTrustingLateLeases(t *testing.T) {
	h := newHarness(t, nil)
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	ctx := context.Background()
	h.clock.Advance(20 * time.Second)
	if lost, err := h.s.Heartbeat(ctx); err != nil || lost != 0 {
		t.Fatalf("heartbeat: %d lost, %v", lost, err)
	}
	if got := h.execution(seg.Req.ExecutionID); !got.LeaseExpiresAt.Equal(t0.Add(50 * time.Second)) {
		t.Fatalf("renewed lease expires %v", got.LeaseExpiresAt)
	}
	// Within the margin of expiry the holder no longer renews: it detaches
	// and recovery takes the attempt over with a new epoch.
	h.clock.Advance(30*time.Second - kernel.DefaultLeaseMargin + time.Second)
	if lost, err := h.s.Heartbeat(ctx); err != nil || lost != 1 {
		t.Fatalf("late heartbeat: %d lost, %v", lost, err)
	}
	h.settle(seg)
	if tr := h.s.Tracked(); len(tr) != 0 {
		t.Fatalf("still observing %v", tr)
	}
	h.clock.Advance(kernel.DefaultLeaseMargin)
	h.tick()
	if rec := h.plain.Next(t); rec.Kind != "recover" || rec.Req.Epoch != 2 {
		t.Fatalf("after a lost lease: %s %+v", rec.Kind, rec.Req)
	}
}

func TestDeclaredWaitEndsAndRestartsNonResumable(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("b1", "pr/7")
	h.tick()
	seg := h.plain.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}, Timeout: time.Hour}})
	h.finish(seg, executor.Result{Outcome: executor.Succeeded})
	exe := h.execution(seg.Req.ExecutionID)
	got := h.work(w.ID)
	wt, err := h.store.GetActiveWait(ctx, w.ID)
	if err != nil || exe.State != storage.ExecutionFinished || got.State != storage.WorkWaiting || wt.Timer == "" || !wt.OnWorkKeys {
		t.Fatalf("execution %+v, work %s, wait %+v, %v", exe, got.State, wt, err)
	}
	if d, _ := h.store.GetDeclaration(ctx, exe.ID, 1); d.Pending() || d.Disposition != scheduler.DeclarationApplied {
		t.Fatalf("declaration = %+v", d)
	}
	h.tick()
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatal("a waiting Work was started")
	}
	res, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: "pr/7", Type: "review.done"})
	if err != nil || !res.Matched {
		t.Fatalf("wake = %+v, %v", res, err)
	}
	h.tick()
	next := h.plain.Next(t)
	if next.Kind != "run" || next.Req.ExecutionID == exe.ID || next.Req.Epoch != 1 {
		t.Fatalf("after the wake: %s %+v", next.Kind, next.Req)
	}
	ne := h.execution(next.Req.ExecutionID)
	ins, _ := h.store.ListInputs(ctx, &storage.ListInputsParams{Work: w.ID, AfterPosition: exe.InputWatermark})
	if len(ins) != 1 || ins[0].Event != res.Event.ID || ne.InputWatermark != ins[0].Position {
		t.Fatalf("the new attempt acknowledged %d, inputs after the first attempt %+v", ne.InputWatermark, ins)
	}
}

func TestDeclaredWaitParksAndResumes(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended, ExitCode: 4})
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionParked || h.work(w.ID).State != storage.WorkWaiting || exe.ExitCode == nil || *exe.ExitCode != 4 {
		t.Fatalf("parked: %+v", exe)
	}
	if n, _ := h.store.CountLeased(ctx, "daemon-1"); n != 0 {
		t.Fatalf("a parked execution holds a lease slot: %d", n)
	}
	h.restart("daemon-1")
	if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done"}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	res := h.resumer.Next(t)
	if res.Kind != "resume" || res.Req.ExecutionID != exe.ID || res.Req.Epoch != 2 {
		t.Fatalf("resume = %s %+v", res.Kind, res.Req)
	}
	// The resumed segment's end is not observed yet: the parked segment's
	// exit code is not its own.
	if got := h.execution(exe.ID); got.State != storage.ExecutionRunning || got.Epoch != 2 || got.Owner != "daemon-1" || got.ExitCode != nil {
		t.Fatalf("resumed execution = %+v", got)
	}
	// The parked segment's epoch is over.
	mustCode(t, h.s.Complete(ctx, exe.ID, 1, executor.Result{Outcome: executor.Succeeded}), "stale_epoch")
	h.finish(res, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkSucceeded || got.Attempts != 1 {
		t.Fatalf("work = %+v", got)
	}
}

func TestDeclaredWaitBackscansEventsBeforeRegistration(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("br", "pr/8")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	// The event arrives after the declaration, before the segment ends.
	em, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "review.done", CorrelationKey: "pr/8"})
	if err != nil {
		t.Fatal(err)
	}
	if em.Decision.Effect != kernel.EffectUnmatched {
		t.Fatalf("the event for a running Work: %+v", em.Decision)
	}
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	wt, _ := h.store.ListWaits(context.Background(), &storage.ListWaitsParams{Work: w.ID})
	if len(wt) != 1 || wt[0].State != storage.WaitSatisfied || wt[0].SatisfiedBy != em.Event.ID {
		t.Fatalf("waits = %+v", wt)
	}
	// Satisfied at registration: the Work is resumed by the same tick.
	res := h.resumer.Next(t)
	if res.Kind != "resume" || res.Req.Epoch != 2 {
		t.Fatalf("after a backscanned wake: %s %+v", res.Kind, res.Req)
	}
}

// liveReads counts GetLiveExecution by Work.
type liveReads struct {
	storage.Store
	mu sync.Mutex
	n  map[string]int
}

func (l *liveReads) GetLiveExecution(ctx context.Context, workID string) (storage.Execution, error) {
	l.mu.Lock()
	l.n[workID]++
	l.mu.Unlock()
	return l.Store.GetLiveExecution(ctx, workID)
}

func (l *liveReads) of(workID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[workID]
}

// A new Work's claim does not read its (absent) live execution; a woken
// Work's does, and resumes the parked one.
func TestClaimReadsLiveExecutionOnlyAfterAnAttempt(t *testing.T) {
	var lr *liveReads
	h := buildHarness(t, t.TempDir(), nil, func(s storage.Store) storage.Store {
		lr = &liveReads{Store: s, n: map[string]int{}}
		return lr
	})
	t.Cleanup(h.close)
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	if n := lr.of(w.ID); n != 0 {
		t.Fatalf("a new Work's claim read its live execution %d times", n)
	}
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"never.comes"}, Timeout: 10 * time.Minute}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	h.clock.Advance(11 * time.Minute)
	h.tick()
	res := h.resumer.Next(t)
	if res.Kind != "resume" || res.Req.ExecutionID != seg.Req.ExecutionID || res.Req.Epoch != 2 {
		t.Fatalf("after the timeout: %s %+v", res.Kind, res.Req)
	}
	if n := lr.of(w.ID); n == 0 {
		t.Fatal("a woken Work was claimed without reading its parked execution")
	}
}

func TestWaitTimeoutWakesTheWork(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"never.comes"}, Timeout: 10 * time.Minute}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	h.clock.Advance(9 * time.Minute)
	h.tick()
	if extra := h.resumer.TryNext(); extra != nil {
		t.Fatal("resumed before the timeout")
	}
	h.restart("daemon-1")
	h.clock.Advance(2 * time.Minute)
	h.tick()
	res := h.resumer.Next(t)
	if res.Kind != "resume" {
		t.Fatalf("after the timeout: %s", res.Kind)
	}
	ins, _ := h.store.ListInputs(ctx, &storage.ListInputsParams{Work: w.ID})
	last, _ := h.store.GetEvent(ctx, ins[len(ins)-1].Event)
	if last.Type != kernel.TypeWaitTimedOut {
		t.Fatalf("last input = %s", last.Type)
	}
	if fired, _ := h.s.FireDue(ctx); fired != 0 {
		t.Fatalf("a timer fired twice: %d", fired)
	}
}

// TestRoundLeavesTimedStepsToTheTick: a round a write or a report calls
// for (Round) applies results and claims but leaves a due timer to the
// periodic Tick, which fires it.
func TestRoundLeavesTimedStepsToTheTick(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"never.comes"}, Timeout: time.Minute}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	h.clock.Advance(2 * time.Minute)
	if err := h.s.Round(ctx); err != nil {
		t.Fatal(err)
	}
	h.s.WaitPrepared(ctx)
	if got := h.work(w.ID); got.State != storage.WorkWaiting || got.InputCount != 1 {
		t.Fatalf("after a round the Work is %s with %d inputs, want still waiting with 1: the round fired its due timer", got.State, got.InputCount)
	}
	if err := h.s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if res := h.resumer.Next(t); res.Kind != "resume" {
		t.Fatalf("after the tick: %s, want resume", res.Kind)
	}
}

func TestDeclaredOutcomeReplacesTheExecutors(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.declare(seg, kernel.Declaration{Outcome: &kernel.OutcomeSpec{Outcome: storage.WorkFailed, Message: "tests are red", Data: []byte(`{"failed":3}`)}})
	h.finish(seg, executor.Result{Outcome: executor.Succeeded, Message: "exit 0"})
	got := h.work(w.ID)
	if got.State != storage.WorkFailed || got.OutcomeMessage != "tests are red" || string(got.OutcomeData) != `{"failed":3}` {
		t.Fatalf("work = %+v", got)
	}
	if e := h.execution(seg.Req.ExecutionID); e.Result != storage.ResultFailed {
		t.Fatalf("execution = %+v", e)
	}
}

func TestUnappliedDeclarationSurvivesRecovery(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	// The daemon dies before the segment ends; a new one adopts it.
	h.restart("daemon-2")
	h.settle(seg)
	if n, err := h.s.RecoverOrphans(ctx); err != nil || n != 1 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	rec := h.plain.Next(t)
	if rec.Kind != "recover" || rec.Req.Epoch != 2 {
		t.Fatalf("adoption = %s %+v", rec.Kind, rec.Req)
	}
	// The adopted segment already declared: its authority stays released.
	_, err := h.s.LeaseGuard(ctx, h.store, rec.Req.ExecutionID, 2, "daemon-2")
	mustCode(t, err, "authority_released")
	h.finish(rec, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkWaiting {
		t.Fatalf("work = %s", got.State)
	}
	if _, err := h.store.GetActiveWait(ctx, w.ID); err != nil {
		t.Fatalf("no wait registered from the earlier epoch's declaration: %v", err)
	}
}

func TestRecoverOfAVanishedSegmentHoldsTheWork(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.plain.Gone(seg.Req.ExecutionID)
	h.restart("daemon-2")
	h.settle(seg)
	if _, err := h.s.RecoverOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Recover reports ErrGone.
	h.waitEpoch(seg.Req.ExecutionID, 2)
	h.tick()
	exe := h.execution(seg.Req.ExecutionID)
	got := h.work(w.ID)
	if exe.Result != storage.ResultLost || got.BlockedReason != kernel.HoldAttemptLost || got.State != storage.WorkReady {
		t.Fatalf("execution %+v, work %+v", exe, got)
	}
}

func TestCancelExecutionStopsAndHolds(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
		t.Fatal(err)
	}
	h.tick() // stops the fenced attempt
	h.settle(seg)
	h.tick() // applies its end as the physical stop
	if stops := h.plain.Stops(); len(stops) != 1 || stops[0].ExecutionID != seg.Req.ExecutionID {
		t.Fatalf("stops = %+v", stops)
	}
	exe := h.execution(seg.Req.ExecutionID)
	got := h.work(w.ID)
	if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled || got.BlockedReason != kernel.HoldOperatorCancelled {
		t.Fatalf("execution %+v, work %+v", exe, got)
	}
	h.tick()
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatal("a held Work started")
	}
	if _, err := h.ctl.Retry(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	next := h.plain.Next(t)
	if next.Req.ExecutionID == exe.ID || h.work(w.ID).Attempts != 2 {
		t.Fatalf("retry started %+v", next.Req)
	}
}

func TestCancelWorkStopsTheAttempt(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	// A heartbeat sees the fence and stops the process.
	if _, err := h.s.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.settle(seg)
	h.tick()
	if got := h.work(w.ID); got.State != storage.WorkCancelled {
		t.Fatalf("work = %s", got.State)
	}
	if exe := h.execution(seg.Req.ExecutionID); exe.Result != storage.ResultCancelled {
		t.Fatalf("execution = %+v", exe)
	}
}

func TestAdoptedStoppingAttemptIsStopped(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	h.restart("daemon-2")
	h.settle(seg)
	if n, err := h.s.RecoverOrphans(context.Background()); err != nil || n != 1 {
		t.Fatalf("adopted %d, %v", n, err)
	}
	h.waitEpoch(seg.Req.ExecutionID, 2)
	h.tick()
	if exe := h.execution(seg.Req.ExecutionID); exe.Result != storage.ResultCancelled || exe.Epoch != 2 || len(h.plain.Stops()) != 1 {
		t.Fatalf("execution = %+v, stops %d", exe, len(h.plain.Stops()))
	}
}

func TestToolbeltSeams(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("b1")
	h.create("bn") // transport none: no token
	h.tick()
	run := h.plain.Next(t)
	h.silent.Next(t)
	c := run.Req.Context
	if c.Token != "tok-"+run.Req.ExecutionID+"-claim" || c.ToolbeltEndpoint != "/run/"+run.Req.ExecutionID+"/toolbelt.sock" || c.ToolbeltTokenFile != "/run/"+run.Req.ExecutionID+"/token/token" {
		t.Fatalf("context = %+v", c)
	}
	h.clock.Advance(time.Minute)
	h.tick() // both leases expired; both recovered
	rec := h.plain.Next(t)
	h.silent.Next(t)
	if rec.Req.Context.Token != "tok-"+rec.Req.ExecutionID+"-recover" {
		t.Fatalf("recovery context = %+v", rec.Req.Context)
	}
	calls, eps := h.tokens.snapshot()
	if len(calls) != 2 || len(eps) != 2 {
		t.Fatalf("issuer calls %+v, endpoints %v", calls, eps)
	}
	first := calls[0]
	if first.WorkID != w.ID || first.Epoch != 1 || first.Reason != "claim" || fmt.Sprint(first.Grants) != "[extra]" || !first.ExpiresAt.Equal(t0.Add(time.Hour)) || first.Generation != 1 {
		t.Fatalf("first issue = %+v", first)
	}
	if calls[1].Epoch != 2 || calls[1].Reason != "recover" {
		t.Fatalf("second issue = %+v", calls[1])
	}
	// Resume issues too.
	h2 := newHarness(t, nil)
	h2.create("br")
	h2.tick()
	seg := h2.resumer.Next(t)
	h2.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"x.y"}}})
	h2.finish(seg, executor.Result{Outcome: executor.Suspended})
	if _, err := h2.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: seg.Req.WorkID, Type: "x.y"}); err != nil {
		t.Fatal(err)
	}
	h2.tick()
	res := h2.resumer.Next(t)
	if res.Req.Context.Token != "tok-"+res.Req.ExecutionID+"-resume" {
		t.Fatalf("resume context = %+v", res.Req.Context)
	}
	_ = ctx
}

func TestToolbeltFailureHoldsTheWork(t *testing.T) {
	h := newHarness(t, nil)
	h.tokens.fail = true
	w := h.create("b1")
	h.tick()
	if extra := h.plain.TryNext(); extra != nil {
		t.Fatal("the attempt started without a token")
	}
	got := h.work(w.ID)
	if got.BlockedReason != kernel.HoldToolbeltFailed || got.State != storage.WorkReady || got.InputWatermark != 0 {
		t.Fatalf("work = %+v", got)
	}
}

func TestSecretFailureHoldsWithASafeDiagnostic(t *testing.T) {
	broken := true
	h := newHarness(t, func(o *scheduler.Options) {
		o.Secrets = func(_ context.Context, req scheduler.SecretsRequest) (map[string]string, error) {
			if broken {
				return nil, &scheduler.SecretError{Name: "api_key", Code: "secret_not_found"}
			}
			return map[string]string{"API_KEY": "s3cret-" + req.BindingID}, nil
		}
	})
	w := h.create("b1")
	h.tick()
	got := h.work(w.ID)
	if got.BlockedReason != kernel.HoldSecretUnavailable || !strings.Contains(got.BlockedDetail, "api_key") || got.InputWatermark != 0 {
		t.Fatalf("work = %+v", got)
	}
	exes, _ := h.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: w.ID})
	if len(exes) != 1 || exes[0].Result != storage.ResultFailed || strings.Contains(exes[0].Message, "s3cret") {
		t.Fatalf("executions = %+v", exes)
	}
	broken = false
	if _, err := h.ctl.Retry(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	seg := h.plain.Next(t)
	if seg.Req.Env["API_KEY"] != "s3cret-b1" {
		t.Fatalf("env = %v", seg.Req.Env)
	}
	// The retried attempt is given every input again: the failed start
	// never saw them.
	if e := h.execution(seg.Req.ExecutionID); e.InputWatermark != h.work(w.ID).InputCount {
		t.Fatalf("the retried attempt acknowledged %d of %d inputs", e.InputWatermark, h.work(w.ID).InputCount)
	}
}

func TestInputQueuedWhileRunningStartsAnotherAttempt(t *testing.T) {
	h := newHarness(t, nil)
	h.routes["s1"] = []kernel.Route{{ID: "q", MatchType: "pr.*", Effect: kernel.EffectQueue}}
	w := h.create("b1", "pr/1")
	h.tick()
	seg := h.plain.Next(t)
	em, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "pr.comment", CorrelationKey: "pr/1"})
	if err != nil || em.Decision.Effect != kernel.EffectQueue {
		t.Fatalf("emit = %+v, %v", em.Decision, err)
	}
	// The same tick applies the result and claims the Work again.
	h.finish(seg, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkRunning || got.Attempts != 2 {
		t.Fatalf("work with pending input = %+v", got)
	}
	next := h.plain.Next(t)
	if e := h.execution(next.Req.ExecutionID); e.InputWatermark != 2 {
		t.Fatalf("the next attempt acknowledged %d", e.InputWatermark)
	}
	h.finish(next, executor.Result{Outcome: executor.Succeeded})
	if got := h.work(w.ID); got.State != storage.WorkSucceeded {
		t.Fatalf("work = %s", got.State)
	}
}

func TestCloseDetachesRunningSegments(t *testing.T) {
	h := newHarness(t, nil)
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.s.Close()
	// The executor call returned ErrDetached; nothing was applied.
	if exe := h.execution(seg.Req.ExecutionID); exe.State != storage.ExecutionRunning {
		t.Fatalf("close changed the execution: %+v", exe)
	}
	h.s = nil
}

// A stopping attempt whose executor this daemon no longer has cannot be
// stopped or observed: recovery finishes it lost instead of failing on
// every round, holds a Work that has not ended (attempt_lost, so that no
// new attempt starts beside a process that may still run), and leaves a
// cancelled Work cancelled.
func TestRecoverOfAStoppingAttemptWithoutItsExecutor(t *testing.T) {
	for _, cancel := range []string{"execution", "work"} {
		t.Run(cancel, func(t *testing.T) {
			h := newHarness(t, nil)
			ctx := context.Background()
			w := h.create("b1")
			h.tick()
			seg := h.plain.Next(t)
			var err error
			if cancel == "execution" {
				_, err = h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID})
			} else {
				_, err = h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID})
			}
			if err != nil {
				t.Fatal(err)
			}
			// The next daemon's configuration no longer has the executor.
			h.mod = func(o *scheduler.Options) { delete(o.Executors, "plain") }
			h.restart("daemon-2")
			h.settle(seg)
			if n, err := h.s.RecoverOrphans(ctx); err != nil || n != 1 {
				t.Fatalf("adoption: %d, %v", n, err)
			}
			exe := h.execution(seg.Req.ExecutionID)
			if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultLost || exe.Epoch != 2 || !strings.Contains(exe.Message, `"plain"`) {
				t.Fatalf("execution = %+v", exe)
			}
			got := h.work(w.ID)
			switch cancel {
			case "execution":
				if got.State != storage.WorkReady || got.BlockedReason != kernel.HoldAttemptLost || !strings.Contains(got.BlockedDetail, exe.ID) {
					t.Fatalf("work = %+v", got)
				}
			case "work":
				if got.State != storage.WorkCancelled || got.Held() {
					t.Fatalf("work = %+v", got)
				}
			}
			// Nothing is left to recover, and later rounds do not fail.
			h.clock.Advance(time.Minute)
			h.tick()
			if got := h.execution(exe.ID); got.Epoch != 2 || got.State != storage.ExecutionFinished {
				t.Fatalf("after another round: %+v", got)
			}
			if len(h.plain.Stops()) != 0 {
				t.Fatalf("stops = %+v", h.plain.Stops())
			}
		})
	}
}
