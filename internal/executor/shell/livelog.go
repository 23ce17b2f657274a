package shell

import (
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// liveLogName is the file the supervisor copies a command's output into
// (see the package comment): every segment of a shell execution writes the
// same file, so the epoch does not change it.
const liveLogName = "output.log"

var _ executor.LiveLogger = (*Executor)(nil)

// LiveLog says where the command running in dir writes its output.
func (e *Executor) LiveLog(dir string, _ int64) (string, bool) {
	if dir == "" {
		return "", false
	}
	return filepath.Join(dir, liveLogName), true
}
