package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/api"
)

// The Work-level operator controls through the real CLI: hold and
// release, rebind and attach, and a manual Work's identity. Each control's
// effect, its refusals, its replay under the same Idempotency-Key and the
// actor on the Event it records.

// controlsEnv writes a configuration with scope t (bindings job, which
// blocks on a fifo the test controls; quick, which exits 0 at once; and
// broken, whose secret never resolves), a queue route for note.* Events,
// and a second scope u.
func controlsEnv(t *testing.T) (e *env, fifo, mark, quick string) {
	e = newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	fifo, mark, quick = filepath.Join(e.root, "fifo"), filepath.Join(e.root, "mark"), filepath.Join(e.root, "quick")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	blocking := `echo "started $$" >> "$MARK"; read code < "$FIFO"; exit "$code"`
	fast := `echo "started $$" >> "$MARK"`
	auth := `"authorization": {"operations": ["declare_outcome", "read_context", "emit"], "reads": ["work", "events"]}`
	shell := func(script, env string) string {
		return `{"executor": "shell", "config": {"command": ["sh", "-c", ` + strconv.Quote(script) + `], "env": {` + env + `}}, "operations": ["read_context"]`
	}
	cfg := `{
  "version": 1,
  "secrets": {"missing": "env:OC_E2E_CONTROLS_NEVER_SET"},
  "scopes": {
    "t": {
      ` + auth + `,
      "routes": [{"id": "notes", "match": {"type": "note.*"}, "effect": "queue"}],
      "bindings": {
        "job": ` + shell(blocking, `"FIFO": `+strconv.Quote(fifo)+`, "MARK": `+strconv.Quote(mark)) + `},
        "quick": ` + shell(fast, `"MARK": `+strconv.Quote(quick)) + `},
        "broken": ` + shell("true", "") + `, "secrets": {"X": "missing"}}
      }
    },
    "u": {
      ` + auth + `,
      "bindings": {"quick": ` + shell(fast, `"MARK": `+strconv.Quote(quick)) + `}}
    }
  }
}`
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e, fifo, mark, quick
}

// ctl runs a control with --json under the Idempotency-Key idem and
// decodes its answer; it fails the test unless the command exits 0.
func (e *env) ctl(idem string, args ...string) api.Controlled {
	e.t.Helper()
	var out api.Controlled
	e.cliJSON(&out, append(args, "--idempotency-key", idem)...)
	return out
}

// refused runs a command that must exit 1 and whose message must name
// code.
func (e *env) refused(code string, args ...string) {
	e.t.Helper()
	status, stdout, stderr := e.cli(args...)
	// A refusal that says the request itself is wrong is a usage error
	// (exit 2, docs/cli.md); any other refusal exits 1.
	want := 1
	if strings.HasPrefix(stderr, "open-conduit: invalid_request:") {
		want = 2
	}
	if status != want || !strings.Contains(stderr, code) {
		e.t.Fatalf("open-conduit %v: exit %d, %q %q; want exit %d naming %s", args, status, stdout, stderr, want, code)
	}
}

// cliWork reads a Work through the CLI.
func (e *env) cliWork(id string) api.Work {
	e.t.Helper()
	var w api.Work
	e.cliJSON(&w, "work", "get", id)
	return w
}

// createOn creates a manual Work on binding through the CLI.
func (e *env) createOn(scope, binding string, extra ...string) api.Work {
	e.t.Helper()
	var out api.CreatedWork
	e.cliJSON(&out, append([]string{"work", "create", "--scope", scope, "--binding", binding}, extra...)...)
	return out.Work
}

// controlEvent checks the Event a control recorded: its type, the
// operator as its actor, about the Work.
func (e *env) controlEvent(c api.Controlled, typ string) {
	e.t.Helper()
	var ev api.Event
	e.cliJSON(&ev, "events", "get", c.Event.ID)
	if ev.Type != typ || ev.Actor != "operator:local" || ev.Source != "core.manual" || ev.Work != c.Work.ID {
		e.t.Fatalf("the control's Event %+v, want %s from core.manual by operator:local about %s", ev, typ, c.Work.ID)
	}
}

func TestWorkHoldAndRelease(t *testing.T) {
	e, fifo, mark, quick := controlsEnv(t)
	e.start()
	w := e.createOn("t", "job")
	waitStarted(t, mark, 1)

	// A hold without --stop lets the running attempt go on.
	held := e.ctl("hold-1", "work", "hold", w.ID, "--reason", "freeze for the migration")
	if held.Work.Hold == nil || held.Work.Hold.By != api.HoldByOperator || held.Work.Hold.Reason != api.HoldOperator ||
		held.Work.Hold.Detail != "freeze for the migration" || held.Work.State != "running" || held.Execution != nil {
		t.Fatalf("hold = %+v", held)
	}
	e.controlEvent(held, "core.manual.hold")
	// Replayed under the same key: the same answer, nothing done again.
	again := e.ctl("hold-1", "work", "hold", w.ID, "--reason", "freeze for the migration")
	if again.Event.ID != held.Event.ID {
		t.Fatalf("the replayed hold recorded event %s, want %s", again.Event.ID, held.Event.ID)
	}
	if _, out, _ := e.cli("work", "hold", w.ID, "--reason", "freeze for the migration", "--idempotency-key", "hold-1"); !strings.Contains(out, "an earlier request with the same idempotency key did it") {
		t.Fatalf("the replayed hold printed %q", out)
	}
	e.refused("idempotency_conflict", "work", "hold", w.ID, "--reason", "another reason", "--idempotency-key", "hold-1")
	e.refused("is already held (operator_held", "work", "hold", w.ID, "--reason", "twice")
	if code, _, stderr := e.cli("work", "hold", w.ID); code != 2 || !strings.Contains(stderr, "--reason") {
		t.Fatalf("a hold without a reason: exit %d %q, want usage naming --reason", code, stderr)
	}
	if got := e.cliWork(w.ID); got.Hold == nil || got.Hold.By != "operator" || got.BlockedReason != "operator_held" {
		t.Fatalf("work get of the held Work = %+v", got)
	}
	var runs api.Page[api.Run]
	e.cliJSON(&runs, "runs", "list")
	if len(runs.Items) != 1 || runs.Items[0].WorkHold == nil || runs.Items[0].WorkHold.By != "operator" || runs.Items[0].Execution.State != "running" {
		t.Fatalf("runs of the held Work = %+v", runs.Items)
	}

	// Release, then hold --stop: the attempt is fenced and stopped.
	rel := e.ctl("rel-1", "work", "release", w.ID)
	if rel.Work.Hold != nil || rel.Work.State != "running" {
		t.Fatalf("release = %+v", rel)
	}
	e.controlEvent(rel, "core.manual.release")
	if again := e.ctl("rel-1", "work", "release", w.ID); again.Event.ID != rel.Event.ID {
		t.Fatalf("the replayed release recorded event %s, want %s", again.Event.ID, rel.Event.ID)
	}
	e.refused("not held", "work", "release", w.ID)
	stopped := e.ctl("hold-2", "work", "hold", w.ID, "--reason", "runaway", "--stop")
	if stopped.Execution == nil || stopped.Execution.State != "stopping" || stopped.Work.State != "ready" || stopped.Work.Hold == nil {
		t.Fatalf("hold --stop = %+v", stopped)
	}
	until(t, "the stopped attempt finishing", func() bool {
		exes := e.executions(w.ID)
		return len(exes) == 1 && exes[0].State == "finished"
	})
	// No new attempt starts while it is held: a younger Work on another
	// binding runs and ends first, and the held one has still one attempt.
	other := e.createOn("t", "quick")
	if got := e.waitWork(other.ID, "finished", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the other Work ended %s", got.State)
	}
	if exes := e.executions(w.ID); len(exes) != 1 {
		t.Fatalf("a held Work started another attempt: %+v", exes)
	}
	if len(marks(quick)) != 1 || len(marks(mark)) != 1 {
		t.Fatalf("runs: job %v, quick %v", marks(mark), marks(quick))
	}
	// Released, it runs again.
	e.ctl("rel-2", "work", "release", w.ID)
	waitStarted(t, mark, 2)
	release(t, fifo, 0)
	if got := e.waitWork(w.ID, "finished", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the released Work ended %s (%s)", got.State, got.OutcomeMessage)
	}
	e.refused("has already succeeded", "work", "hold", w.ID, "--reason", "too late")

	// A system hold is told apart and not released: retry it.
	broken := e.createOn("t", "broken")
	sys := e.waitWork(broken.ID, "held", func(w work) bool { return w.BlockedReason != "" })
	if sys.BlockedReason != "secret_unavailable" {
		t.Fatalf("the broken Work is held %q, want secret_unavailable", sys.BlockedReason)
	}
	if got := e.cliWork(broken.ID); got.Hold == nil || got.Hold.By != api.HoldBySystem {
		t.Fatalf("work get of a system hold = %+v", got.Hold)
	}
	e.refused("system_hold", "work", "release", broken.ID)
}

func TestWorkRebind(t *testing.T) {
	e, _, mark, quick := controlsEnv(t)
	e.start()
	w := e.createOn("t", "job")
	waitStarted(t, mark, 1)
	e.refused("attempt_live", "work", "rebind", w.ID, "--binding", "quick")
	// Stop it and keep it from starting again, then move it.
	e.ctl("hold", "work", "hold", w.ID, "--reason", "move it", "--stop")
	until(t, "the stopped attempt finishing", func() bool {
		exes := e.executions(w.ID)
		return len(exes) == 1 && exes[0].State == "finished"
	})
	e.refused("scope t has no binding nope", "work", "rebind", w.ID, "--binding", "nope")
	e.refused("has no grant deploy", "work", "rebind", w.ID, "--binding", "quick", "--grant", "deploy")
	if code, _, stderr := e.cli("work", "rebind", w.ID); code != 2 || !strings.Contains(stderr, "--binding") {
		t.Fatalf("a rebind without a binding: exit %d %q, want usage", code, stderr)
	}
	moved := e.ctl("rebind-1", "work", "rebind", w.ID, "--binding", "quick", "--reason", "the job binding is retired")
	if moved.Work.Binding != "quick" || moved.Work.Hold == nil {
		t.Fatalf("rebind = %+v", moved)
	}
	e.controlEvent(moved, "core.manual.rebind")
	if again := e.ctl("rebind-1", "work", "rebind", w.ID, "--binding", "quick", "--reason", "the job binding is retired"); again.Event.ID != moved.Event.ID {
		t.Fatalf("the replayed rebind recorded event %s, want %s", again.Event.ID, moved.Event.ID)
	}
	e.refused("idempotency_conflict", "work", "rebind", w.ID, "--binding", "job", "--idempotency-key", "rebind-1")
	e.refused("is already on binding quick", "work", "rebind", w.ID, "--binding", "quick")
	// Released, its next attempt runs on the new binding.
	e.ctl("release", "work", "release", w.ID)
	if got := e.waitWork(w.ID, "finished", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the rebound Work ended %s (%s)", got.State, got.OutcomeMessage)
	}
	var exes api.Page[api.Execution]
	e.cliJSON(&exes, "executions", "list", "--work", w.ID)
	bindings := map[string]int{}
	for _, x := range exes.Items {
		bindings[x.Binding]++
	}
	if len(exes.Items) != 2 || bindings["job"] != 1 || bindings["quick"] != 1 || len(marks(quick)) != 1 || len(marks(mark)) != 1 {
		t.Fatalf("attempts %+v; job ran %d, quick %d times", exes.Items, len(marks(mark)), len(marks(quick)))
	}
	e.refused("succeeded; create a new Work", "work", "rebind", w.ID, "--binding", "job")
}

func TestWorkAttach(t *testing.T) {
	e, fifo, mark, _ := controlsEnv(t)
	e.start()
	w := e.createOn("t", "job")
	waitStarted(t, mark, 1)
	// The owner of pr/2 stays unfinished: its secret never resolves.
	owner := e.createOn("t", "broken", "--correlation-key", "pr/2")
	var note, foreign api.Emitted
	e.cliJSON(&note, "emit", "ci.result", "--scope", "t", "--data", `{"ok":true}`)
	e.cliJSON(&foreign, "emit", "ci.result", "--scope", "u")

	att := e.ctl("attach-1", "work", "attach", w.ID, "--event", note.Event.ID, "--key", "pr/1")
	if att.Work.InputCount != 2 {
		t.Fatalf("attach = %+v; want the Event queued as input 2", att.Work)
	}
	e.controlEvent(att, "core.manual.attach")
	if again := e.ctl("attach-1", "work", "attach", w.ID, "--event", note.Event.ID, "--key", "pr/1"); again.Event.ID != att.Event.ID {
		t.Fatalf("the replayed attach recorded event %s, want %s", again.Event.ID, att.Event.ID)
	}
	e.refused("is already input 2", "work", "attach", w.ID, "--event", note.Event.ID)
	e.refused("is of scope u", "work", "attach", w.ID, "--event", foreign.Event.ID)
	e.refused("event evt_nope does not exist", "work", "attach", w.ID, "--event", "evt_nope")
	e.refused("is owned by Work "+owner.ID, "work", "attach", w.ID, "--key", "pr/2")
	if code, _, _ := e.cli("work", "attach", w.ID); code != 2 {
		t.Fatalf("an attach of nothing exited %d, want 2", code)
	}
	// A later Event on the attached key routes to the Work.
	var later api.Emitted
	e.cliJSON(&later, "emit", "note.rerun", "--scope", "t", "--correlation-key", "pr/1")
	if later.Decision.Work != w.ID || later.Decision.Effect != "queue" {
		t.Fatalf("the later Event's decision = %+v, want queued for %s", later.Decision, w.ID)
	}
	if got := e.cliWork(w.ID); got.InputCount != 3 {
		t.Fatalf("inputs after the routed Event = %d, want 3", got.InputCount)
	}
	// The attempt ends; the queued input makes the Work run again.
	release(t, fifo, 0)
	waitStarted(t, mark, 2)
	release(t, fifo, 0)
	if got := e.waitWork(w.ID, "finished", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the Work ended %s (%s)", got.State, got.OutcomeMessage)
	}
	e.refused("has already succeeded", "work", "attach", w.ID, "--key", "pr/9")
}

// needSQLite skips without the sqlite3 shell, which the identity test
// uses to lose the daemon's idempotency records as a crash would.
func needSQLite(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs the sqlite3 shell: %v", err)
		}
		t.Skipf("needs the sqlite3 shell (apt-get install sqlite3): %v", err)
	}
}

func TestManualWorkIdentityAfterALostRecord(t *testing.T) {
	needSQLite(t)
	e, _, _, _ := controlsEnv(t)
	d := e.start()
	create := func(args ...string) (int, string, string) {
		return e.cli(append([]string{"work", "create", "--scope", "t", "--binding", "quick", "--idempotency-key", "same", "--json"}, args...)...)
	}
	code, out, stderr := create("--data", `{"n":1}`, "--correlation-key", "pr/1")
	if code != 0 {
		t.Fatalf("create: exit %d %s", code, stderr)
	}
	var first api.CreatedWork
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatal(err)
	}
	// The records are deleted while the daemon is stopped, as a record
	// whose write failed or that was swept would be missing.
	db := filepath.Join(e.state, "coordination.db")
	lose := func() {
		t.Helper()
		d.stop()
		if b, err := exec.Command("sqlite3", db, "DELETE FROM idempotency_records").CombinedOutput(); err != nil {
			t.Fatalf("losing the idempotency records: %v: %s", err, b)
		}
		d = e.start()
	}
	lose()
	// The same request finds the same Work, from its derived identity.
	code, out, stderr = create("--data", `{"n":1}`, "--correlation-key", "pr/1")
	var again api.CreatedWork
	if code != 0 || json.Unmarshal([]byte(out), &again) != nil || !again.Existing || again.Work.ID != first.Work.ID {
		t.Fatalf("the same request again: exit %d %s %s", code, out, stderr)
	}
	lose()
	// Another input, key or grants under the key is another request.
	for _, args := range [][]string{
		{"--data", `{"n":2}`, "--correlation-key", "pr/1"},
		{"--data", `{"n":1}`, "--correlation-key", "pr/2"},
		{"--data", `{"n":1}`},
	} {
		code, out, stderr := create(args...)
		if code != 1 || !strings.Contains(stderr, "idempotency_conflict") {
			t.Fatalf("create %v after the record was lost: exit %d %s %s; want idempotency_conflict", args, code, out, stderr)
		}
	}
}
