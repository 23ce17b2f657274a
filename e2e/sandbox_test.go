package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needBwrap skips a test that needs a working bwrap, and fails it under CI.
func needBwrap(t *testing.T) {
	t.Helper()
	err := exec.Command("bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL", "--", "true").Run()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs a working bwrap: %v", err)
		}
		t.Skipf("needs bwrap (apt-get install bubblewrap): %v", err)
	}
}

// sandboxScript is agentScript with its control directory in the
// execution's own work directory: the only writable place a sandboxed job
// shares with the test.
var sandboxScript = strings.Replace(agentScript, `d="$CTL/$OPEN_CONDUIT_EXECUTION_ID"`, `d="$PWD/$OPEN_CONDUIT_EXECUTION_ID"`, 1)

func (e *env) writeSandboxConfig() {
	e.t.Helper()
	cfg := map[string]any{
		"version": 1,
		"scopes": map[string]any{
			"t": map[string]any{
				"authorization": map[string]any{"operations": agentOps, "reads": []string{"work", "events"}},
				"bindings": map[string]any{"agent": map[string]any{
					"executor":   "shell",
					"config":     map[string]any{"command": []string{"sh", "-c", sandboxScript}, "sandbox": map[string]any{"enabled": true}},
					"operations": agentOps,
				}},
			},
		},
	}
	b, _ := json.Marshal(cfg)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// sandboxedAgent waits for the sandboxed job of execution exe.
func (e *env) sandboxedAgent(exe string) *agent {
	return agentOf(e.t, filepath.Join(e.state, "executions", exe, "work"), exe)
}

// A sandboxed shell job under the real daemon: it writes its workspace and
// not the system, sees nothing of the state directory, the management
// socket, the operator token or another execution's run directory, emits
// through its mounted toolbelt socket, and after kill -9 of the daemon and
// a new start, is adopted and reaches the toolbelt with the rotated token
// through the same mount.
func TestSandboxedShellJob(t *testing.T) {
	needBwrap(t)
	e := newEnv(t)
	e.writeSandboxConfig()
	first := e.start()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	other := e.createWork("t")
	y := e.runningExecution(other.ID)
	a := e.sandboxedAgent(x.ID)
	e.sandboxedAgent(y.ID).exit(0)

	a.mustSh(`echo hi > "$PWD/written"`)
	if b, err := os.ReadFile(filepath.Join(e.state, "executions", x.ID, "work", "written")); err != nil || string(b) != "hi\n" {
		t.Fatalf("the workspace write: %q %v", b, err)
	}
	for _, p := range []string{"/usr/e2e", "/etc/e2e", "/bin/e2e"} {
		if code, _, _ := a.sh("touch " + p); code == 0 {
			t.Errorf("the job could write %s", p)
		}
	}
	for _, p := range []string{e.state, e.socket(), e.tokenFile(), filepath.Join(e.state, "config.json"), e.runDir(y.ID), e.runDir(x.ID), filepath.Join(e.state, "executions", y.ID)} {
		if code, _, _ := a.sh("test -e '" + p + "' || test -e '" + p + "/.'"); code == 0 && p != e.state {
			t.Errorf("the job sees %s", p)
		}
	}
	// The state directory's own path exists (the workspace is mounted at
	// its path), but holds nothing but the way to it.
	if out := a.mustSh("ls -A '" + e.state + "'"); strings.TrimSpace(out) != "executions" {
		t.Errorf("the state directory seen from inside holds %q", out)
	}
	if out := a.mustSh("ls -A /run/open-conduit/run /run/open-conduit/run/token"); strings.Contains(out, y.ID) {
		t.Errorf("the run directory seen from inside: %q", out)
	}
	if out := a.mustSh(`echo "$OS_ENDPOINT $OS_TOKEN_FILE"`); strings.TrimSpace(out) != "/run/open-conduit/run/toolbelt.sock /run/open-conduit/run/token/token" {
		t.Errorf("the toolbelt inside is %q", out)
	}
	before := strings.TrimSpace(a.mustSh("os emit e2e.sandboxed"))
	if ev := e.event(before); ev.Execution != x.ID || ev.Type != "e2e.sandboxed" {
		t.Fatalf("the sandboxed job's Event %+v", ev)
	}

	oldToken := e.execToken(x.ID)
	first.kill()
	e.start()
	until(t, "the sandboxed attempt's adoption", func() bool {
		exes := e.executions(w.ID)
		return len(exes) == 1 && exes[0].Epoch == 2 && exes[0].State == "running"
	})
	newToken := e.untilServedAgain(x.ID, oldToken)
	if got := strings.TrimSpace(a.mustSh(`cat "$OS_TOKEN_FILE"`)); got != newToken || got == oldToken {
		t.Fatalf("the token seen through the mount is not the rotated one")
	}
	after := strings.TrimSpace(a.mustSh("os emit e2e.adopted"))
	if ev := e.event(after); ev.Execution != x.ID || ev.Type != "e2e.adopted" {
		t.Fatalf("the adopted job's Event %+v", ev)
	}
	a.exit(0)
	if w := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("the sandboxed Work ended %s", w.State)
	}
}

// Without bwrap the daemon says so at start, naming the package, and a
// sandboxed binding's Work is held as sandbox_unavailable: nothing runs
// unsandboxed.
func TestSandboxUnavailableHoldsTheWork(t *testing.T) {
	e := newEnv(t)
	e.writeSandboxConfig()
	// A PATH without bwrap (nor anything else: nothing is to be run).
	e.start("PATH=" + t.TempDir())
	if logs := e.allLogs(); !strings.Contains(logs, "sandboxed executions cannot run") || !strings.Contains(logs, "bubblewrap") {
		t.Fatalf("the daemon did not warn about bwrap:\n%s", logs)
	}
	w := e.createWork("t")
	held := e.waitWork(w.ID, "held", func(w work) bool { return w.BlockedReason != "" })
	if held.BlockedReason != "sandbox_unavailable" || !strings.Contains(held.BlockedDetail, "bubblewrap") || held.State != "ready" {
		t.Fatalf("Work = %+v, want held sandbox_unavailable naming bubblewrap", held)
	}
	for _, x := range e.executions(w.ID) {
		if _, err := os.Stat(filepath.Join(e.state, "executions", x.ID, "supervisor.json")); err == nil {
			t.Fatalf("execution %s was started", x.ID)
		}
	}
}
