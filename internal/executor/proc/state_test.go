package proc

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStateFilesAreOwnerOnlyAndWhole(t *testing.T) {
	dir := t.TempDir()
	if err := WriteJSONFile(dir, LaunchFile, Launch{Argv: []string{"true"}, Env: []string{"A=b"}}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, LaunchFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("launch file mode = %v, want 0600", fi.Mode().Perm())
	}
	var l Launch
	if ok, err := ReadJSONFile(dir, LaunchFile, &l); !ok || err != nil || l.Env[0] != "A=b" {
		t.Errorf("read back %+v, %v, %v", l, ok, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, StatusFile), []byte(`{"exited": true, "exit_code": 0, "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var st Status
	if _, err := ReadJSONFile(dir, StatusFile, &st); err == nil {
		t.Error("a damaged status file was read")
	}
}

func TestTheFirstStopReasonStands(t *testing.T) {
	dir := t.TempDir()
	if got := ReadStop(dir); got != "" {
		t.Fatalf("reason before any stop = %q", got)
	}
	for _, reason := range []string{"deadline", "cancel"} {
		if err := WriteStop(dir, reason); err != nil {
			t.Fatal(err)
		}
	}
	if got := ReadStop(dir); got != "deadline" {
		t.Errorf("reason = %q, want the first one, %q", got, "deadline")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// The supervisor's own files are written whole and owner-only without a
// sync; an empty one, all a crash of the machine can leave of such a file,
// reads as no file rather than as a damaged one.
func TestUnsyncedStateFilesAndTheirCrashRemains(t *testing.T) {
	dir := t.TempDir()
	if err := writeStateFile(dir, StatusFile, Status{Exited: true, ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, StatusFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("status file %v, %v; want mode 0600", fi, err)
	}
	if st, ok, err := ReadStatus(dir); !ok || err != nil || !st.Exited || st.ExitCode != 3 {
		t.Errorf("read back %+v, %v, %v", st, ok, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, StatusFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, ok, err := ReadStatus(dir); ok || err != nil {
		t.Errorf("an empty status file read as %+v, %v, %v; want none", st, ok, err)
	}
}
