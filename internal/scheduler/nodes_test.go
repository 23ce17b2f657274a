package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// peer is a second daemon's scheduler on the harness's store: another
// owner, another node, executors and an executions directory of its own,
// the same clock.
type peer struct {
	s     *scheduler.Scheduler
	plain *schedulertest.Executor
}

func newPeer(t *testing.T, h *harness, owner, node string, duties scheduler.DutyGate) *peer {
	t.Helper()
	p := &peer{plain: schedulertest.New(executor.Info{Name: "plain", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}})}
	s, err := scheduler.New(scheduler.Options{
		Store: h.store, Runtime: h.rt, Owner: owner, Node: node, Duties: duties,
		Limits:    scheduler.Limits{MaxRunning: 4, Lease: 30 * time.Second, AttemptTimeout: time.Hour},
		Executors: map[string]executor.Executor{"plain": p.plain},
		Bindings: func(_ context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			if q.Binding != "b1" {
				return scheduler.Binding{}, errors.New("no such binding")
			}
			return scheduler.Binding{Executor: "plain", Config: json.RawMessage(`{"binding":"b1"}`), Generation: 1}, nil
		},
		Toolbelt: h.tokens, ToolbeltEndpoints: h.tokens.endpoints, ToolbeltDir: "/opt/oc/bin", PlaybookDir: "/state/playbooks",
		ExecutionsDir: filepath.Join(t.TempDir(), "executions"), Artifacts: h.arts,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.s = s
	t.Cleanup(func() { s.Close() })
	return p
}

func (p *peer) tick(t *testing.T) {
	t.Helper()
	if err := p.s.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.s.WaitPrepared(context.Background())
}

// lostOnPeer lets the harness's lease lapse and has a daemon of another
// node, daemon-b on nod_b, recover its one running attempt as lost.
func lostOnPeer(t *testing.T, h *harness) *peer {
	t.Helper()
	b := newPeer(t, h, "daemon-b", "nod_b", nil)
	h.clock.Advance(31 * time.Second)
	if n, err := b.s.RecoverExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("recovery on the second node: %d, %v", n, err)
	}
	return b
}

func onNode(node string) func(*scheduler.Options) {
	return func(o *scheduler.Options) { o.Node = node }
}

// A daemon starting on a shared store adopts only its own node's
// attempts: another node's live attempt keeps its owner and epoch, and
// the starting daemon's round leaves it alone while its lease runs.
func TestStartingDaemonDoesNotAdoptAnotherNodesLiveAttempt(t *testing.T) {
	h := newHarness(t, onNode("nod_a"))
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if got := h.execution(seg.Req.ExecutionID); got.Node != "nod_a" {
		t.Fatalf("the claim recorded node %q, want nod_a", got.Node)
	}
	b := newPeer(t, h, "daemon-b", "nod_b", nil)
	n, err := b.s.RecoverOrphans(context.Background())
	if err != nil || n != 0 {
		t.Fatalf("the second node's start adopted %d attempts (%v), want none", n, err)
	}
	h.clock.Advance(10 * time.Second)
	b.tick(t)
	got := h.execution(seg.Req.ExecutionID)
	if got.Owner != "daemon-1" || got.Epoch != 1 || got.State != storage.ExecutionRunning {
		t.Fatalf("after the second node started: %+v, want daemon-1's at epoch 1, running", got)
	}
	if calls := b.plain.Calls(); len(calls) != 0 {
		t.Fatalf("the second node's executor was called: %v", calls)
	}
	if seg.Done() {
		t.Fatal("the first node's segment ended")
	}
}

// The same node restarting still adopts its attempts at once, without
// waiting for their leases to expire.
func TestRestartOnTheSameNodeAdoptsAtOnce(t *testing.T) {
	h := newHarness(t, onNode("nod_a"))
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.restart("daemon-2")
	h.settle(seg)
	n, err := h.s.RecoverOrphans(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("the restart adopted %d attempts (%v), want 1", n, err)
	}
	rec := h.plain.Next(t)
	if rec.Kind != "recover" || rec.Req.Epoch != 2 {
		t.Fatalf("adoption: %s at epoch %d", rec.Kind, rec.Req.Epoch)
	}
	if got := h.execution(seg.Req.ExecutionID); got.Owner != "daemon-2" || got.Node != "nod_a" {
		t.Fatalf("adopted execution: owner %s node %s", got.Owner, got.Node)
	}
}

// An expired lease of another node is recovered as lost: no process is
// adopted there, the execution finishes lost at a new epoch, and the Work
// is held attempt_lost; the first node's daemon, its renewal refused,
// stops the process it left; a retry runs a new attempt on the node that
// recovered it.
func TestExpiredAttemptOfAnotherNodeIsLostAndRetried(t *testing.T) {
	h := newHarness(t, onNode("nod_a"))
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	b := lostOnPeer(t, h)
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultLost || exe.Epoch != 2 || exe.Owner != "daemon-b" || exe.Node != "nod_a" {
		t.Fatalf("the recovered execution: %+v, want finished lost at epoch 2 by daemon-b, node nod_a", exe)
	}
	if got := h.work(w.ID); got.State != storage.WorkReady || got.BlockedReason != kernel.HoldAttemptLost {
		t.Fatalf("the Work: %s held %q, want ready, held attempt_lost", got.State, got.BlockedReason)
	}
	if calls := b.plain.Calls(); len(calls) != 0 {
		t.Fatalf("the second node's executor was called: %v", calls)
	}
	if seg.Done() {
		t.Fatal("the first node's segment ended before its daemon saw the lost lease")
	}
	// The first node's daemon is alive: its renewal is refused, it
	// detaches and, seeing another daemon took the attempt over, stops
	// the process.
	if lost, err := h.s.Heartbeat(context.Background()); err != nil || lost != 1 {
		t.Fatalf("the first node's heartbeat: %d lost, %v", lost, err)
	}
	stops := awaitStops(t, h.plain, 1)
	if stops[0].ExecutionID != seg.Req.ExecutionID || stops[0].Epoch != 1 {
		t.Fatalf("stopped %s at epoch %d, want %s at 1", stops[0].ExecutionID, stops[0].Epoch, seg.Req.ExecutionID)
	}
	// The retry policy: an operator's retry lets the Work run again.
	if _, err := h.ctl.Retry(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	b.tick(t)
	again := b.plain.Next(t)
	if again.Kind != "run" || again.Req.ExecutionID == seg.Req.ExecutionID {
		t.Fatalf("after the retry: %s of %s", again.Kind, again.Req.ExecutionID)
	}
	if got := h.execution(again.Req.ExecutionID); got.Node != "nod_b" || got.Owner != "daemon-b" {
		t.Fatalf("the retried attempt: node %s owner %s, want nod_b, daemon-b", got.Node, got.Owner)
	}
}

// Recovery on the node itself, after its own lease lapsed, adopts as
// before and nothing is stopped.
func TestExpiredAttemptOfThisNodeIsAdopted(t *testing.T) {
	h := newHarness(t, onNode("nod_a"))
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.clock.Advance(30*time.Second - kernel.DefaultLeaseMargin + time.Second)
	if lost, err := h.s.Heartbeat(context.Background()); err != nil || lost != 1 {
		t.Fatalf("late heartbeat: %d lost, %v", lost, err)
	}
	h.settle(seg)
	h.clock.Advance(kernel.DefaultLeaseMargin)
	h.tick()
	if rec := h.plain.Next(t); rec.Kind != "recover" || rec.Req.Epoch != 2 {
		t.Fatalf("after a lost lease: %s %+v", rec.Kind, rec.Req)
	}
	if _, err := h.s.Heartbeat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if stops := h.plain.Stops(); len(stops) != 0 {
		t.Fatalf("stopped %v after an adoption on the same node", stops)
	}
}

// awaitStops waits until ex was asked to stop n times (a failure guard,
// not a timing assertion).
func awaitStops(t *testing.T, ex *schedulertest.Executor, n int) []executor.RunRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if stops := ex.Stops(); len(stops) >= n {
			return stops
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d stops, want %d", len(ex.Stops()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A duty runs on one holder at a time: the second daemon is refused while
// the first renews, the first stops trusting its lease a margin before it
// expires, the second takes it over once it expired, and a release hands
// it over at once. FireDue runs only under the timers duty.
func TestDutiesRunOnOneHolderAndPassAtExpiry(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	margin := 5 * time.Second
	a := scheduler.NewDuties(h.store, "nod_a", h.clock, margin)
	b := scheduler.NewDuties(h.store, "nod_b", h.clock, margin)
	lease := 30 * time.Second
	if held, err := a.Renew(ctx, lease); err != nil || len(held) != len(scheduler.AllDuties) {
		t.Fatalf("the first taker holds %v (%v), want every duty", held, err)
	}
	if held, err := b.Renew(ctx, lease); err != nil || len(held) != 0 {
		t.Fatalf("the second taker holds %v (%v), want none", held, err)
	}
	h.clock.Advance(20 * time.Second)
	if held, _ := a.Renew(ctx, lease); len(held) != len(scheduler.AllDuties) {
		t.Fatalf("the holder's renewal holds %v", held)
	}
	// a stops renewing (its daemon died): 50s is its lease's end.
	h.clock.Advance(lease - margin)
	if a.Held(scheduler.DutyTimers) {
		t.Fatal("the holder still trusts a lease within its margin")
	}
	if held, _ := b.Renew(ctx, lease); len(held) != 0 {
		t.Fatalf("taken over before expiry: %v", held)
	}
	h.clock.Advance(margin)
	if held, _ := b.Renew(ctx, lease); len(held) != len(scheduler.AllDuties) || !b.Held(scheduler.DutyRecovery) {
		t.Fatalf("after expiry the second holds %v", held)
	}
	if held, _ := a.Renew(ctx, lease); len(held) != 0 || a.Held(scheduler.DutyTimers) {
		t.Fatalf("the old holder's renewal after the take-over holds %v", held)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Held(scheduler.DutySweeps) {
		t.Fatal("a released duty is still held")
	}
	if held, _ := a.Renew(ctx, lease); len(held) != len(scheduler.AllDuties) {
		t.Fatalf("after the release the first holds %v", held)
	}

	// FireDue under the gate: a due wait timeout fires only on the holder.
	fa := newPeer(t, h, "daemon-a", "nod_a", a)
	fb := newPeer(t, h, "daemon-b", "nod_b", b)
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"never.comes"}, Timeout: time.Minute}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	h.clock.Advance(2 * time.Minute)
	if _, err := a.Renew(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Renew(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if n, err := fb.s.FireDue(ctx); err != nil || n != 0 {
		t.Fatalf("a daemon without the timers duty fired %d (%v)", n, err)
	}
	if got := h.work(w.ID); got.State != storage.WorkWaiting {
		t.Fatalf("the Work is %s before the holder fired, want waiting", got.State)
	}
	if n, err := fa.s.FireDue(ctx); err != nil || n != 1 {
		t.Fatalf("the holder fired %d (%v), want 1", n, err)
	}
}

// startShellOnNodeA runs a real shell command on the harness's node
// nod_a and returns its pid; a failing run kills it at the end.
func startShellOnNodeA(t *testing.T) (*harness, storage.Work, int) {
	t.Helper()
	dir := t.TempDir()
	fifo, pidFile := filepath.Join(dir, "ready"), filepath.Join(dir, "pid")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *scheduler.Options) {
		withShell(t, fifo)(o)
		o.Node = "nod_a"
		cfg, _ := json.Marshal(map[string]any{
			"command": []string{"sh", "-c", `echo $$ > "$PIDFILE"; echo running > "$READY"; exec sleep 600`},
			"env":     map[string]string{"READY": fifo, "PIDFILE": pidFile},
		})
		bindings := o.Bindings
		o.Bindings = func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			if q.Binding == "bs" {
				return scheduler.Binding{Executor: "shell", Config: cfg, Generation: 1}, nil
			}
			return bindings(ctx, q)
		}
	})
	w := h.create("bs")
	h.tick()
	awaitRunning(t, fifo)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// A failing run must not leave the command behind.
	t.Cleanup(func() {
		if unix.Kill(pid, 0) == nil {
			unix.Kill(pid, unix.SIGKILL)
		}
	})
	return h, w, pid
}

// awaitGone waits until the process is gone (a failure guard, not a
// timing assertion).
func awaitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for unix.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the command (pid %d) still runs %s", pid, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The same with a real process: once another node recovered the attempt
// as lost, the first node's heartbeat stops the shell command it left
// running, so that a retry never runs beside it.
func TestTakeOverByAnotherNodeStopsTheShellProcessLeftHere(t *testing.T) {
	h, w, pid := startShellOnNodeA(t)
	lostOnPeer(t, h)
	if got := h.work(w.ID); got.BlockedReason != kernel.HoldAttemptLost {
		t.Fatalf("the Work is held %q, want attempt_lost", got.BlockedReason)
	}
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("the command is gone before its node's daemon stopped it: %v", err)
	}
	if lost, err := h.s.Heartbeat(context.Background()); err != nil || lost != 1 {
		t.Fatalf("the first node's heartbeat: %d lost, %v", lost, err)
	}
	awaitGone(t, pid, "after its lease was taken over")
}

// A daemon down longer than a lease, its host up: its command runs on
// under its supervisor while another node recovers the attempt as lost.
// When a daemon of the node starts again it adopts nothing of it and
// stops the command.
func TestRestartStopsWhatAnotherNodeRecoveredAsLost(t *testing.T) {
	h, w, pid := startShellOnNodeA(t)
	h.s.Close() // the first daemon stops; the command runs on
	lostOnPeer(t, h)
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("the command is gone before its node's daemon started again: %v", err)
	}
	h.restart("daemon-a2")
	if n, err := h.s.RecoverOrphans(context.Background()); err != nil || n != 0 {
		t.Fatalf("the restart adopted %d (%v), want nothing", n, err)
	}
	awaitGone(t, pid, "after its node's daemon started again")
	if got := h.work(w.ID); got.BlockedReason != kernel.HoldAttemptLost || got.State != storage.WorkReady {
		t.Fatalf("the Work: %s held %q, want ready, held attempt_lost", got.State, got.BlockedReason)
	}
}
