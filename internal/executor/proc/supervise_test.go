package proc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSupervisorDeletesTheLaunchFileWhenItCannotRecordItself runs the real
// supervisor (this test binary, as TestMain arranges) on a directory where
// it cannot write its record: supervisor.json is a directory. It gives up,
// but the launch file, which holds the command's secrets, must not outlive
// it.
func TestSupervisorDeletesTheLaunchFileWhenItCannotRecordItself(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteJSONFile(dir, LaunchFile, Launch{Argv: []string{"true"}, Env: []string{"GH_TOKEN=s3cret"}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, RecordFile), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "supervise", dir)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the supervisor without a record: %v (%s); want it to exit non-zero", err, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, LaunchFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the launch file with the command's secrets is still there after the supervisor gave up (%v)", err)
	}
}

func TestSupervisorDoesNotStartAStoppedCommand(t *testing.T) {
	// A supervisor that gets SIGTERM before it starts the command (Stop
	// raced Run) records that instead of starting it. Driven in process:
	// the signal is already waiting on the channel.
	dir := t.TempDir()
	stopped := make(chan os.Signal, 1)
	stopped <- unix.SIGTERM
	st := superviseCommand(dir, Launch{Argv: []string{"true"}, Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: dir}, stopped)
	if st.Exited || !strings.Contains(st.StartError, "stopped before it started") {
		t.Errorf("status = %+v", st)
	}
}
