package unixsock

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Limits bound what one socket's HTTP server takes from its clients.
type Limits struct {
	// MaxConns is how many connections the socket holds open at once;
	// one more is closed as soon as it is accepted, without an answer.
	MaxConns int
	// BodyTimeout is how long a request's body may take to arrive, from
	// the moment its handler starts; a body still incomplete then fails
	// to read and its connection is closed after the answer.
	BodyTimeout time.Duration
}

// The limits of the daemon's sockets (docs/api.md, docs/toolbelt.md).
var (
	// ManagementLimits: the management socket, shared by every operator.
	ManagementLimits = Limits{MaxConns: 128, BodyTimeout: 30 * time.Second}
	// ToolbeltLimits: each execution's own toolbelt socket, so one
	// execution never takes another's connections.
	ToolbeltLimits = Limits{MaxConns: 32, BodyTimeout: 30 * time.Second}
)

// orDefault fills the zero fields of l from def.
func (l Limits) orDefault(def Limits) Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = def.MaxConns
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = def.BodyTimeout
	}
	return l
}

// Apply sets l on s (its zero fields taken from def): the connection cap
// through s.ConnState and the body deadline around s.Handler. Call it
// once, after s.Handler is set and before s serves. log receives one
// warning each time the cap starts refusing connections.
func (l Limits) Apply(s *http.Server, def Limits, log *slog.Logger) {
	l = l.orDefault(def)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &connCap{max: l.MaxConns, log: log}
	s.ConnState = c.state
	s.Handler = bodyDeadline{h: s.Handler, d: l.BodyTimeout}
}

// connCap counts the server's open connections and closes those over max.
type connCap struct {
	mu   sync.Mutex
	n    int
	max  int
	full bool // refusing since the last connection under the cap
	log  *slog.Logger
}

func (c *connCap) state(conn net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		c.mu.Lock()
		c.n++
		over := c.n > c.max
		warn := over && !c.full
		c.full = over
		c.mu.Unlock()
		if warn {
			c.log.Warn("socket connection limit reached; further connections are closed until some end", "max_connections", c.max)
		}
		if over {
			conn.Close() // the server then ends it: StateClosed follows
		}
	case http.StateClosed, http.StateHijacked:
		c.mu.Lock()
		c.n--
		c.mu.Unlock()
	}
}

// bodyDeadline sets a read deadline on a request's connection while its
// body is read, and clears it once the body ended.
type bodyDeadline struct {
	h http.Handler
	d time.Duration
}

func (b bodyDeadline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody {
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(b.d)); err == nil {
			// A shallow copy: the server still sees its own body, and
			// does not wait on a large unread one after the answer.
			r2 := r.WithContext(r.Context())
			r2.Body = &deadlineBody{ReadCloser: r.Body, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			r = r2
		}
	}
	b.h.ServeHTTP(w, r)
}

// deadlineBody clears the read deadline when the body ended, so that a
// handler that runs long after reading it keeps its connection. A body
// that failed keeps the deadline: its connection is ended after the
// answer, and nothing may wait on it again.
type deadlineBody struct {
	io.ReadCloser
	once  sync.Once
	clear func()
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	if err == io.EOF {
		d.once.Do(d.clear)
	}
	return n, err
}

// IsBodyTimeout reports whether err is a body read that ran out of its
// BodyTimeout.
func IsBodyTimeout(err error) bool { return os.IsTimeout(err) }
