package unixhttp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A server that comes back (as a restarted daemon binds its socket again)
// is reached by the same request: the dial is retried, nothing is timed.
func TestDialRetriedUntilTheServerIsBack(t *testing.T) {
	sock := filepath.Join(shortDir(t), "s.sock")
	var mu sync.Mutex
	var waits []time.Duration
	var srv *http.Server
	wait := func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		if len(waits) == 3 { // the socket appears after the third refusal
			ln, err := net.Listen("unix", sock)
			if err != nil {
				return err
			}
			srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })}
			go srv.Serve(ln)
		}
		return nil
	}
	hc := New(sock, Options{DialRetry: time.Minute, Wait: wait})
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer srv.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if len(waits) != 3 || waits[0] != firstDialBackoff || waits[1] != 2*firstDialBackoff || waits[2] != 4*firstDialBackoff {
		t.Fatalf("waits %v, want the backoff from %v doubling", waits, firstDialBackoff)
	}
}

// The bound ends the retrying on the injected clock, and a dial that
// fails another way is not retried at all.
func TestDialRetryIsBounded(t *testing.T) {
	sock := filepath.Join(shortDir(t), "none.sock")
	now := time.Unix(1_800_000_000, 0)
	n := 0
	hc := New(sock, Options{DialRetry: 3 * time.Second, Now: func() time.Time { return now },
		Wait:      func(_ context.Context, d time.Duration) error { n++; now = now.Add(d); return nil },
		DialError: func(err error) error { return errors.Join(errGone, err) }})
	defer hc.CloseIdleConnections()
	if _, err := hc.Get("http://localhost/"); !errors.Is(err, errGone) {
		t.Fatalf("err %v", err)
	}
	// 50+100+200+400+800+1000 = 2550ms, then the last 450ms: 7 waits.
	if n != 7 {
		t.Fatalf("%d waits before giving up, want 7", n)
	}
	// A dial that fails another way is not retried: a socket path too
	// long for the kernel fails with EINVAL at once.
	n = 0
	long := filepath.Join(shortDir(t), strings.Repeat("x", 200)+".sock")
	hc2 := New(long, Options{DialRetry: time.Hour, Now: func() time.Time { return now },
		Wait: func(context.Context, time.Duration) error { n++; return nil }})
	defer hc2.CloseIdleConnections()
	if _, err := hc2.Get("http://localhost/"); err == nil || n != 0 {
		t.Fatalf("a dial of an overlong path: %v after %d waits, want a failure without retrying", err, n)
	}
	// Without DialRetry nothing waits.
	n = 0
	hc3 := New(sock, Options{Wait: func(context.Context, time.Duration) error { n++; return nil }})
	if _, err := hc3.Get("http://localhost/"); err == nil || n != 0 {
		t.Fatalf("no DialRetry: %v after %d waits", err, n)
	}
}

var errGone = errors.New("gone")
