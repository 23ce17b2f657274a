// Package unixhttp is the one HTTP transport of Open Conduit's clients
// (client, over the management socket, and osclient, over an execution's
// toolbelt socket): HTTP/1.1 to one Unix socket path, addressed as
// http://localhost, with a small pool of idle connections.
//
// It must never dial anything but the socket path it was given, whatever
// host a request names; never consult a proxy (HTTP_PROXY and the like
// are ignored); and never follow a redirect.
package unixhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Bounds of the connection pool: a client keeps at most maxIdleConns idle
// connections to its socket, each for at most idleConnTimeout.
const (
	maxIdleConns    = 4
	idleConnTimeout = 30 * time.Second
)

// Options are what the two clients do differently.
type Options struct {
	// DialError, when set, wraps a failure to connect to the socket (the
	// client's own "cannot reach" error); when nil the dialer's error is
	// returned as it is.
	DialError func(error) error
	// RedirectError, when set, is the error a redirect fails the request
	// with; when nil the redirect response itself is returned to the
	// caller. Either way no redirect is followed.
	RedirectError error
	// DialRetry, when positive, is how long a connection refused, or a
	// socket that is not there, is dialled again (with a backoff from
	// 50 ms doubling to 1 s) before the failure is returned: a daemon that
	// restarts binds its sockets again within it. Nothing was sent on a
	// connection that never opened, so any request may be retried so.
	DialRetry time.Duration
	// Now and Wait are the clock and the pause behind DialRetry (the
	// system's when nil); Wait returns early with ctx's error.
	Now  func() time.Time
	Wait func(ctx context.Context, d time.Duration) error
}

// Backoff of DialRetry.
const (
	firstDialBackoff = 50 * time.Millisecond
	maxDialBackoff   = time.Second
)

// New returns an HTTP client whose every request goes over the Unix
// socket at socketPath. Callers address requests to http://localhost: the
// host names no machine, since the socket is dialed whatever it says.
func New(socketPath string, opts Options) *http.Client {
	return &http.Client{
		Transport: transport(socketPath, opts),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			if opts.RedirectError != nil {
				return opts.RedirectError
			}
			return http.ErrUseLastResponse
		},
	}
}

// transport returns the transport of New: it dials socketPath for every
// connection (again while opts.DialRetry allows), consults no proxy, speaks
// HTTP/1.1 only, asks for no compression and keeps a bounded idle pool.
// opts.DialError, when set, wraps a failure to connect.
func transport(socketPath string, opts Options) *http.Transport {
	now, wait := opts.Now, opts.Wait
	if now == nil {
		now = time.Now
	}
	if wait == nil {
		wait = pause
	}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			end := now().Add(opts.DialRetry)
			backoff := firstDialBackoff
			for {
				conn, err := d.DialContext(ctx, "unix", socketPath)
				if err == nil {
					return conn, nil
				}
				left := end.Sub(now())
				if !restarting(err) || left <= 0 || ctx.Err() != nil {
					if opts.DialError != nil {
						return nil, opts.DialError(err)
					}
					return nil, err
				}
				if werr := wait(ctx, min(backoff, left)); werr != nil {
					return nil, werr
				}
				backoff = min(2*backoff, maxDialBackoff)
			}
		},
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        maxIdleConns,
		MaxIdleConnsPerHost: maxIdleConns,
		IdleConnTimeout:     idleConnTimeout,
	}
}

// restarting reports whether a dial failed the way it does while the
// socket's server restarts: nothing listens, or the socket is not there.
func restarting(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
