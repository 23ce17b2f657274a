package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// DefaultListen is where the listener listens when nothing names an
// address: loopback, since a reverse proxy or tunnel fronts it.
const DefaultListen = "127.0.0.1:8787"

// Limits of the listener, whichever endpoints it serves: the largest of
// those the ingresses' own listeners applied before they shared one.
const (
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds the whole request, body included.
	readTimeout    = 60 * time.Second
	writeTimeout   = 90 * time.Second
	idleTimeout    = 60 * time.Second
	maxHeaderBytes = 64 << 10
	shutdownGrace  = 5 * time.Second
)

// Limits are the listener's connection cap and body deadline, applied as
// on the daemon's sockets.
var Limits = unixsock.Limits{MaxConns: 64, BodyTimeout: readTimeout}

// Listener is the one webhook listener. It serves the endpoints mounted
// on it, each at its path; with none mounted it does not listen.
type Listener struct {
	log *slog.Logger
	// endpoints maps a path to its endpoint; a request reads it without
	// a lock, so a stop waiting for requests in flight never waits on one.
	endpoints atomic.Pointer[map[string]*Endpoint]

	// mu orders Set and Close.
	mu     sync.Mutex
	addr   string // where it was asked to listen
	ln     net.Listener
	srv    *http.Server
	served chan struct{}
}

// NewListener makes a listener that listens nowhere yet.
func NewListener(log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Listener{log: log}
	l.endpoints.Store(&map[string]*Endpoint{})
	return l
}

// ServeHTTP hands a request to the endpoint of its path.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := (*l.endpoints.Load())[r.URL.Path]
	if e == nil {
		notFound(w)
		return
	}
	e.ServeHTTP(w, r)
}

// Set makes the listener serve exactly endpoints on addr ("" for
// DefaultListen): it starts listening when the first endpoint comes,
// listens anew when addr changes, and stops when none is left. Two
// endpoints on one path are refused (the first is kept). A listen error
// is returned and logged with the address and the system's reason only;
// the endpoints stay mounted, so the next Set tries again.
func (l *Listener) Set(addr string, endpoints []*Endpoint) error {
	if addr == "" {
		addr = DefaultListen
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	mounted := map[string]*Endpoint{}
	var errs []error
	for _, e := range endpoints {
		if _, taken := mounted[e.Path()]; taken {
			errs = append(errs, fmt.Errorf("webhook: two ingresses serve the path %s", e.Path()))
			continue
		}
		mounted[e.Path()] = e
	}
	l.endpoints.Store(&mounted)
	if len(mounted) == 0 {
		l.stopLocked()
		return errors.Join(errs...)
	}
	if l.srv != nil && l.addr == addr {
		return errors.Join(errs...)
	}
	l.stopLocked()
	if err := l.startLocked(addr); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (l *Listener) startLocked(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		l.log.Error("the webhook listener cannot listen; it tries again at the next apply", "address", addr, "error", err.Error())
		return err
	}
	srv := &http.Server{
		Handler: l, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(l.log.Handler(), slog.LevelDebug),
	}
	Limits.Apply(srv, Limits, l.log)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("the webhook listener stopped", "address", ln.Addr().String(), "error", err.Error())
		}
	}()
	l.addr, l.ln, l.srv, l.served = addr, ln, srv, served
	var paths []string
	for p := range *l.endpoints.Load() {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	l.log.Info("webhook listener listening", "address", ln.Addr().String(), "paths", strings.Join(paths, " "))
	return nil
}

// stopLocked ends the server, answering the deliveries in flight first
// (their endpoints' workers still accept) within a grace.
func (l *Listener) stopLocked() {
	if l.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	if l.srv.Shutdown(ctx) != nil {
		l.srv.Close()
	}
	cancel()
	<-l.served
	l.log.Info("webhook listener stopped", "address", l.ln.Addr().String())
	l.addr, l.ln, l.srv, l.served = "", nil, nil, nil
}

// Close stops listening and unmounts every endpoint.
func (l *Listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endpoints.Store(&map[string]*Endpoint{})
	l.stopLocked()
	return nil
}

// Addr is where the listener listens, nil when it does not.
func (l *Listener) Addr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		return nil
	}
	return l.ln.Addr()
}
