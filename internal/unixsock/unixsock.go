// Package unixsock binds the daemon's Unix sockets (the management socket
// and every execution's toolbelt socket) so that none is ever reachable by
// another user, not even for the moment between bind and chmod, and holds
// the limits every socket's HTTP server applies (Limits: connections held
// at once, the time a request body may take).
//
// It must never widen a socket's mode, and it is the only place in the
// daemon that changes the process-wide umask, so that two binds can never
// interleave their umask changes.
package unixsock

import (
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// umaskMu serialises every umask change of the process.
var umaskMu sync.Mutex

// Bind listens on a Unix socket at path with mode 0600. The bind runs under
// umask 077 (not 177: the umask is process-wide, and a directory another
// goroutine creates in that moment must stay usable by its owner), then the
// socket is set to 0600. The listener unlinks the socket when closed only if
// the caller says so with SetUnlinkOnClose.
func Bind(path string) (*net.UnixListener, error) {
	umaskMu.Lock()
	old := syscall.Umask(0o077)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("set mode 0600 on the socket: %w", err)
	}
	return ln, nil
}
