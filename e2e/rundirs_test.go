package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The run directories of a live execution are owner-only; what cannot
// belong to a live execution (an unknown execution's directory, one a
// crashed Prepare left without its execution file, a stray file) is
// removed when the daemon starts, and so is the run directory of an
// attempt whose process ended while no daemon was running.
func TestRunDirectoriesOfUnknownAndEndedExecutionsGo(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	runs := filepath.Join(e.state, "runs")
	unknown := filepath.Join(runs, runKey("exe_nobody"))
	crashed := filepath.Join(runs, runKey("exe_crashed"))
	stray := filepath.Join(runs, "stray")
	for _, dir := range []string{unknown, filepath.Join(crashed, "token")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for path, content := range map[string]string{filepath.Join(unknown, "execution"): "exe_nobody\n", stray: "x"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	first := e.start()
	// The daemon sweeps them as it starts serving.
	for _, p := range []string{unknown, crashed, stray} {
		until(t, p+" going", func() bool {
			_, err := os.Lstat(p)
			return os.IsNotExist(err)
		})
	}

	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	dir := e.runDir(x.ID)
	for path, want := range map[string]os.FileMode{
		runs: 0o700, dir: 0o700, filepath.Join(dir, "token"): 0o700,
		e.execTokenFile(x.ID): 0o600, filepath.Join(dir, "execution"): 0o600, e.execSocket(x.ID): 0o600,
	} {
		if got := perm(t, path); got != want {
			t.Errorf("%s has mode %04o, want %04o", path, got, want)
		}
	}
	pidText, err := os.ReadFile(filepath.Join(a.dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}

	// The daemon dies; the process ends while nobody watches.
	first.kill()
	a.exit(0)
	until(t, "the job ending", func() bool { return !alive(pid) })
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the run directory went without a daemon: %v", err)
	}
	e.start()
	if w := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("Work ended %s, want the status the process left", w.State)
	}
	until(t, "the ended execution's run directory going", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}

// With a state directory long enough that <state>/runs/<key>/toolbelt.sock
// would pass 100 bytes (while management.sock still fits), the execution's
// socket is served from /tmp/open-conduit-<uid>/<key>/, owner-only, the
// token stays in the run directory, the shell process reaches its toolbelt
// there, and the fallback directory goes with the attempt.
func TestToolbeltSocketFallsBackToAShortPath(t *testing.T) {
	e := newEnv(t)
	e.state = filepath.Join(e.root, strings.Repeat("s", 80-len(e.root)-1))
	if n := len(filepath.Join(e.state, "management.sock")); n > 100 {
		t.Fatalf("the management socket path is %d bytes", n)
	}
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	if n := len(e.execSocket(x.ID)); n <= 100 {
		t.Fatalf("the socket under the state directory would be %d bytes; the test needs more than 100", n)
	}
	base := "/tmp/open-conduit-" + strconv.Itoa(os.Getuid())
	fallback := filepath.Join(base, runKey(x.ID))
	socket := filepath.Join(fallback, "toolbelt.sock")
	if got := a.mustSh(`printf %s "$OS_ENDPOINT"`); got != socket {
		t.Fatalf("OS_ENDPOINT is %q, want the fallback %s", got, socket)
	}
	if got := a.mustSh(`printf %s "$OS_TOKEN_FILE"`); got != e.execTokenFile(x.ID) {
		t.Fatalf("OS_TOKEN_FILE is %q, want the run directory's %s", got, e.execTokenFile(x.ID))
	}
	for path, want := range map[string]os.FileMode{base: 0o700, fallback: 0o700, socket: 0o600} {
		if got := perm(t, path); got != want {
			t.Errorf("%s has mode %04o, want %04o", path, got, want)
		}
	}
	if _, err := os.Lstat(e.execSocket(x.ID)); !os.IsNotExist(err) {
		t.Errorf("a socket is also in the run directory (%v)", err)
	}
	if out := a.mustSh("os call read_context"); !strings.Contains(out, w.ID) {
		t.Fatalf("read_context through the fallback socket: %q", out)
	}
	a.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
	until(t, "the fallback socket directory going", func() bool {
		_, err := os.Stat(fallback)
		return os.IsNotExist(err)
	})
}
