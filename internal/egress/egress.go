// Package egress is the daemon's egress proxy: the one way out of a
// sandboxed execution's network namespace. It is an http.Handler served on
// each execution's own <state>/runs/<key>/egress.sock (internal/runs serves
// it, as it serves the toolbelt socket), and it tunnels CONNECT host:port
// requests (and forwards absolute-form http:// requests, for clients that
// never tunnel plain HTTP) to the hosts the execution's binding allows in
// the ACTIVE configuration, asked at every connection and every forwarded
// request, so that an apply that removes a host refuses the next one.
// Every connection, allowed or refused, is recorded in storage with its
// bytes each way.
//
// It must never resolve, read or log a secret or a token, never look inside
// a tunnel (it counts bytes, nothing else), never log a forwarded request
// or pass on its hop-by-hop headers, never echo a configured value
// in a refusal (only the host and port the client itself asked for, and the
// place in the configuration that would allow it), never let a connection
// through once the execution is no longer live, and never decide what is
// allowed itself: its Policy does.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Defaults of Options.
const (
	DefaultMaxConns    = 16
	DefaultIdleTimeout = 5 * time.Minute
	DefaultDialTimeout = 30 * time.Second
)

// Results counted by Options.OnConnection.
const (
	ResultAllowed = "allowed"
	ResultRefused = "refused"
	// ResultFailed: allowed, but the host could not be reached.
	ResultFailed = "failed"
)

// ReasonClosed is the reason of a tunnel the host closed: its execution
// ended or the daemon stopped.
const ReasonClosed = storage.EgressClosed

// Decision is a Policy's answer for one connection.
type Decision struct {
	Allowed bool
	// Reason is storage.EgressNotAllowed or storage.EgressNotLive when
	// refused.
	Reason string
	// Where is the JSON pointer of the configuration member that would
	// allow the pair (the binding's egress), for the refusal's message.
	Where string
}

// Policy decides whether the execution may open a connection to
// host:port now: against the execution's state and the binding's egress
// in the active configuration. An error refuses the connection.
type Policy func(ctx context.Context, executionID, host string, port int) (Decision, error)

// Timer is the part of a timer the idle watchdog uses; NewTimer makes one.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Options configure a Proxy. Execution, Policy, Store, NewID and Logger
// are required.
type Options struct {
	// Execution returns the execution whose socket a request arrived on
	// (runs.ExecutionFromContext).
	Execution func(ctx context.Context) (string, bool)
	Policy    Policy
	// Store keeps the connection records.
	Store storage.Store
	// NewID returns a fresh record id.
	NewID func() string
	// Dial opens the connection to an allowed host; a net.Dialer's
	// DialContext when nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Clock stamps records and measures idleness; the system clock when
	// nil.
	Clock clock.Clock
	// NewTimer makes the idle watchdog's timer; a time.Timer when nil.
	NewTimer func(d time.Duration) Timer
	// MaxConns bounds the tunnels one execution has open at once
	// (DefaultMaxConns when zero).
	MaxConns int
	// IdleTimeout closes a tunnel through which nothing passed for this
	// long (DefaultIdleTimeout when zero).
	IdleTimeout time.Duration
	// DialTimeout bounds reaching the host (DefaultDialTimeout when zero).
	DialTimeout time.Duration
	// OnConnection, when set, is told each connection's result
	// (ResultAllowed, ResultRefused or ResultFailed): the daemon's
	// metrics.
	OnConnection func(result string)
	Logger       *slog.Logger
}

// Proxy is the egress proxy of every execution. It is safe for concurrent
// use.
type Proxy struct {
	opts Options

	mu      sync.Mutex
	tunnels map[string]map[*tunnel]struct{} // by execution
	closed  bool
}

// New returns a Proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Execution == nil || opts.Policy == nil || opts.Store == nil || opts.NewID == nil || opts.Logger == nil {
		return nil, errors.New("egress: a proxy needs Execution, Policy, Store, NewID and Logger")
	}
	if opts.Dial == nil {
		opts.Dial = (&net.Dialer{}).DialContext
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.NewTimer == nil {
		opts.NewTimer = func(d time.Duration) Timer { return &realTimer{time.NewTimer(d)} }
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	return &Proxy{opts: opts, tunnels: map[string]map[*tunnel]struct{}{}}, nil
}

type realTimer struct{ t *time.Timer }

func (r *realTimer) C() <-chan time.Time   { return r.t.C }
func (r *realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r *realTimer) Stop()                 { r.t.Stop() }

// ServeHTTP answers one proxy request: a CONNECT host:port is checked,
// recorded and, when allowed, tunnelled; anything else is refused.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	exe, ok := p.opts.Execution(r.Context())
	if !ok {
		// Served on something that is not an execution's socket: a bug.
		http.Error(w, "open-conduit egress: this socket belongs to no execution\n", http.StatusInternalServerError)
		return
	}
	ctx := context.WithoutCancel(r.Context())
	now := p.opts.Clock.Now()
	rec := storage.EgressConnection{ID: p.opts.NewID(), Execution: exe, StartedAt: now}

	if r.Method != http.MethodConnect {
		if r.URL != nil && r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "" {
			p.forward(ctx, w, r, rec)
			return
		}
		rec.Host, rec.Port = hostPortOfURL(r)
		p.refuse(ctx, w, rec, storage.EgressMalformed, http.StatusMethodNotAllowed,
			"this proxy tunnels CONNECT host:port (HTTPS and other TLS) and forwards absolute-form http:// requests only; it does not serve this one: use https:// through CONNECT, or an http:// URL")
		return
	}
	host, port, ok := splitTarget(r.RequestURI)
	if !ok {
		p.refuse(ctx, w, rec, storage.EgressMalformed, http.StatusBadRequest,
			"a CONNECT names its target as host:port, such as api.example.com:443")
		return
	}
	rec.Host, rec.Port = host, port
	target := net.JoinHostPort(host, strconv.Itoa(port))
	t := p.authorize(ctx, w, rec, target)
	if t == nil {
		return
	}
	defer p.release(exe, t)

	rec.Allowed = true
	upstream, ok := p.dial(ctx, w, rec, target)
	if !ok {
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		writeRefusal(w, http.StatusInternalServerError, "this connection cannot be tunnelled")
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	// The server's read and write deadlines stay on a hijacked
	// connection; the tunnel has its own idle timeout instead.
	_ = client.SetDeadline(time.Time{})
	p.insert(ctx, rec)
	p.count(ResultAllowed)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		client.Close()
		upstream.Close()
		p.finish(ctx, rec.ID, "", 0, 0)
		return
	}
	up, down, reason := p.splice(t, client, brw.Reader, upstream)
	p.finish(ctx, rec.ID, reason, up, down)
}

// authorize asks the policy whether rec's execution may reach target
// (rec's host and port) now and takes one of its connection slots. It
// returns nil when it refused (and answered) the request; the caller
// releases the slot.
func (p *Proxy) authorize(ctx context.Context, w http.ResponseWriter, rec storage.EgressConnection, target string) *tunnel {
	exe, host, port := rec.Execution, rec.Host, rec.Port
	d, err := p.opts.Policy(ctx, exe, host, port)
	switch {
	case err != nil:
		p.opts.Logger.Error("the egress policy could not decide; the connection is refused", "execution", exe, "host", host, "port", port, "error", err)
		p.refuse(ctx, w, rec, storage.EgressNotAllowed, http.StatusServiceUnavailable,
			"the daemon could not check "+target+" against the configuration just now; try again")
		return nil
	case !d.Allowed && d.Reason == storage.EgressNotLive:
		p.refuse(ctx, w, rec, storage.EgressNotLive, http.StatusForbidden,
			"this execution is no longer running, so it has no egress")
		return nil
	case !d.Allowed:
		where := "the binding's \"egress\""
		if d.Where != "" {
			where = "the binding's \"egress\" (" + d.Where + ")"
		}
		p.refuse(ctx, w, rec, storage.EgressNotAllowed, http.StatusForbidden,
			target+" is not in this execution's egress allowlist: to allow it, add \""+target+"\" to "+where+" in the configuration and apply it")
		return nil
	}

	t, busy := p.admit(exe)
	if t == nil {
		reason, msg := storage.EgressBusy, fmt.Sprintf("this execution already has %d connections open through the proxy, the most it may: close one first", p.opts.MaxConns)
		if !busy {
			reason, msg = ReasonClosed, "the daemon is stopping; try again when it is back"
		}
		p.refuse(ctx, w, rec, reason, http.StatusServiceUnavailable, msg)
		return nil
	}
	return t
}

// dial reaches an allowed target; when it cannot, it records rec as
// failed, answers 502 and reports false.
func (p *Proxy) dial(ctx context.Context, w http.ResponseWriter, rec storage.EgressConnection, target string) (net.Conn, bool) {
	dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	upstream, err := p.opts.Dial(dctx, "tcp", target)
	cancel()
	if err != nil {
		rec.Reason, rec.EndedAt = storage.EgressDialFailed, p.opts.Clock.Now()
		p.insert(ctx, rec)
		p.count(ResultFailed)
		// The dialler's error may name resolved addresses; the client is
		// told only what it asked for.
		p.opts.Logger.Info("egress: an allowed host could not be reached", "execution", rec.Execution, "host", rec.Host, "port", rec.Port, "error", err)
		writeRefusal(w, http.StatusBadGateway, "the proxy could not reach "+target)
		return nil, false
	}
	return upstream, true
}

// refuse records a refused connection and answers it.
func (p *Proxy) refuse(ctx context.Context, w http.ResponseWriter, rec storage.EgressConnection, reason string, status int, msg string) {
	rec.Reason, rec.EndedAt = reason, rec.StartedAt
	p.insert(ctx, rec)
	p.count(ResultRefused)
	writeRefusal(w, status, msg)
}

func writeRefusal(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, "open-conduit egress: "+msg+" (docs/egress.md)\n")
}

func (p *Proxy) count(result string) {
	if p.opts.OnConnection != nil {
		p.opts.OnConnection(result)
	}
}

func (p *Proxy) insert(ctx context.Context, rec storage.EgressConnection) {
	if err := p.opts.Store.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertEgressConnection(ctx, &rec) }); err != nil {
		p.opts.Logger.Error("egress: recording a connection failed", "execution", rec.Execution, "host", rec.Host, "port", rec.Port, "error", err)
	}
}

func (p *Proxy) finish(ctx context.Context, id, reason string, up, down int64) {
	fp := storage.FinishEgressParams{ID: id, Reason: reason, BytesUp: up, BytesDown: down, EndedAt: p.opts.Clock.Now()}
	if err := p.opts.Store.WithTx(ctx, func(tx storage.Tx) error { return tx.FinishEgressConnection(ctx, &fp) }); err != nil {
		p.opts.Logger.Error("egress: recording the end of a connection failed", "record", id, "error", err)
	}
}

// splitTarget reads a CONNECT's authority-form target: a host name or an
// IP literal ([v6] bracketed) and a port 1-65535. The host is lower-cased.
func splitTarget(s string) (string, int, bool) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(host, "/@?#% \t") {
		return "", 0, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portText {
		return "", 0, false
	}
	return strings.ToLower(host), port, true
}

// hostPortOfURL is what an absolute-form request names, for its record.
func hostPortOfURL(r *http.Request) (string, int) {
	if r.URL == nil || r.URL.Host == "" {
		return "", 0
	}
	port, _ := strconv.Atoi(r.URL.Port())
	if port == 0 && r.URL.Scheme == "http" {
		port = 80
	}
	return strings.ToLower(r.URL.Hostname()), port
}

// tunnel is one open CONNECT tunnel.
type tunnel struct {
	mu     sync.Mutex
	conns  []net.Conn
	shut   bool
	reason string // why the host closed it ("" when it ended on its own)
}

// close closes the tunnel's connections, once, recording why.
func (t *tunnel) close(reason string) {
	t.mu.Lock()
	if t.shut {
		t.mu.Unlock()
		return
	}
	t.shut, t.reason = true, reason
	conns := t.conns
	t.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// attach gives the tunnel its connections; when it was closed already, it
// closes them and reports false.
func (t *tunnel) attach(conns ...net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shut {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	t.conns = conns
	return true
}

func (t *tunnel) why() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason
}

// admit takes one of the execution's tunnel slots. It returns nil, true
// when the execution has every slot taken and nil, false once the proxy
// is closed.
func (p *Proxy) admit(exe string) (*tunnel, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	set := p.tunnels[exe]
	if len(set) >= p.opts.MaxConns {
		return nil, true
	}
	if set == nil {
		set = map[*tunnel]struct{}{}
		p.tunnels[exe] = set
	}
	t := &tunnel{}
	set[t] = struct{}{}
	return t, true
}

func (p *Proxy) release(exe string, t *tunnel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.tunnels[exe], t)
	if len(p.tunnels[exe]) == 0 {
		delete(p.tunnels, exe)
	}
}

// Open returns how many tunnels the execution has open.
func (p *Proxy) Open(executionID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tunnels[executionID])
}

// CloseExecution closes every tunnel of the execution: it has ended.
func (p *Proxy) CloseExecution(executionID string) {
	p.mu.Lock()
	var ts []*tunnel
	for t := range p.tunnels[executionID] {
		ts = append(ts, t)
	}
	p.mu.Unlock()
	for _, t := range ts {
		t.close(ReasonClosed)
	}
}

// Close refuses every new connection and closes every open tunnel, as the
// daemon does when it stops (an adopted attempt opens new ones through the
// next daemon's proxy).
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	var ts []*tunnel
	for _, set := range p.tunnels {
		for t := range set {
			ts = append(ts, t)
		}
	}
	p.mu.Unlock()
	for _, t := range ts {
		t.close(ReasonClosed)
	}
	return nil
}

// splice copies both ways until both directions end, the host shuts the
// tunnel, or nothing passes for the idle timeout. It returns the bytes
// each way and the reason it was cut short ("" when it ended on its own).
func (p *Proxy) splice(t *tunnel, client net.Conn, buffered *bufio.Reader, upstream net.Conn) (up, down int64, reason string) {
	var last atomic.Int64 // the clock's nanoseconds at the last activity
	touch := func() { last.Store(p.opts.Clock.Now().UnixNano()) }
	touch()
	if !t.attach(client, upstream) {
		return 0, 0, t.why()
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		// What the client sent after its CONNECT, before the 200, is in
		// the server's buffer.
		var src io.Reader = client
		if buffered != nil && buffered.Buffered() > 0 {
			src = io.MultiReader(io.LimitReader(buffered, int64(buffered.Buffered())), client)
		}
		up = copyCounting(upstream, src, touch)
		closeWrite(upstream)
	}()
	go func() {
		defer wg.Done()
		down = copyCounting(client, upstream, touch)
		closeWrite(client)
	}()
	go func() { wg.Wait(); close(done) }()

	p.watch(t, done, &last)
	client.Close()
	upstream.Close()
	return up, down, t.why()
}

// watch closes t once nothing passed through it for the idle timeout
// (last holds the clock's nanoseconds at the last activity), and returns
// when done is closed.
func (p *Proxy) watch(t *tunnel, done <-chan struct{}, last *atomic.Int64) {
	timer := p.opts.NewTimer(p.opts.IdleTimeout)
	defer timer.Stop()
	for {
		select {
		case <-done:
			return
		case <-timer.C():
			idle := p.opts.Clock.Now().Sub(time.Unix(0, last.Load()))
			if idle >= p.opts.IdleTimeout {
				t.close(storage.EgressIdle)
				continue
			}
			timer.Reset(p.opts.IdleTimeout - idle)
		}
	}
}

// copyCounting copies src to dst, calling touch after every chunk, and
// returns the bytes written.
func copyCounting(dst io.Writer, src io.Reader, touch func()) int64 {
	buf := make([]byte, 32*1024)
	var n int64
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			touch()
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n
			}
		}
		if rerr != nil {
			return n
		}
	}
}

// closeWrite half-closes c when it can, so the other side sees the end of
// this direction while the other still flows.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
