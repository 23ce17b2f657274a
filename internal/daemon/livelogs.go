package daemon

import (
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// liveLogs adapts the daemon's executors to management.LiveLogs: an
// execution's directory is <state>/executions/<id>/, the one the
// scheduler hands its segments, and the executor that runs it says where
// in there its live log is.
type liveLogs struct {
	dir       string
	executors map[string]executor.Executor
	// more are the installed packages' executors.
	more func(name string) executor.Executor
}

func (l liveLogs) LiveLog(e storage.Execution) (string, bool) {
	ex, found := l.executors[e.Executor]
	if !found && l.more != nil {
		ex = l.more(e.Executor)
	}
	ll, ok := ex.(executor.LiveLogger)
	if !ok || e.ID == "" || filepath.Base(e.ID) != e.ID {
		return "", false
	}
	return ll.LiveLog(filepath.Join(l.dir, e.ID), e.Epoch)
}
