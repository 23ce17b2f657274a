package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

// The kill drill: kill -9 the daemon while a shell process runs; the next
// daemon adopts the process, which keeps running; its socket is served
// again with a rotated token and the old token is refused; its real exit
// status is recorded when it ends; nothing is lost or run twice; and its
// run directory goes once the attempt ended.
func TestKillDrill(t *testing.T) {
	e := newEnv(t)
	fifo, mark := e.fifoJob("", "")
	first := e.start()
	w := e.createWork("t")
	pid := waitStarted(t, mark, 1)
	until(t, "the job reading its context through os", func() bool {
		b, _ := os.ReadFile(mark)
		return strings.Contains(string(b), "context read")
	})
	exes := e.executions(w.ID)
	if len(exes) != 1 || exes[0].Epoch != 1 {
		t.Fatalf("executions %+v, want one at epoch 1", exes)
	}
	exe := exes[0]
	runDir := filepath.Join(e.state, "runs", runKey(exe.ID))
	socket := filepath.Join(runDir, "toolbelt.sock")
	tokenFile := filepath.Join(runDir, "token", "token")
	oldToken, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(runDir, "execution")); strings.TrimSpace(string(b)) != exe.ID {
		t.Fatalf("run directory names %q, want %s", b, exe.ID)
	}

	first.kill()
	if !alive(pid) {
		t.Fatal("the job died with the daemon")
	}

	e.start()
	var adopted execution
	until(t, "the execution's adoption", func() bool {
		exes := e.executions(w.ID)
		if len(exes) == 1 && exes[0].Epoch == 2 && exes[0].Owner != exe.Owner && exes[0].State == "running" {
			adopted = exes[0]
			return true
		}
		return false
	})
	if !alive(pid) {
		t.Fatal("the adopted job is not running")
	}
	e.untilServedAgain(exe.ID, strings.TrimSpace(string(oldToken)))
	newToken, err := os.ReadFile(tokenFile)
	if err != nil || string(newToken) == string(oldToken) {
		t.Fatalf("the token was not rotated (%v)", err)
	}
	// The socket is served again: the current token works, the old one is
	// refused; both through the real os binary.
	osEnv := []string{"OS_ENDPOINT=" + socket, "OS_TOKEN_FILE=" + tokenFile}
	code, out, stderr := e.run(bins.os, osEnv, "call", "read_context")
	if code != 0 || !strings.Contains(out, w.ID) {
		t.Fatalf("os call read_context with the rotated token: exit %d %q %q", code, out, stderr)
	}
	oldFile := filepath.Join(e.root, "old.token")
	if err := os.WriteFile(oldFile, oldToken, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = e.run(bins.os, []string{"OS_ENDPOINT=" + socket, "OS_TOKEN_FILE=" + oldFile}, "call", "read_context")
	if code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("os with the old token: exit %d %q, want 1 forbidden", code, stderr)
	}

	release(t, fifo, 7)
	w = e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
	exes = e.executions(w.ID)
	if w.State != "failed" || len(exes) != 1 || exes[0].ID != adopted.ID || exes[0].ExitCode != 7 || exes[0].Result != "failed" {
		t.Fatalf("Work %s, executions %+v; want failed with the real status 7 of the one execution", w.State, exes)
	}
	if n := len(marks(mark)); n != 1 {
		t.Fatalf("the job ran %d times, want once", n)
	}
	arts := e.artifacts(adopted.ID)
	if len(arts) != 1 {
		t.Fatalf("artifacts %+v, want the log", arts)
	}
	log := e.must("GET", "/v1/artifacts/"+client.PathEscape(arts[0].ID)+"/content", nil, nil, nil)
	if !strings.Contains(string(log.Body), "released with 7") {
		t.Errorf("log %q misses the adopted process's output", log.Body)
	}
	until(t, "the ended execution's run directory going", func() bool {
		_, err := os.Stat(runDir)
		return os.IsNotExist(err)
	})
}
