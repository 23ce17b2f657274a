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
	"net"
	"net/http"
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
}

// New returns an HTTP client whose every request goes over the Unix
// socket at socketPath. Callers address requests to http://localhost: the
// host names no machine, since the socket is dialed whatever it says.
func New(socketPath string, opts Options) *http.Client {
	return &http.Client{
		Transport: transport(socketPath, opts.DialError),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			if opts.RedirectError != nil {
				return opts.RedirectError
			}
			return http.ErrUseLastResponse
		},
	}
}

// transport returns the transport of New: it dials socketPath for every
// connection, consults no proxy, speaks HTTP/1.1 only, asks for no
// compression and keeps a bounded idle pool. dialError, when set, wraps a
// failure to connect.
func transport(socketPath string, dialError func(error) error) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, "unix", socketPath)
			if err != nil && dialError != nil {
				return nil, dialError(err)
			}
			return conn, err
		},
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		MaxIdleConns:        maxIdleConns,
		MaxIdleConnsPerHost: maxIdleConns,
		IdleConnTimeout:     idleConnTimeout,
	}
}
