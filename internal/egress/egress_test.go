package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/egress"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

// configWith is a valid configuration whose ops/agent binding's egress
// lists entries.
func configWith(t *testing.T, entries ...string) *config.Snapshot {
	t.Helper()
	quoted := make([]string, len(entries))
	for i, e := range entries {
		quoted[i] = strconv.Quote(e)
	}
	doc := `{"version": 1, "scopes": {"ops": {"bindings": {"agent": {"executor": "shell", "egress": [` + strings.Join(quoted, ", ") + `]}}}}}`
	reg := config.NewRegistry()
	if err := reg.AddExecutor(executor.Info{Name: "shell", Transport: executor.TransportOS}, nil); err != nil {
		t.Fatal(err)
	}
	snap, res := config.Validate([]byte(doc), reg)
	if !res.Valid() {
		t.Fatalf("config invalid: %v", res.Diagnostics)
	}
	return snap
}

// fakeTimer is the idle watchdog's timer, fired by the test.
type fakeTimer struct{ c chan time.Time }

func (f *fakeTimer) C() <-chan time.Time { return f.c }
func (f *fakeTimer) Reset(time.Duration) {}
func (f *fakeTimer) Stop()               {}
func (f *fakeTimer) fire(t *testing.T)   { t.Helper(); f.c <- time.Time{} }
func newFakeTimer() *fakeTimer           { return &fakeTimer{c: make(chan time.Time)} }
func (h *harness) timer(t *testing.T) *fakeTimer {
	t.Helper()
	select {
	case ft := <-h.timers:
		return ft
	case <-time.After(10 * time.Second):
		t.Fatal("no tunnel started its idle watchdog")
		return nil
	}
}

type harness struct {
	store   *sqlite.Store
	clock   *clock.Fake
	proxy   *egress.Proxy
	dirs    *runs.Dirs
	ep      runs.Endpoint
	exe     string
	snap    atomic.Pointer[config.Snapshot]
	live    atomic.Bool
	timers  chan *fakeTimer
	results sync.Map // result -> *atomic.Int64
	echo    net.Listener
	other   net.Listener
}

func (h *harness) count(result string) int64 {
	v, _ := h.results.LoadOrStore(result, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// newHarness serves the proxy on a real egress socket of a real run
// directory, with a real SQLite store, and two real TCP servers on
// 127.0.0.1: an echo server the binding allows and one it does not.
func newHarness(t *testing.T, maxConns int) *harness {
	t.Helper()
	ctx := context.Background()
	base, err := os.MkdirTemp("", "oceg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	h := &harness{clock: clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), exe: "exe_1", timers: make(chan *fakeTimer, 8)}
	h.store, err = sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(base, "db.sqlite"), Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.store.Close() })
	h.echo = listen(t, func(c net.Conn) { io.Copy(c, c); c.Close() })
	h.other = listen(t, func(c net.Conn) { c.Close() })
	h.snap.Store(configWith(t, h.echo.Addr().String()))
	h.live.Store(true)
	var n atomic.Int64
	h.proxy, err = egress.New(egress.Options{
		Execution: runs.ExecutionFromContext,
		Policy: func(_ context.Context, exe, host string, port int) (egress.Decision, error) {
			if exe != h.exe {
				return egress.Decision{}, fmt.Errorf("unexpected execution %s", exe)
			}
			if !h.live.Load() {
				return egress.Decision{Reason: storage.EgressNotLive}, nil
			}
			if h.snap.Load().AllowEgress("ops", "agent", host, port) {
				return egress.Decision{Allowed: true}, nil
			}
			return egress.Decision{Reason: storage.EgressNotAllowed, Where: "/scopes/ops/bindings/agent/egress"}, nil
		},
		Store:    h.store,
		NewID:    func() string { return fmt.Sprintf("egr_%03d", n.Add(1)) },
		Clock:    h.clock,
		NewTimer: func(time.Duration) egress.Timer { ft := newFakeTimer(); h.timers <- ft; return ft },
		MaxConns: maxConns,
		OnConnection: func(result string) {
			v, _ := h.results.LoadOrStore(result, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
		},
		Logger: discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.dirs, err = runs.New(filepath.Join(base, "state"), runs.Options{TmpBase: base, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(base, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if h.ep, err = h.dirs.Prepare(h.exe, "tok"); err != nil {
		t.Fatal(err)
	}
	if err := h.dirs.ServeEgress(h.exe, h.ep, h.proxy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.proxy.Close(); h.dirs.CloseAll() })
	return h
}

func listen(t *testing.T, serve func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); serve(c) }()
		}
	}()
	return ln
}

// connect sends a CONNECT for target through the egress socket and returns
// the answer and the connection (open on a 200).
func (h *harness) connect(t *testing.T, target string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", h.ep.Egress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	var body string
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		c.Close()
	}
	return resp, body, c, br
}

// records waits until the execution has n records, all ended, and returns
// them: a tunnel's record is finished after both its directions end.
func (h *harness) records(t *testing.T, n int) []storage.EgressConnection {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := h.store.ListEgressConnections(context.Background(), &storage.ListEgressParams{Execution: h.exe})
		if err != nil {
			t.Fatal(err)
		}
		ended := len(rs) == n
		for _, r := range rs {
			ended = ended && !r.EndedAt.IsZero()
		}
		if ended {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("records = %+v, want %d ended", rs, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hostPort(t *testing.T, ln net.Listener) (string, int) {
	t.Helper()
	a := ln.Addr().(*net.TCPAddr)
	return a.IP.String(), a.Port
}

// TestAllowedAndRefused: an allowed CONNECT splices both ways and its
// bytes are counted; another port is refused with a 403 that names the
// host and where to allow it and quotes nothing configured; an apply that
// removes the host refuses the next connection; every connection is
// recorded and counted.
func TestAllowedAndRefused(t *testing.T) {
	h := newHarness(t, 0)
	echoHost, echoPort := hostPort(t, h.echo)
	_, otherPort := hostPort(t, h.other)

	resp, _, c, br := h.connect(t, h.echo.Addr().String())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed CONNECT = %s", resp.Status)
	}
	h.timer(t) // the tunnel is up
	if _, err := io.WriteString(c, "hello, egress"); err != nil {
		t.Fatal(err)
	}
	c.(*net.UnixConn).CloseWrite()
	back, err := io.ReadAll(br)
	if err != nil || string(back) != "hello, egress" {
		t.Fatalf("through the tunnel came %q, %v", back, err)
	}
	c.Close()
	recs := h.records(t, 1)
	if r := recs[0]; !r.Allowed || r.Host != echoHost || r.Port != echoPort || r.BytesUp != 13 || r.BytesDown != 13 || r.Reason != "" {
		t.Fatalf("allowed record = %+v, want 13 bytes each way to %s:%d", r, echoHost, echoPort)
	}

	other := net.JoinHostPort("127.0.0.1", strconv.Itoa(otherPort))
	resp, body, _, _ := h.connect(t, other)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT to another port = %s", resp.Status)
	}
	if !strings.Contains(body, other) || !strings.Contains(body, "/scopes/ops/bindings/agent/egress") || !strings.Contains(body, `"egress"`) {
		t.Errorf("the refusal does not say which host and where to allow it: %q", body)
	}
	if strings.Contains(body, h.echo.Addr().String()) {
		t.Errorf("the refusal quotes the configured allowlist: %q", body)
	}
	recs = h.records(t, 2)
	if r := recs[1]; r.Allowed || r.Reason != storage.EgressNotAllowed || r.Port != otherPort || r.BytesUp != 0 {
		t.Fatalf("refused record = %+v", r)
	}

	// An apply that removes the host: the next connection is refused.
	h.snap.Store(configWith(t, "api.example.com:443"))
	if resp, _, _, _ := h.connect(t, h.echo.Addr().String()); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT after the host was removed = %s", resp.Status)
	}
	recs = h.records(t, 3)
	if r := recs[2]; r.Allowed || r.Reason != storage.EgressNotAllowed || r.Port != echoPort {
		t.Fatalf("record after the apply = %+v", r)
	}
	if a, r := h.count(egress.ResultAllowed), h.count(egress.ResultRefused); a != 1 || r != 2 {
		t.Errorf("counted %d allowed and %d refused, want 1 and 2", a, r)
	}
}

// TestRefusals: a request neither CONNECT nor absolute-form http://, a
// malformed target, an execution no longer live, a connection over the
// execution's bound, and a host that cannot be reached.
func TestRefusals(t *testing.T) {
	h := newHarness(t, 1)
	c, err := net.Dial("unix", h.ep.Egress)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET https://%s/x HTTP/1.1\r\nHost: %s\r\n\r\n", h.echo.Addr(), h.echo.Addr())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(body), "CONNECT") {
		t.Fatalf("plain http request = %s %q", resp.Status, body)
	}
	if resp, _, _, _ := h.connect(t, "no-port.example.com"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("CONNECT without a port = %s", resp.Status)
	}

	// One tunnel open fills the bound of one.
	resp, _, open, _ := h.connect(t, h.echo.Addr().String())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed CONNECT = %s", resp.Status)
	}
	h.timer(t)
	if resp, body, _, _ := h.connect(t, h.echo.Addr().String()); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "1 connections open") {
		t.Fatalf("a second tunnel over the bound = %s %q", resp.Status, body)
	}
	open.Close()
	recs := h.records(t, 4)
	want := []string{storage.EgressMalformed, storage.EgressMalformed, "", storage.EgressBusy}
	for i, r := range recs {
		if r.Reason != want[i] {
			t.Errorf("record %d = %+v, want reason %q", i, r, want[i])
		}
	}
	if r := recs[0]; r.Port != h.echo.Addr().(*net.TCPAddr).Port {
		t.Errorf("the plain request's record = %+v, want its host and port", r)
	}

	// A host that is allowed but does not answer.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	h.snap.Store(configWith(t, h.echo.Addr().String(), deadAddr))
	if resp, body, _, _ := h.connect(t, deadAddr); resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, deadAddr) {
		t.Fatalf("CONNECT to an unreachable allowed host = %s %q", resp.Status, body)
	}
	recs = h.records(t, 5)
	if r := recs[4]; !r.Allowed || r.Reason != storage.EgressDialFailed {
		t.Errorf("unreachable record = %+v", r)
	}
	if h.count(egress.ResultFailed) != 1 {
		t.Errorf("failed connections counted %d, want 1", h.count(egress.ResultFailed))
	}

	// The execution has ended: nothing more goes out.
	h.live.Store(false)
	if resp, body, _, _ := h.connect(t, h.echo.Addr().String()); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no longer running") {
		t.Fatalf("CONNECT of an ended execution = %s %q", resp.Status, body)
	}
	if r := h.records(t, 6)[5]; r.Allowed || r.Reason != storage.EgressNotLive {
		t.Errorf("ended execution's record = %+v", r)
	}
}

// TestIdleAndClose: a tunnel through which nothing passed for the idle
// timeout is closed (the watchdog's timer is the test's, the clock is
// fake); CloseExecution closes an execution's open tunnels.
func TestIdleAndClose(t *testing.T) {
	h := newHarness(t, 0)
	resp, _, c, br := h.connect(t, h.echo.Addr().String())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	ft := h.timer(t)
	// Not idle long enough yet: the tunnel stays.
	h.clock.Advance(egress.DefaultIdleTimeout / 2)
	ft.fire(t)
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("the tunnel before its idle timeout: %q, %v", buf, err)
	}
	h.clock.Advance(egress.DefaultIdleTimeout)
	ft.fire(t)
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Fatalf("after the idle timeout the tunnel gave %q, %v; want its end", b, err)
	}
	if r := h.records(t, 1)[0]; r.Reason != storage.EgressIdle || r.BytesUp != 4 || r.BytesDown != 4 {
		t.Errorf("idle record = %+v", r)
	}

	resp, _, _, br = h.connect(t, h.echo.Addr().String())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT = %s", resp.Status)
	}
	h.timer(t)
	if h.proxy.Open(h.exe) != 1 {
		t.Fatalf("open tunnels = %d, want 1", h.proxy.Open(h.exe))
	}
	h.proxy.CloseExecution(h.exe)
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Fatalf("after CloseExecution the tunnel gave %q, %v", b, err)
	}
	if r := h.records(t, 2)[1]; r.Reason != egress.ReasonClosed {
		t.Errorf("closed record = %+v", r)
	}
	if h.proxy.Open(h.exe) != 0 {
		t.Errorf("open tunnels after CloseExecution = %d", h.proxy.Open(h.exe))
	}
}
