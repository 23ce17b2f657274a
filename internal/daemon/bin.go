package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

// OSName is the name of the in-execution CLI on an execution's PATH.
const OSName = "os"

// linkOS makes <state>/bin/os a symlink to the daemon's own binary, which
// behaves as os when invoked under that name, and returns <state>/bin (the
// executions' ToolbeltDir, first on their PATH). The link is replaced
// atomically (a temporary symlink renamed over it) at every start, so a
// process that runs os during the swap finds either the old or the new
// binary, never nothing.
func linkOS(stateDir, exe string) (string, error) {
	dir := filepath.Join(stateDir, BinDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("cannot create %s: %w", dir, err)
	}
	if err := statedir.CheckPrivateDir(dir); err != nil {
		return "", err
	}
	if err := atomicfile.Symlink(exe, filepath.Join(dir, OSName), atomicfile.TempPrefix(".os-")); err != nil {
		return "", fmt.Errorf("cannot link %s to the open-conduit binary: %w", filepath.Join(dir, OSName), err)
	}
	return dir, nil
}
