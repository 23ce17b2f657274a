package daemon

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

// OSName is the name of the in-execution CLI on an execution's PATH.
const OSName = "os"

// installOS makes <state>/bin/os a copy of the daemon's own binary, which
// behaves as os when invoked under that name, and returns <state>/bin (the
// executions' ToolbeltDir, first on their PATH). A copy, not a link: the
// daemon's binary may be one `go run` built in a temporary directory that
// vanishes when it exits, while executions (and the next daemon's adopted
// ones) still run os. The copy is written only when it differs from the
// binary (anything else at the path, a symlink of an earlier release
// included, is replaced), atomically (a temporary file, mode 0755, synced
// and renamed over it), so a process that runs os during the swap finds
// either the old or the new binary, never a partial one. It reports
// whether it wrote.
func installOS(stateDir, exe string) (string, bool, error) {
	dir := filepath.Join(stateDir, BinDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", false, fmt.Errorf("cannot create %s: %w", dir, err)
	}
	if err := statedir.CheckPrivateDir(dir); err != nil {
		return "", false, err
	}
	target := filepath.Join(dir, OSName)
	want, err := digestFile(exe)
	if err != nil {
		return "", false, fmt.Errorf("cannot read the open-conduit binary to install %s: %w", target, err)
	}
	if fi, err := os.Lstat(target); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == 0o755 {
		if have, err := digestFile(target); err == nil && bytes.Equal(have, want) {
			return dir, false, nil
		}
	}
	src, err := os.Open(exe)
	if err != nil {
		return "", false, fmt.Errorf("cannot read the open-conduit binary to install %s: %w", target, err)
	}
	defer src.Close()
	if _, err := atomicfile.WriteFrom(target, src, 0o755, atomicfile.TempPrefix(".os-")); err != nil {
		return "", false, fmt.Errorf("cannot install %s from the open-conduit binary: %w", target, err)
	}
	return dir, true, nil
}

// digestFile is the SHA-256 of a file's bytes.
func digestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}
