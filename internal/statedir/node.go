package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
)

// NodeFile holds the state directory's node id: <stateDir>/node-id, 0600.
// It is made once, the first time a daemon starts on the directory, and
// never changed: every daemon that runs on this state directory, one
// after the other, is the same node, and on a shared store the executions
// it launches record it.
const NodeFile = "node-id"

// maxNodeID bounds a node id read back from the file.
const maxNodeID = 64

// NodePath is <stateDir>/node-id.
func NodePath(stateDir string) string { return filepath.Join(stateDir, NodeFile) }

// NodeID returns the state directory's node id, making it with fresh the
// first time (the first writer wins, so two makers agree on one). Only
// the holder of the directory's lock should make it. A file that is not
// a node id is refused: the directory was tampered with or damaged, and a
// new id would orphan every execution the old one launched.
func NodeID(stateDir string, fresh func() string) (string, error) {
	path := NodePath(stateDir)
	if err := atomicfile.WriteNew(path, []byte(fresh()+"\n"), 0o600, atomicfile.TempPrefix(".node-")); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("cannot write the node id file %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the node id file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("the node id file %s is not a regular file", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read the node id file %s: %w", path, err)
	}
	id := strings.TrimSuffix(string(b), "\n")
	if !validNodeID(id) {
		return "", fmt.Errorf("the node id file %s does not hold a node id; restore it from a backup of this state directory", path)
	}
	return id, nil
}

func validNodeID(id string) bool {
	if id == "" || len(id) > maxNodeID {
		return false
	}
	for _, r := range id {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
