package statedir

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
)

// Paths of the owner's credential under the state directory.
const (
	PrivateDir     = "private"
	OwnerTokenFile = "operator.token"
)

// OwnerTokenPath is <stateDir>/private/operator.token.
func OwnerTokenPath(stateDir string) string {
	return filepath.Join(stateDir, PrivateDir, OwnerTokenFile)
}

// WriteTokenFile writes token to path atomically: a 0600 temporary file
// in the same directory, fsync, rename, and fsync of the directory.
func WriteTokenFile(path, token string) error {
	if err := atomicfile.WriteFile(path, []byte(token+"\n"), 0o600, atomicfile.TempPrefix(".token-")); err != nil {
		return fmt.Errorf("cannot write the token file %s: %w", path, err)
	}
	return nil
}

// ReadTokenFile reads a token file, trimming one trailing newline.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return string(b), nil
}

// RepairTokenFileMode takes group and other access away from the token
// file at path (mode 0600) and returns the mode it had when it was wider;
// 0 when it was already owner-only or does not exist. The daemon calls it
// on the owner's token file at start and says so: the token may have been
// read meanwhile and should be rotated.
func RepairTokenFileMode(path string) (os.FileMode, error) {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	perm := fi.Mode().Perm()
	if !fi.Mode().IsRegular() || perm&0o077 == 0 {
		return 0, nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return 0, fmt.Errorf("cannot make the token file %s owner-only (mode %04o): %w", path, perm, err)
	}
	return perm, nil
}
