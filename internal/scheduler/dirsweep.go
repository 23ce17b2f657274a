package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// KeepEndedDirs is how long the directory of an execution is kept after
// it finished (its last update), for an operator to look into: its
// supervisor record, status, raw output and working directory.
const KeepEndedDirs = 24 * time.Hour

// maxDirSweep bounds the directories one sweep removes, so that a state
// directory holding many (those an earlier version never removed) is
// drained over several passes instead of holding up one, the start-up
// sweep before the daemon is ready among them.
var maxDirSweep = 1000

// SweepExecutionDirs removes the directories under ExecutionsDir of
// executions that finished at least KeepEndedDirs ago, at most
// maxDirSweep a pass. It keeps the directory of a live execution, of one
// whose record cannot be read now, and of an attempt this node launched
// that another node recovered as lost (the start-up stop of what is left
// of it finds it by its directory, see stopLostElsewhere; such a
// directory is removed by hand). A directory that names no execution the
// store knows is removed once it is KeepEndedDirs old. Entries that are
// not execution directories are left alone. It returns how many it
// removed.
//
// A directory whose entries changed less than KeepEndedDirs ago (by its
// modification time) is kept without reading its execution. A segment's
// last change to its directory comes before its execution finishes, so
// such an execution finished less than KeepEndedDirs ago, if at all; a
// directory something changed later still (a process that outlived a
// lost attempt, say) is only kept longer. Each pass reads only the
// executions of directories older than that.
//
// What an ended execution produced that outlives it is kept elsewhere
// already: its output and files as artifacts, its record in storage.
func (s *Scheduler) SweepExecutionDirs(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(s.o.ExecutionsDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := s.now()
	removed := 0
	var errs []error
	for _, en := range entries {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		if removed >= maxDirSweep {
			break
		}
		id := en.Name()
		if !en.IsDir() || !ids.HasPrefix(id, ids.Execution) {
			continue
		}
		if fi, err := en.Info(); err != nil || now.Sub(fi.ModTime()) < KeepEndedDirs {
			continue
		}
		exe, err := s.store.GetExecution(ctx, id)
		remove := false
		switch {
		case storage.IsNotFound(err):
			remove = true
		case err != nil:
			// Kept until it can be judged.
		case exe.Live():
		case lostElsewhereAfterLaunch(exe):
			// Its process may still run here: the start-up stop
			// finds it by this directory.
		default:
			remove = !now.Before(exe.UpdatedAt.Add(KeepEndedDirs))
		}
		if !remove {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.o.ExecutionsDir, id)); err != nil {
			errs = append(errs, fmt.Errorf("cannot remove the directory of execution %s: %w", id, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
