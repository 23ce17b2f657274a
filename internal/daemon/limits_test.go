package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// heldJobConfig is a configuration whose job makes a fifo named after its
// Work in dir, notes "started <work>" in mark, waits until the test writes
// an exit status into its fifo, notes "ended <work>" and exits with it.
func heldJobConfig(t *testing.T, dir, mark string, limits map[string]any) []byte {
	t.Helper()
	script := `f="$DIR/$OPEN_CONDUIT_WORK_ID"; mkfifo "$f" || exit 9; echo "started $OPEN_CONDUIT_WORK_ID" >> "$MARK"; ` +
		`read code < "$f"; echo "ended $OPEN_CONDUIT_WORK_ID" >> "$MARK"; exit "$code"`
	doc := map[string]any{
		"version": 1,
		"limits":  limits,
		"scopes": map[string]any{"t": map[string]any{
			"bindings": map[string]any{"job": map[string]any{
				"executor": "shell",
				"config":   map[string]any{"command": []string{"sh", "-c", script}, "env": map[string]string{"DIR": dir, "MARK": mark}},
			}},
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ticks counts the daemon's scheduler rounds for roundAfter.
type ticks chan struct{}

func (c ticks) ticked() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// roundAfter returns once a whole scheduler round has run after the call:
// the rounds are sequential, so of two rounds ending after it the second
// started after it. The wait is bounded by guard.
func (r *running) roundAfter(c ticks) {
	r.t.Helper()
	for {
		select {
		case <-c:
			continue
		default:
		}
		break
	}
	for range 2 {
		r.d.Wake()
		select {
		case <-c:
		case <-time.After(guard):
			r.t.Fatal("no scheduler round ran")
		}
	}
}

// apply publishes doc as the next generation through the management API.
func (r *running) apply(doc []byte, expected int64) {
	r.t.Helper()
	res, err := r.client.ApplyConfig(operator, doc, expected, "", nil)
	if err != nil {
		r.t.Fatalf("config apply: %v", err)
	}
	if res.Generation != expected+1 {
		r.t.Fatalf("applied generation %d, want %d", res.Generation, expected+1)
	}
}

func (r *running) leased() int {
	r.t.Helper()
	n, err := r.d.store.CountLeased(context.Background(), r.d.Info().Owner)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// An apply that lowers max_running stops no running attempt and holds the
// next claim to the new bound; its lease reaches the running attempts at
// once (renewed with the new length) and its attempt_timeout the attempts
// claimed after it, while the running ones keep their deadline.
func TestApplyChangesSchedulerLimitsAtTheNextDecision(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(state)
	mark := filepath.Join(dir, "mark")
	gen1 := heldJobConfig(t, dir, mark, map[string]any{"max_running": 2, "lease": "30s", "attempt_timeout": "1h"})
	if err := os.WriteFile(filepath.Join(state, ConfigFile), gen1, 0o600); err != nil {
		t.Fatal(err)
	}
	var started []string
	t.Cleanup(func() {
		// A job the test did not get to release ends now; a fifo nobody
		// reads any more refuses the write, which is fine.
		for _, id := range started {
			if f, err := os.OpenFile(filepath.Join(dir, id), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.WriteString("1\n")
				f.Close()
			}
		}
	})
	rounds := make(ticks, 1)
	r := start(t, state, func(o *Options) { o.ticked = rounds.ticked })

	a := r.create("t", "job")
	b := r.create("t", "job")
	started = append(started, a.ID, b.ID)
	waitFile(t, mark, "started "+a.ID)
	waitFile(t, mark, "started "+b.ID)
	before := time.Now()
	running := map[string]storage.Execution{a.ID: r.executions(a.ID)[0], b.ID: r.executions(b.ID)[0]}

	r.apply(heldJobConfig(t, dir, mark, map[string]any{"max_running": 1, "lease": "10m", "attempt_timeout": "5m"}), 1)

	// The new lease: the loop renews the running attempts at once with it.
	deadline := time.Now().Add(guard)
	for !strings.Contains(r.logs.String(), `"msg":"lease renewal re-paced"`) {
		if time.Now().After(deadline) {
			t.Fatalf("lease renewal was not re-paced after the apply\nlogs:\n%s", r.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for id, old := range running {
		exe := r.executions(id)[0]
		if exe.State != storage.ExecutionRunning || exe.Epoch != old.Epoch {
			t.Fatalf("attempt of %s changed by the apply: %+v", id, exe)
		}
		if exe.LeaseExpiresAt.Before(before.Add(10 * time.Minute)) {
			t.Errorf("attempt of %s: lease expires %v, want renewed for the new 10m lease (after %v)", id, exe.LeaseExpiresAt, before.Add(10*time.Minute))
		}
		if !exe.Deadline.Equal(old.Deadline) || exe.Deadline.Sub(exe.CreatedAt) != time.Hour {
			t.Errorf("attempt of %s: deadline %v, want its own %v (1h from its claim)", id, exe.Deadline, old.Deadline)
		}
	}
	if n := r.leased(); n != 2 {
		t.Fatalf("%d attempts leased after lowering max_running to 1, want the 2 running ones kept", n)
	}

	// One of the two ends: the other still runs, which is the new bound,
	// so a Work created now is not claimed.
	c := r.create("t", "job")
	started = append(started, c.ID)
	release(t, filepath.Join(dir, a.ID), "0")
	if w := r.terminal(a.ID); w.State != storage.WorkSucceeded {
		t.Fatalf("Work %s ended %s", a.ID, w.State)
	}
	r.roundAfter(rounds)
	if w, exes := r.work(c.ID), r.executions(c.ID); w.State != storage.WorkReady || len(exes) != 0 {
		t.Fatalf("Work %s is %s with %d executions while one attempt runs under max_running 1, want ready and unclaimed", c.ID, w.State, len(exes))
	}
	if n := r.leased(); n != 1 {
		t.Fatalf("%d attempts leased, want 1", n)
	}

	// The last of the earlier attempts ends: the new Work runs, with the
	// new attempt_timeout and lease.
	release(t, filepath.Join(dir, b.ID), "0")
	waitFile(t, mark, "started "+c.ID)
	exe := r.executions(c.ID)[0]
	if exe.Deadline.Sub(exe.CreatedAt) != 5*time.Minute || exe.LeaseExpiresAt.Sub(exe.CreatedAt) != 10*time.Minute {
		t.Errorf("attempt claimed after the apply: deadline %v and lease %v after its claim, want 5m and 10m", exe.Deadline.Sub(exe.CreatedAt), exe.LeaseExpiresAt.Sub(exe.CreatedAt))
	}
	release(t, filepath.Join(dir, c.ID), "0")
	if w := r.terminal(c.ID); w.State != storage.WorkSucceeded {
		t.Fatalf("Work %s ended %s", c.ID, w.State)
	}
	b2, _ := os.ReadFile(mark)
	lines := strings.Split(strings.TrimSpace(string(b2)), "\n")
	want := []string{"ended " + b.ID, "started " + c.ID}
	if got := lines[len(lines)-3 : len(lines)-1]; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the job log ends %q, want %q: the new Work started only after the second attempt ended", got, want)
	}
}

func (r *running) work(id string) storage.Work {
	r.t.Helper()
	w, err := r.d.store.GetWork(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return w
}

// An apply that lowers causal_max_depth reaches the next root's first
// derived emission, on the operator's emissions and on route starts; a
// root pinned before it keeps its limits.
func TestApplyLowersCausalMaxDepthForNewRoots(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	doc := func(limits map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{
			"version": 1,
			"limits":  limits,
			"scopes": map[string]any{"t": map[string]any{
				"bindings": map[string]any{"job": map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"true"}}}},
				"routes":   []any{map[string]any{"id": "loop", "match": map[string]any{"type": "loop.*"}, "binding": "job", "effect": "start"}},
			}},
		})
		return b
	}
	if err := os.WriteFile(filepath.Join(state, ConfigFile), doc(map[string]any{"causal_max_depth": 8}), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	ctx := context.Background()
	emit := func(key, parent string) (*client.Emitted, error) {
		return r.client.Emit(ctx, client.EmitRequest{Scope: "t", Type: "loop.step", CorrelationKey: key, Parent: parent}, nil)
	}
	mustStart := func(key, parent string) *client.Emitted {
		t.Helper()
		res, err := emit(key, parent)
		if err != nil {
			t.Fatalf("emit %s: %v", key, err)
		}
		if res.Decision.Started == "" {
			t.Fatalf("emit %s started no Work: %+v", key, res.Decision)
		}
		return res
	}
	// An early root, pinned at depth 8 by its first start.
	early := mustStart("early-0", "")
	earlyChild := mustStart("early-1", early.Event.ID)

	r.apply(doc(map[string]any{"causal_max_depth": 1}), 1)

	// The early root keeps depth 8: its grandchild still starts Work.
	mustStart("early-2", earlyChild.Event.ID)
	// A new root pins depth 1 at its first start (core.work.created one
	// step below it).
	late := mustStart("late-0", "")
	child, err := emit("late-1", late.Event.ID)
	if err != nil {
		t.Fatalf("the operator's event at depth 1: %v", err)
	}
	if child.Decision.Started != "" || child.Decision.Effect != "drop" || !strings.Contains(child.Decision.Detail, "causal_depth_exceeded") {
		t.Fatalf("a route start two steps below a root pinned at depth 1: %+v, want dropped for causal_depth_exceeded", child.Decision)
	}
	// The management API answers the refusal as an invalid request.
	if _, err := emit("late-2", child.Event.ID); client.ErrorCode(err) != "causal_depth_exceeded" || !strings.Contains(err.Error(), "limit is 1 (causal_max_depth)") {
		t.Fatalf("the operator's event at depth 2 under depth 1: %v, want refused by causal_max_depth 1", err)
	}
	for root, want := range map[string]int{early.Event.ID: 8, late.Event.ID: 1} {
		pin, err := r.d.store.GetCausalRoot(ctx, root)
		if err != nil || pin.MaxDepth != want {
			t.Errorf("root %s pinned %+v (%v), want depth %d", root, pin, err, want)
		}
	}
}
