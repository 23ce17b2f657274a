package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The kill drill matrix: the daemon is killed (kill -9) at each phase of
// an attempt, restarted, and checked: the Work ends as it should (or is
// adopted and then ends so), its command ran once (the job appends a line
// per run), no accepted event is lost, and where a process outlived the
// daemon its socket is served again with a rotated token and the old one
// is refused. Every wait is on the state asserted, never on a duration.
//
// The phases:
//   - created: right after the Work's creation was answered (before or
//     around its claim);
//   - claim_to_launch: the claim committed, the daemon stopped in the
//     secret resolution that precedes the launch (the test daemon's
//     E2E_KEYRING_STALL);
//   - running: the job runs;
//   - outcome: the job declared its outcome (os outcome) and has not
//     exited;
//   - wait: the job declared a wait (os wait) and has not exited;
//   - finishing: the job was just told to exit (status 3);
//   - apply: a config apply (narrowing emit away) is in flight.
func TestKillDrillMatrix(t *testing.T) {
	phases := []string{"created", "claim_to_launch", "running", "outcome", "wait", "finishing", "apply"}
	for _, phase := range phases {
		t.Run(phase, func(t *testing.T) { killDrillPhase(t, phase) })
	}
}

// drillJob writes the drill's configuration: the job appends "started" to
// its mark file, runs step (an os command, or nothing), appends
// "stepped", then blocks reading a fifo and exits with the status read.
// Its binding takes a keyring: secret, which the test daemon answers.
func (e *env) drillJob(step string) (fifo, mark string) {
	e.t.Helper()
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		e.t.Fatal(err)
	}
	fifo, mark = e.fifoJob("keyring:e2e/canary", "")
	if step == "" {
		step = "true"
	}
	script := `echo "started $$" >> "$MARK"; ` + step + ` > /dev/null && echo "stepped" >> "$MARK"; read code < "$FIFO"; exit "$code"`
	cfgPath := filepath.Join(e.state, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	ops := []string{"declare_outcome", "read_context", "emit", "wait"}
	out := e.drillConfig(b, func(scope, job map[string]any) {
		job["config"].(map[string]any)["command"] = []string{"sh", "-c", script}
		job["operations"] = ops
		scope["authorization"].(map[string]any)["operations"] = ops
	})
	if err := os.WriteFile(cfgPath, out, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return fifo, mark
}

// drillConfig is the configuration b with its scope t and binding job
// changed by edit.
func (e *env) drillConfig(b []byte, edit func(scope, job map[string]any)) []byte {
	e.t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		e.t.Fatal(err)
	}
	scope := cfg["scopes"].(map[string]any)["t"].(map[string]any)
	edit(scope, scope["bindings"].(map[string]any)["job"].(map[string]any))
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// eventIDs lists the ids of the events accepted so far.
func (e *env) eventIDs() []string {
	e.t.Helper()
	var ids []string
	q := url.Values{"limit": {"500"}}
	for {
		var p page[eventRecord]
		e.must("GET", "/v1/events?"+q.Encode(), nil, nil, &p)
		for _, ev := range p.Items {
			ids = append(ids, ev.ID)
		}
		if p.NextCursor == "" {
			return ids
		}
		q.Set("cursor", p.NextCursor)
	}
}

func stepped(mark string) bool {
	b, _ := os.ReadFile(mark)
	return strings.Contains(string(b), "stepped")
}

func killDrillPhase(t *testing.T, phase string) {
	e := newEnv(t)
	step := map[string]string{"outcome": "os outcome succeeded --message drilled", "wait": "os wait --type drill.go"}[phase]
	fifo, mark := e.drillJob(step)
	keyring := "E2E_KEYRING=drill"
	stall := filepath.Join(e.root, "stalled")
	first := e.startTestDaemon(keyring, "E2E_KEYRING_STALL="+map[bool]string{true: stall}[phase == "claim_to_launch"])
	w := e.createWork("t")

	// Bring the attempt to its phase.
	var exe execution
	var oldToken string
	switch phase {
	case "created":
	case "claim_to_launch":
		until(t, "the daemon stalled between claim and launch", func() bool { _, err := os.Stat(stall); return err == nil })
		exes := e.executions(w.ID)
		if len(exes) != 1 || exes[0].State != "running" || len(marks(mark)) != 0 {
			t.Fatalf("at the stall: executions %+v, %d runs; want one claimed, nothing run", exes, len(marks(mark)))
		}
	default:
		waitStarted(t, mark, 1)
		until(t, "the job's step", func() bool { return stepped(mark) })
		exes := e.executions(w.ID)
		if len(exes) != 1 {
			t.Fatalf("executions %+v, want one", exes)
		}
		exe = exes[0]
		oldToken = e.execToken(exe.ID)
	}
	events := e.eventIDs()
	applied := make(chan struct{})
	switch phase {
	case "finishing":
		release(t, fifo, 3)
	case "apply":
		cfg, err := os.ReadFile(filepath.Join(e.state, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		narrow := []string{"declare_outcome", "read_context", "wait"}
		narrowed := e.drillConfig(cfg, func(scope, job map[string]any) {
			job["operations"] = narrow
			scope["authorization"].(map[string]any)["operations"] = narrow
		})
		go func() {
			defer close(applied)
			_, _ = e.client().Do(t.Context(), "POST", "/v1/config/apply",
				map[string]any{"config": json.RawMessage(narrowed), "expected_generation": 1}, key())
		}()
	}
	first.kill()
	if phase != "apply" {
		close(applied)
	}
	<-applied

	e.startTestDaemon(keyring)
	have := map[string]bool{}
	for _, id := range e.eventIDs() {
		have[id] = true
	}
	for _, id := range events {
		if !have[id] {
			t.Fatalf("event %s, accepted before the kill, is gone", id)
		}
	}
	if exe.ID != "" && phase != "finishing" {
		// The process outlived the daemon: it is adopted, its socket is
		// served again with a rotated token, and the old one is refused.
		// After a declaration the segment's authority is released: the
		// rotated token is recognised, and answered so.
		rotated := e.untilServedAgain(exe.ID, oldToken)
		code, out, stderr := e.run(bins.os, e.osEnv(exe.ID), "call", "read_context")
		switch {
		case phase == "outcome" || phase == "wait":
			if code != 1 || !strings.Contains(stderr, "authority_released") {
				t.Fatalf("os call read_context with the rotated token after a declaration: exit %d %q %q", code, out, stderr)
			}
		case code != 0 || !strings.Contains(out, w.ID):
			t.Fatalf("os call read_context with the rotated token: exit %d %q %q", code, out, stderr)
		}
		oldFile := filepath.Join(e.root, "old.token")
		if err := os.WriteFile(oldFile, []byte(oldToken), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"OS_ENDPOINT=" + e.execSocket(exe.ID), "OS_TOKEN_FILE=" + oldFile}
		if code, _, stderr := e.run(bins.os, env, "call", "read_context"); code != 1 || !strings.Contains(stderr, "forbidden") || rotated == oldToken {
			t.Fatalf("os with the old token: exit %d %q, want 1 forbidden", code, stderr)
		}
	}
	if phase == "created" || phase == "claim_to_launch" {
		waitStarted(t, mark, 1)
		until(t, "the job's step", func() bool { return stepped(mark) })
	}
	if phase != "finishing" {
		release(t, fifo, 0)
	}

	// The end each phase must reach.
	want := map[string]string{"wait": "waiting", "finishing": "failed"}[phase]
	if want == "" {
		want = "succeeded"
	}
	got := e.waitWork(w.ID, want, func(w work) bool { return w.State == want || terminal(w.State) })
	exes := e.executions(w.ID)
	last := exes[len(exes)-1]
	if got.State != want || got.BlockedReason != "" || last.State != "finished" {
		t.Fatalf("Work %s (held %q), executions %+v; want %s", got.State, got.BlockedReason, exes, want)
	}
	if n := len(marks(mark)); n != 1 {
		t.Fatalf("the job ran %d times, want once", n)
	}
	switch phase {
	case "claim_to_launch":
		if len(exes) != 2 || exes[0].Result != "cancelled" || exes[1].Result != "succeeded" {
			t.Fatalf("executions %+v: want the claim that never launched cancelled, then one run", exes)
		}
	case "created":
		// The kill may have come between the claim and the launch.
		if len(exes) > 2 || (len(exes) == 2 && exes[0].Result != "cancelled") {
			t.Fatalf("executions %+v: want one run (after a claim that never launched, if any)", exes)
		}
	case "finishing":
		if last.ExitCode != 3 {
			t.Fatalf("executions %+v: want the real status 3", exes)
		}
	case "outcome":
		if got.OutcomeMessage != "drilled" {
			t.Fatalf("Work outcome %q, want the declared one", got.OutcomeMessage)
		}
	default:
		if len(exes) != 1 {
			t.Fatalf("executions %+v: want one", exes)
		}
	}
	t.Logf("phase %s: %d execution(s), epoch %d, Work %s, %d run(s), %d events kept", phase, len(exes), last.Epoch, got.State, len(marks(mark)), len(events))
}
