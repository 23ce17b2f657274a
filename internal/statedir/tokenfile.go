package statedir

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return fmt.Errorf("cannot write token file in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("cannot set mode 0600 on %s: %w", tmp, err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cannot sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cannot replace %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", dir, err)
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
