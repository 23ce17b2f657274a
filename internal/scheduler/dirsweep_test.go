package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
)

// sweepDirs runs one sweep of the executions directory and returns how
// many it removed.
func (h *harness) sweepDirs(t *testing.T) int {
	t.Helper()
	n, err := h.s.SweepExecutionDirs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The executions directory keeps an ended execution's directory for a
// day after it finished and an unknown one until it is a day old; a live
// attempt's, whatever its age, and what is not an execution's stay.
func TestSweepExecutionDirs(t *testing.T) {
	h := newHarness(t, nil)
	root := filepath.Join(h.dir, "executions")

	h.create("b1")
	h.tick()
	ok := h.plain.Next(t)
	h.create("b1")
	h.tick()
	bad := h.plain.Next(t)
	h.create("b1")
	h.tick()
	running := h.plain.Next(t)
	for _, seg := range []string{ok.Req.Dir, bad.Req.Dir, running.Req.Dir} {
		if !exists(seg) {
			t.Fatalf("the execution directory %s was not created", seg)
		}
	}
	h.finish(ok, executor.Result{Outcome: executor.Succeeded})
	h.finish(bad, executor.Result{Outcome: executor.Failed, ExitCode: 1})

	unknown := filepath.Join(root, "exe_0123456789abcdefghjkmnpqrs")
	other := filepath.Join(root, "notes")
	for _, d := range []string{unknown, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		// Dated by the harness's clock, a day before it.
		old := t0.Add(-scheduler.KeepEndedDirs - time.Minute)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	young := filepath.Join(root, "exe_1123456789abcdefghjkmnpqrs")
	if err := os.Mkdir(young, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(young, t0, t0); err != nil {
		t.Fatal(err)
	}

	if n := h.sweepDirs(t); n != 1 || exists(unknown) {
		t.Fatalf("first sweep removed %d, the old unknown directory kept %v; want only that one removed", n, exists(unknown))
	}
	for what, d := range map[string]string{"succeeded": ok.Req.Dir, "failed": bad.Req.Dir, "running": running.Req.Dir, "foreign": other, "young unknown": young} {
		if !exists(d) {
			t.Fatalf("first sweep removed the %s directory", what)
		}
	}

	// A day later the ended ones go; the running one and what is not an
	// execution's stay.
	h.clock.Advance(scheduler.KeepEndedDirs)
	if exe := h.execution(running.Req.ExecutionID); !exe.Live() {
		t.Fatalf("the running execution ended: %+v", exe)
	}
	if n := h.sweepDirs(t); n != 3 || exists(ok.Req.Dir) || exists(bad.Req.Dir) || exists(young) {
		t.Fatalf("second sweep removed %d; succeeded kept %v, failed kept %v, young unknown kept %v; want all three removed",
			n, exists(ok.Req.Dir), exists(bad.Req.Dir), exists(young))
	}
	if !exists(running.Req.Dir) || !exists(other) {
		t.Fatalf("second sweep removed the running execution's directory (%v) or a foreign entry (%v)", !exists(running.Req.Dir), !exists(other))
	}
}

// The directory of an attempt this node launched that another node
// recovered as lost stays: the start-up stop of what is left needs it.
func TestSweepKeepsWhatAnotherNodeRecoveredAsLost(t *testing.T) {
	h := newHarness(t, onNode("nod_a"))
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	lostOnPeer(t, h)
	h.clock.Advance(2 * scheduler.KeepEndedDirs)
	if n := h.sweepDirs(t); n != 0 || !exists(seg.Req.Dir) {
		t.Fatalf("the sweep removed %d, the lost attempt's directory exists %v; want it kept", n, exists(seg.Req.Dir))
	}
}

// A directory whose entries changed within the day is kept, whenever its
// execution finished; and one pass removes at most its bound.
func TestSweepExecutionDirsByAgeAndBound(t *testing.T) {
	h := newHarness(t, nil)
	var segs []string
	for range 3 {
		h.create("b1")
		h.tick()
		seg := h.plain.Next(t)
		h.finish(seg, executor.Result{Outcome: executor.Succeeded})
		segs = append(segs, seg.Req.Dir)
	}
	h.clock.Advance(scheduler.KeepEndedDirs)
	// Touched just now by the harness's clock: kept.
	if err := os.Chtimes(segs[0], h.clock.Now(), h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	scheduler.SetMaxDirSweep(t, 1)
	if n := h.sweepDirs(t); n != 1 {
		t.Fatalf("a pass bounded to 1 removed %d", n)
	}
	if n := h.sweepDirs(t); n != 1 {
		t.Fatalf("the second bounded pass removed %d", n)
	}
	if n := h.sweepDirs(t); n != 0 || !exists(segs[0]) || exists(segs[1]) || exists(segs[2]) {
		t.Fatalf("the third pass removed %d; left %v %v %v, want only the touched one left", n, exists(segs[0]), exists(segs[1]), exists(segs[2]))
	}
	h.clock.Advance(scheduler.KeepEndedDirs)
	if n := h.sweepDirs(t); n != 1 || exists(segs[0]) {
		t.Fatalf("a day after its change the touched directory is still there (%d removed)", n)
	}
}
