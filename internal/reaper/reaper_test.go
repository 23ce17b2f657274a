package reaper

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Run passes the command's status on, as a shell would.
func TestRunReportsTheCommandsStatus(t *testing.T) {
	for script, want := range map[string]int{"exit 0": 0, "exit 3": 3, "kill -9 $$": 128 + 9} {
		got, err := Run([]string{"/bin/sh", "-c", script})
		if err != nil || got != want {
			t.Errorf("Run(%q) = %d, %v; want %d", script, got, err, want)
		}
	}
	if _, err := Run(nil); err == nil {
		t.Error("Run with no command succeeded")
	}
}

// What the command leaves behind, in its group or moved out of its
// session, is killed and reaped before Run returns: no process and no
// zombie of it is left.
func TestRunLeavesNothingBehind(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("setsid is missing: install util-linux")
		}
		t.Skip("setsid is missing: install util-linux to run this test")
	}
	dir := t.TempDir()
	script := `sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ` + filepath.Join(dir, "group") + `
setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > ` + filepath.Join(dir, "session")
	if code, err := Run([]string{"/bin/sh", "-c", script}); err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	for _, name := range []string{"group", "session"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the process left in the command's %s (%d) is still there: %v", name, pid, err)
		}
	}
}
