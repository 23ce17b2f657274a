package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// hopByHop are the headers of one hop of a proxied request, never passed
// on (RFC 9110 section 7.6.1, and the proxy's own Proxy-* headers).
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// stripHopByHop removes the hop-by-hop headers from h, and those the
// Connection header names.
func stripHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// forward serves an absolute-form http:// request (a client's plain HTTP
// through a proxy): checked against the policy like a CONNECT to the
// URL's host and port (80 when it names none), recorded as a connection
// of its own, sent to the host on a connection of its own without the
// hop-by-hop headers, and answered with the host's response as it comes
// (a streamed response is flushed chunk by chunk). Its bytes are those of
// the request's and the response's bodies. Nothing of it is logged.
func (p *Proxy) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, rec storage.EgressConnection) {
	host, port := hostPortOfURL(r)
	rec.Host, rec.Port = host, port
	target := net.JoinHostPort(host, strconv.Itoa(port))
	if h, pt, ok := splitTarget(target); !ok || r.URL.User != nil || h != host || pt != port {
		p.refuse(ctx, w, rec, storage.EgressMalformed, http.StatusBadRequest,
			"an http:// request names its host and optionally a port 1 to 65535, such as http://127.0.0.1:8080/, and no user")
		return
	}
	t := p.authorize(ctx, w, rec, target)
	if t == nil {
		return
	}
	defer p.release(rec.Execution, t)
	rec.Allowed = true
	conn, ok := p.dial(ctx, w, rec, target)
	if !ok {
		return
	}
	var last atomic.Int64
	touch := func() { last.Store(p.opts.Clock.Now().UnixNano()) }
	touch()
	upstream := &touchConn{Conn: conn, touch: touch}
	p.insert(ctx, rec)
	p.count(ResultAllowed)
	if !t.attach(upstream) {
		writeRefusal(w, http.StatusServiceUnavailable, "the daemon is stopping; try again when it is back")
		p.finish(ctx, rec.ID, t.why(), 0, 0)
		return
	}

	// The one connection dialled above carries the request; the
	// transport never dials, never uses a proxy of its own and keeps
	// nothing open.
	var used atomic.Bool
	tr := &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if used.Swap(true) {
				return nil, errors.New("egress: a forwarded request has one connection")
			}
			return upstream, nil
		},
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()

	// Not the request's context: the server cancels it when it reads the
	// end of the client's side, and a client that half-closes after its
	// request (or whose bridge passes a half-close on) still reads the
	// answer. A client that went away fails the next write instead; one
	// that waits on a silent host, the idle watchdog.
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	stripHopByHop(out.Header)
	var up, down atomic.Int64
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = &countingBody{ReadCloser: r.Body, n: &up, touch: touch}
	}

	// Full duplex: the request's body is still being sent when the host's
	// answer begins, and without it the server discards and closes the
	// body at the answer's first write, which fails the request half way
	// and cuts the answer (the transport closes the connection).
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()

	done := make(chan struct{})
	var cut atomic.Bool // the answer was cut short after its header
	go func() {
		defer close(done)
		resp, err := tr.RoundTrip(out)
		if err != nil {
			p.opts.Logger.Info("egress: a forwarded request got no answer", "execution", rec.Execution, "host", rec.Host, "port", rec.Port, "error", err)
			writeRefusal(w, http.StatusBadGateway, "the proxy could not get an answer from "+target)
			return
		}
		defer resp.Body.Close()
		stripHopByHop(resp.Header)
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_ = rc.Flush()
		if _, err := io.Copy(flushWriter{w: w, rc: rc}, &countingBody{ReadCloser: resp.Body, n: &down, touch: touch}); err != nil {
			cut.Store(true)
			p.opts.Logger.Info("egress: a forwarded answer ended early", "execution", rec.Execution, "host", rec.Host, "port", rec.Port, "error", err)
		}
	}()
	p.watch(t, done, &last)
	upstream.Close()
	p.finish(ctx, rec.ID, t.why(), up.Load(), down.Load())
	if cut.Load() {
		// The client must not take a cut answer for a whole one: the
		// server closes the connection without ending the body.
		panic(http.ErrAbortHandler)
	}
}

// touchConn is a connection that marks every read and write as activity.
type touchConn struct {
	net.Conn
	touch func()
}

func (c *touchConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *touchConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.touch()
	}
	return n, err
}

// countingBody counts a request body's bytes as it is read.
type countingBody struct {
	io.ReadCloser
	n     *atomic.Int64
	touch func()
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.n.Add(int64(n))
		b.touch()
	}
	return n, err
}

// flushWriter flushes each chunk of a response to the client at once, so
// that a streamed answer (server-sent events) arrives as it is made.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
