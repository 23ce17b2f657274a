package e2e

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
)

// notification is one datagram the daemon sent, and what the management
// socket's health said when it arrived.
type notification struct {
	lines  []string
	health string
}

// The real daemon under a service manager: it sends its status while it
// starts, READY=1 only once the management socket answers ready
// (adoption and the first round and sweep done), and STOPPING=1 on
// SIGTERM, to the unixgram socket NOTIFY_SOCKET names.
func TestDaemonNotifiesReadinessAndStop(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.root, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	got := make(chan notification, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(got)
				return
			}
			msg := notification{lines: strings.Split(strings.TrimSpace(string(buf[:n])), "\n")}
			// Asked the moment the datagram arrives: READY must never come
			// before the socket serves a ready daemon.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if h, err := e.client().Health(ctx); err == nil {
				msg.health = string(h.State)
			} else {
				msg.health = "error: " + err.Error()
			}
			cancel()
			got <- msg
		}
	}()
	next := func(what string) notification {
		t.Helper()
		select {
		case m, ok := <-got:
			if !ok {
				t.Fatalf("the notification socket closed before %s", what)
			}
			return m
		case <-time.After(guard):
			t.Fatalf("no %s notification", what)
		}
		return notification{}
	}
	has := func(m notification, line string) bool {
		for _, l := range m.lines {
			if l == line {
				return true
			}
		}
		return false
	}

	d := e.spawn("NOTIFY_SOCKET=" + path)
	var ready notification
	for ready.lines == nil {
		m := next("READY=1")
		switch {
		case has(m, "READY=1"):
			ready = m
		case has(m, "STOPPING=1"):
			t.Fatalf("STOPPING before READY: %v", m.lines)
		case len(m.lines) != 1 || !strings.HasPrefix(m.lines[0], "STATUS=starting"):
			t.Fatalf("before READY the daemon sent %v, want only its starting status", m.lines)
		}
	}
	if ready.health != string(api.HealthReady) {
		t.Fatalf("READY=1 arrived while health said %q, want ready", ready.health)
	}
	if len(ready.lines) != 2 || !strings.HasPrefix(ready.lines[1], "STATUS=ready") {
		t.Fatalf("READY datagram %v, want READY=1 and a ready STATUS", ready.lines)
	}

	// Work runs as it does without a service manager.
	code, out, stderr := e.cli("work", "create", "--scope", "setup", "--wait")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("work create --wait: exit %d\n%s\n%s", code, out, stderr)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("the daemon exited %d on SIGTERM:\n%s", code, d.logs)
	}
	stopping := next("STOPPING=1")
	if !has(stopping, "STOPPING=1") {
		t.Fatalf("after SIGTERM the daemon sent %v, want STOPPING=1", stopping.lines)
	}
}
