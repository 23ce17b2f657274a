package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// A client command cut short by Ctrl-C exits 130, as a shell reports an
// interrupted program: here work create --wait, following a Work whose job
// runs until the test ends it.
func TestInterruptedCommandExits130(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	cmd := exec.Command(bins.openConduit, "work", "create", "--scope", "t", "--wait")
	cmd.Env = e.environ()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var w work
	until(t, "the followed Work running", func() bool {
		var p page[work]
		e.must("GET", "/v1/work?scope=t", nil, nil, &p)
		for _, x := range p.Items {
			if x.State == "running" {
				w = x
				return true
			}
		}
		return false
	})
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("work create --wait after Ctrl-C: %v, want exit 130 (stderr %q)", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "--help") {
		t.Errorf("an interrupt was reported as a usage error: %q", stderr.String())
	}
	// The Work itself goes on: Ctrl-C stops only the following.
	a.exit(0)
	if got := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the Work ended %s", got.State)
	}
}
