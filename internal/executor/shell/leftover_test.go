package shell

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/proc"
)

// What the command leaves running deeper down its tree is killed too: a
// background shell that outlives the command (an orphan the supervisor
// adopts) and its own child, which is not an orphan and so not the
// supervisor's child.
func TestLeftoversDeepInTheTreeAreKilled(t *testing.T) {
	b := setup(t)
	ready := b.fifo(t, "ready")
	script := `sh -c 'echo $$; sleep 1000 & echo $!; echo up > "$READY"; wait' & read x < "$READY"`
	res, err := b.exec.Run(context.Background(), b.request(t, Config{
		Command: []string{"sh", "-c", script}, Env: map[string]string{"READY": ready},
	}))
	if err != nil || res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	left := pids(t, readLog(t, res))
	if len(left) != 2 {
		t.Fatalf("the log names %v, want the background shell and its sleep", left)
	}
	gone(t, mustRecord(t, b.dir).PID, left...)
}

// The supervisor's files are written whole without a sync, so a crash of
// the machine can leave them empty: an empty status and record read as
// none, and such a segment is gone (its launch file deleted), never an
// error that would leave the attempt unresolved.
func TestRecoverTreatsEmptyStateFilesAsACrashsRemains(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{recordFile, proc.StatusFile, launchFile} {
		if err := os.WriteFile(filepath.Join(b.dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.exec.Recover(context.Background(), req); !errors.Is(err, executor.ErrGone) {
		t.Fatalf("Recover of empty state files = %v, want ErrGone", err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, launchFile)); !os.IsNotExist(err) {
		t.Error("the launch file was left behind")
	}
	if _, err := b.exec.Run(context.Background(), req); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("Run over a crash's remains = %v, want ErrAlreadyStarted", err)
	}
}
