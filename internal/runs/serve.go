package runs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// server is one execution's socket being served.
type server struct {
	ep      Endpoint
	path    string // the socket served: ep.Socket or ep.Egress
	inode   uint64 // of the socket file as bound
	srv     *http.Server
	handler atomic.Pointer[http.Handler]
	done    chan struct{}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.handler.Load()).ServeHTTP(w, r)
}

// bound reports whether the socket file is still the one this server bound.
func (s *server) bound() bool {
	return s.inode != 0 && inodeOf(s.path) == s.inode
}

// inodeOf returns the inode of the socket at path, or 0.
func inodeOf(path string) uint64 {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != fs.ModeSocket {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

type ctxKey struct{}

// ExecutionFromContext returns the execution whose socket a request arrived
// on. Serve puts it on every request's context, so one handler can serve
// every socket and still assert the socket's execution.
func ExecutionFromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(ctxKey{}).(string)
	return id, ok
}

// Serve starts serving h on the execution's socket ep.Socket, which must be
// the socket Prepare chose for executionID. It returns once the socket
// listens (mode 0600) and keeps serving in the background until Close,
// CloseAll or Remove. A stale socket file the host owns is removed first; a
// path that is something else, or that another process still answers on, is
// refused. Serving an execution that is already served on the same socket
// swaps in h and keeps the socket; on another socket, the old one is closed
// first.
func (d *Dirs) Serve(executionID string, ep Endpoint, h http.Handler) error {
	if err := checkExecutionID(executionID); err != nil {
		return err
	}
	if h == nil {
		return errors.New("runs: Serve needs a handler")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkEndpoint(executionID, ep); err != nil {
		return err
	}
	return d.serveLocked(d.served, executionID, ep, ep.Socket, h, unixsock.ToolbeltLimits)
}

// ServeEgress starts serving h, the egress proxy, on the execution's
// egress socket ep.Egress (0600, beside its toolbelt socket), like Serve:
// Close, CloseAll, Remove and Sweep stop it with the toolbelt socket.
func (d *Dirs) ServeEgress(executionID string, ep Endpoint, h http.Handler) error {
	if err := checkExecutionID(executionID); err != nil {
		return err
	}
	if h == nil {
		return errors.New("runs: ServeEgress needs a handler")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkEndpoint(executionID, ep); err != nil {
		return err
	}
	if want := filepath.Join(filepath.Dir(ep.Socket), egressName); ep.Egress != want {
		return fmt.Errorf("runs: %s is not the egress socket of execution %s; serve the endpoint Prepare returned", ep.Egress, executionID)
	}
	return d.serveLocked(d.egress, executionID, ep, ep.Egress, h, unixsock.ToolbeltLimits)
}

// checkEndpoint checks that ep is the endpoint Prepare chose for
// executionID.
func (d *Dirs) checkEndpoint(executionID string, ep Endpoint) error {
	want := d.endpoint(executionID)
	socket, err := d.socketPath(Key(executionID), false)
	if err != nil {
		return err
	}
	if ep.Socket != socket || ep.Dir != want.Dir {
		return fmt.Errorf("runs: %s is not the toolbelt socket of execution %s; serve the endpoint Prepare returned", ep.Socket, executionID)
	}
	return nil
}

// serveLocked serves h on path for the execution, kept in m.
func (d *Dirs) serveLocked(m map[string]*server, executionID string, ep Endpoint, path string, h http.Handler, def unixsock.Limits) error {
	if s, ok := m[executionID]; ok {
		if s.path == path && s.bound() {
			s.handler.Store(&h)
			return nil
		}
		// Another socket, or ours was removed from under us: bind afresh.
		closeServer(m, executionID)
	}
	if err := checkPrivateDir(filepath.Dir(path), d.uid, false); err != nil {
		return fmt.Errorf("%w: %w; prepare the run directory first", ErrEndpointUnavailable, err)
	}
	if err := d.removeStale(path); err != nil {
		return err
	}
	ln, err := listen(path)
	if err != nil {
		return fmt.Errorf("runs: listen on %s: %w", path, err)
	}
	s := &server{ep: ep, path: path, done: make(chan struct{}), inode: inodeOf(path)}
	s.handler.Store(&h)
	s.srv = &http.Server{
		Handler:                      s,
		ReadHeaderTimeout:            30 * time.Second,
		IdleTimeout:                  2 * time.Minute,
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     d.errorLog(),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, ctxKey{}, executionID)
		},
	}
	// Each execution's socket has its own limits, so one execution's
	// connections never take another's.
	d.limits.Apply(s.srv, def, d.logger)
	m[executionID] = s
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return nil
}

// Serving reports whether the execution's socket is being served.
func (d *Dirs) Serving(executionID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.served[executionID]
	return ok
}

// Close stops serving the execution's socket and removes the socket file;
// the run directory stays. Closing an execution that is not served does
// nothing.
func (d *Dirs) Close(executionID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked(executionID)
}

// CloseAll stops serving every socket and keeps every run directory, as the
// daemon does on shutdown: the next daemon serves a socket again when it
// adopts the attempt.
func (d *Dirs) CloseAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.served {
		d.closeLocked(id)
	}
	for id := range d.egress {
		d.closeLocked(id)
	}
}

// closeLocked closes an execution's served sockets (toolbelt and egress)
// and waits for their accept loops to end. Requests in flight lose their
// connections; a client retries with the same request ID. Connections a
// handler hijacked (the egress proxy's tunnels) are the handler's to close.
func (d *Dirs) closeLocked(executionID string) {
	closeServer(d.served, executionID)
	closeServer(d.egress, executionID)
}

func closeServer(m map[string]*server, executionID string) {
	s, ok := m[executionID]
	if !ok {
		return
	}
	delete(m, executionID)
	_ = s.srv.Close()
	<-s.done
	// Remove the socket file, unless it is no longer the one bound here.
	if s.bound() {
		_ = os.Remove(s.path)
	}
}

func (d *Dirs) errorLog() *log.Logger {
	return slog.NewLogLogger(d.logger.Handler(), slog.LevelWarn)
}

// removeStale clears the way for a new socket at path: nothing there is
// fine; a socket the host owns that nobody answers on is removed; anything
// else is refused.
func (d *Dirs) removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s exists and is not a socket; remove it", ErrEndpointUnavailable, path)
	}
	if owner, ok := ownerOf(fi); !ok || owner != d.uid {
		return fmt.Errorf("%w: the socket %s is owned by another user; remove it", ErrEndpointUnavailable, path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("%w: another process is serving %s; stop it (is a second daemon using this state directory?)", ErrEndpointUnavailable, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// listen binds a Unix socket at path, owner-only from the start. The
// listener does not unlink on close: closeLocked removes the file itself,
// and only while it is still the socket bound here.
func listen(path string) (net.Listener, error) {
	return unixsock.Bind(path)
}
