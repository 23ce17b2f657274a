package config

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cmd: secret's command that moves a child out of its process group and
// session (setsid) no longer leaves it running once the secret is
// resolved: under the reaper, what the command left behind is killed and
// reaped before the resolution returns. Without the reaper (the control)
// the child outlives it.
func TestCmdSecretLeavesNothingBehindUnderTheReaper(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("setsid is missing: install util-linux")
		}
		t.Skip("setsid is missing: install util-linux to run this test")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, reaper []string) int {
		state := t.TempDir()
		pidFile := filepath.Join(state, "escaped.pid")
		r := &Resolver{StateDir: state, CommandTimeout: time.Hour, Reaper: reaper,
			LookupEnv: envOf(map[string]string{"PATH": os.Getenv("PATH")})}
		// The escaped child holds none of the command's streams, so the
		// resolution ends when the command does, reaper or not.
		ref := `cmd:setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ` + pidFile + `; echo the-secret`
		got, err := r.Resolve(context.Background(), ref)
		if err != nil || got != "the-secret" {
			t.Fatalf("Resolve = %q, %v", got, err)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	alive := func(pid int) bool {
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}

	t.Run("reaper", func(t *testing.T) {
		pid := run(t, []string{self, "reap", "--"})
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d that the command moved out of its session outlived the resolution", pid)
		}
	})
	t.Run("control without the reaper", func(t *testing.T) {
		pid := run(t, nil)
		defer syscall.Kill(pid, syscall.SIGKILL)
		if !alive(pid) {
			t.Fatalf("without the reaper process %d is gone: the test would pass vacuously", pid)
		}
	})
}

// A cmd: secret cut off by its deadline under the reaper: the reaper is
// asked to stop (never killed itself), kills the command and what it left,
// and the resolution ends with secret_timeout.
func TestCmdSecretTimeoutUnderTheReaper(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fire := make(chan time.Time, 1)
	fire <- time.Time{}
	r := &Resolver{StateDir: t.TempDir(), Reaper: []string{self, "reap", "--"},
		After:     func(time.Duration) <-chan time.Time { return fire },
		LookupEnv: envOf(map[string]string{"PATH": os.Getenv("PATH")})}
	_, err = r.Resolve(context.Background(), "cmd:sleep 300")
	var se *SecretError
	if !errors.As(err, &se) || se.Code != SecretTimeout {
		t.Fatalf("Resolve = %v, want secret_timeout", err)
	}
}
