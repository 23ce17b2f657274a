package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/internal/egress"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// seen is what a test HTTP server received.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (s *seen) add(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	s.body = append(s.body, string(b))
}

func (s *seen) n() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.reqs) }

// TestForwardsPlainHTTP: an absolute-form http:// request to an allowed
// host:port is forwarded without its hop-by-hop headers, its streamed
// answer arrives chunk by chunk, and it is recorded with its bodies'
// bytes; the next request on the same connection is checked again, so
// after an apply that removes the host it is refused and nothing reaches
// the host; a host not allowed is refused, a URL without a port is
// checked as port 80.
func TestForwardsPlainHTTP(t *testing.T) {
	h := newHarness(t, 0)
	var got seen
	second := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.add(r)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Proxy-Authenticate", "Basic realm=hop")
		io.WriteString(w, "event: one\n\n")
		w.(http.Flusher).Flush()
		<-second
		io.WriteString(w, "event: two\n\n")
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	h.snap.Store(configWith(t, addr))

	c, err := net.Dial("unix", h.ep.Egress)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "POST http://%s/v1/messages?beta=true HTTP/1.1\r\nHost: %s\r\nX-Api-Key: k-1\r\nConnection: keep-alive, X-Hop\r\nX-Hop: h\r\n"+
		"Proxy-Authorization: Basic cDpx\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\nhello", addr, addr)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.timer(t)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Proxy-Authenticate") != "" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the forwarded answer = %s %v", resp.Status, resp.Header)
	}
	// The first event arrives while the host still holds the second.
	first := make([]byte, len("event: one\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "event: one\n\n" {
		t.Fatalf("the streamed answer's first chunk: %q %v", first, err)
	}
	close(second)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "event: two\n\n" {
		t.Fatalf("the rest of the answer: %q %v", rest, err)
	}
	if got.n() != 1 {
		t.Fatalf("the host saw %d requests", got.n())
	}
	r := got.reqs[0]
	if r.URL.RequestURI() != "/v1/messages?beta=true" || r.Host != addr || got.body[0] != "hello" || r.Header.Get("X-Api-Key") != "k-1" {
		t.Errorf("the host got %s %s (Host %s) %q %v", r.Method, r.URL, r.Host, got.body[0], r.Header)
	}
	for _, hop := range []string{"X-Hop", "Proxy-Authorization", "Keep-Alive", "Proxy-Connection"} {
		if v := r.Header.Get(hop); v != "" {
			t.Errorf("the hop-by-hop header %s reached the host: %q", hop, v)
		}
	}
	rec := h.records(t, 1)[0]
	if host, port := hostPort(t, srv.Listener); !rec.Allowed || rec.Reason != "" || rec.Host != host || rec.Port != port ||
		rec.BytesUp != 5 || rec.BytesDown != int64(len(first)+len(rest)) {
		t.Errorf("the forwarded request's record = %+v", rec)
	}

	// The next request on the same connection, after an apply that
	// removed the host: refused, and the host sees nothing.
	h.snap.Store(configWith(t, h.echo.Addr().String()))
	fmt.Fprintf(c, "GET http://%s/again HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), addr) || !strings.Contains(string(body), "/scopes/ops/bindings/agent/egress") ||
		strings.Contains(string(body), h.echo.Addr().String()) {
		t.Errorf("a request after the apply = %s %q", resp.Status, body)
	}
	if got.n() != 1 {
		t.Errorf("the host saw %d requests, want only the allowed one", got.n())
	}
	if r := h.records(t, 2)[1]; r.Allowed || r.Reason != storage.EgressNotAllowed {
		t.Errorf("the refused request's record = %+v", r)
	}

	// No port: port 80, checked without resolving the name.
	c2, err := net.Dial("unix", h.ep.Egress)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprint(c2, "GET http://model.example.invalid/v1 HTTP/1.1\r\nHost: model.example.invalid\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(c2), nil); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a request to an unlisted host = %v %v", resp, err)
	}
	if r := h.records(t, 3)[2]; r.Allowed || r.Host != "model.example.invalid" || r.Port != 80 {
		t.Errorf("the port-80 request's record = %+v", r)
	}
	if a, r := h.count(egress.ResultAllowed), h.count(egress.ResultRefused); a != 1 || r != 2 {
		t.Errorf("counted %d allowed and %d refused, want 1 and 2", a, r)
	}
}

// TestForwardIdle: a forwarded request whose answer stalls for the idle
// timeout is cut (the watchdog's timer is the test's, the clock fake).
func TestForwardIdle(t *testing.T) {
	h := newHarness(t, 0)
	release := make(chan struct{})
	defer close(release)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	h.snap.Store(configWith(t, addr))
	c, err := net.Dial("unix", h.ep.Egress)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/slow HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stalled request = %v %v", resp, err)
	}
	ft := h.timer(t)
	h.clock.Advance(egress.DefaultIdleTimeout)
	ft.fire(t)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the stalled answer ended cleanly; want it cut")
	}
	if r := h.records(t, 1)[0]; !r.Allowed || r.Reason != storage.EgressIdle || hits.Load() != 1 {
		t.Errorf("the stalled request's record = %+v (host hit %d times)", r, hits.Load())
	}
}

// TestForwardAfterHalfClose: a client that shuts its side after sending
// its request (a bridge passes such a half-close on) still gets the whole
// streamed answer: the end of the client's side does not cut it.
func TestForwardAfterHalfClose(t *testing.T) {
	h := newHarness(t, 0)
	second := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the whole request first, so its bytes are all sent
		io.WriteString(w, "one\n")
		w.(http.Flusher).Flush()
		<-second
		io.WriteString(w, "two\n")
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	h.snap.Store(configWith(t, addr))
	c, err := net.Dial("unix", h.ep.Egress)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST http://%s/v1/messages HTTP/1.1\r\nHost: %s\r\nContent-Length: 2\r\n\r\nhi", addr, addr)
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.timer(t)
	first := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "one\n" {
		t.Fatalf("the first chunk: %q %v", first, err)
	}
	// The proxy has long read the client's end by now: the request's
	// body was read before the host answered.
	close(second)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "two\n" {
		t.Fatalf("the rest after the client's half-close: %q %v", rest, err)
	}
	if r := h.records(t, 1)[0]; !r.Allowed || r.Reason != "" || r.BytesUp != 2 || r.BytesDown != 8 {
		t.Errorf("the record = %+v", r)
	}
}
