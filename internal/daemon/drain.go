package daemon

import (
	"context"
	"net/http"
	"sync"
)

// inflight counts the requests being served on the management socket and
// on every execution's toolbelt socket, so that shutdown closes storage
// only after the last of them has returned: a call cut off by its socket's
// close still writes its call record (and a retry with the same request ID
// replays it).
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0 while someone waits
}

func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer f.done()
		h.ServeHTTP(w, r)
	})
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// wait blocks until no request is in flight or ctx ends; it reports how
// many were in flight when it began and whether they all returned.
func (f *inflight) wait(ctx context.Context) (int, bool) {
	f.mu.Lock()
	n := f.n
	if n == 0 {
		f.mu.Unlock()
		return 0, true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return n, true
	case <-ctx.Done():
		return n, false
	}
}

// drain waits, bounded by shutdownGrace, for the requests still in flight
// once the sockets are closed, before storage closes.
func (d *Daemon) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if d.opts.draining != nil {
		d.opts.draining()
	}
	n, ok := d.calls.wait(ctx)
	switch {
	case !ok:
		d.log.Warn("requests still in flight at shutdown; storage closes under them", "in_flight", n, "waited", shutdownGrace)
	case n > 0:
		d.log.Info("requests in flight at shutdown drained", "in_flight", n)
	}
	return nil
}
