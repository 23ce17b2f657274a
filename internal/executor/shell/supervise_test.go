package shell

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
	if err := writeJSONFile(dir, launchFile, launch{Argv: []string{"true"}, Env: []string{"GH_TOKEN=s3cret"}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, recordFile), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "supervise", dir)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the supervisor without a record: %v (%s); want it to exit non-zero", err, out)
	}
	if _, err := os.Lstat(filepath.Join(dir, launchFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the launch file with the command's secrets is still there after the supervisor gave up (%v)", err)
	}
}
