package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"

	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// MaxSocketPath is the longest socket path Listen accepts, in bytes. macOS
// limits a Unix socket path to 104 bytes and Linux to 108; 100 leaves room.
const MaxSocketPath = 100

// SocketName is the management socket's name inside the state directory.
const SocketName = "management.sock"

// Listen opens the management socket at path. The caller must hold the
// state directory's lock: only then is a socket left at path stale (its
// daemon is gone), and Listen removes it, but only after checking that it
// is a socket owned by the effective user. The socket is created under a
// umask of 0077, so it is never reachable by another user, and then set
// to mode 0600. Paths longer than MaxSocketPath bytes are refused.
func Listen(path string, lock *Lock) (*net.UnixListener, error) {
	if !lock.Held() {
		return nil, errors.New("statedir: Listen needs the state directory's lock; acquire it first")
	}
	if err := CheckSocketPath(path); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	l, err := unixsock.Bind(path)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(true)
	return l, nil
}

// CheckSocketPath refuses a socket path longer than MaxSocketPath bytes.
// The daemon checks its management socket's path with it before it
// creates anything, so that a state directory too deep for the socket is
// refused with nothing left behind.
func CheckSocketPath(path string) error {
	if len(path) > MaxSocketPath {
		return fmt.Errorf("socket path %s is %d bytes, longer than the %d a Unix socket allows; use a shorter state directory (--state DIR)", path, len(path), MaxSocketPath)
	}
	return nil
}

// removeStaleSocket removes a socket left at path by an earlier daemon.
// Anything else at path (a file, a directory, another user's socket) is
// refused rather than removed.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot inspect %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket; move it away and start again", path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket %s belongs to another user; refusing to remove it (use a state directory you own)", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("cannot remove stale socket %s: %w", path, err)
	}
	return nil
}
