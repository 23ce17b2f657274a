package toolbeltapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// The hostile-input suite of an execution's toolbelt socket: what a
// malicious or broken program inside an execution sends, over the real
// Unix socket, each case with the status and code it must get.

func send(t *testing.T, sock, method, path, token, body string, header map[string]string) raw {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, "http://localhost"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	r.Close = true // one connection per request: the socket caps connections
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	resp, err := rawClient(sock).Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return raw{status: resp.StatusCode, header: resp.Header, body: b}
}

// exchange writes request exactly as given on a fresh connection and reads
// one response.
func exchange(t *testing.T, sock, request string) raw {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a guard, not an assertion
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return raw{status: resp.StatusCode, header: resp.Header, body: b}
}

func wantRaw(t *testing.T, got raw, status int, code string) {
	t.Helper()
	if got.status != status || got.code() != code {
		t.Fatalf("got %d %q (%s), want %d %q", got.status, got.code(), strings.TrimSpace(string(got.body)), status, code)
	}
}

func TestHostileToolbeltRequests(t *testing.T) {
	b := setupExecution(t)
	sock, tok := b.epA.Socket, b.a.Token
	call := func(t *testing.T, body string) raw { return send(t, sock, "POST", "/v1/toolbelt/call", tok, body, nil) }
	forged := strings.Repeat("A", 43)

	cases := []struct {
		name   string
		got    func(t *testing.T) raw
		status int
		code   string
	}{
		{"duplicate keys", func(t *testing.T) raw {
			return call(t, `{"operation":"emit","operation":"wait","input":{"type":"a.b"}}`)
		}, 422, "invalid_request"},
		{"duplicate keys in the input", func(t *testing.T) raw { return call(t, `{"operation":"emit","input":{"type":"a.b","type":"a.c"}}`) }, 422, "invalid_request"},
		{"unknown field", func(t *testing.T) raw { return call(t, `{"operation":"emit","input":{"type":"a.b"},"source":"x"}`) }, 422, "invalid_request"},
		{"unknown input member", func(t *testing.T) raw {
			return call(t, `{"operation":"emit","input":{"type":"a.b","source":"core.manual"}}`)
		}, 422, "invalid_request"},
		{"null", func(t *testing.T) raw {
			return call(t, `{"operation":"emit","input":{"type":"a.b","data":{"x":null}}}`)
		}, 422, "invalid_request"},
		{"invalid UTF-8", func(t *testing.T) raw { return call(t, "{\"operation\":\"emit\",\"input\":{\"type\":\"a.\xffb\"}}") }, 422, "invalid_request"},
		{"number overflow", func(t *testing.T) raw {
			return call(t, `{"operation":"emit","input":{"type":"a.b","data":{"n":1e400}}}`)
		}, 422, "invalid_request"},
		{"number underflow", func(t *testing.T) raw { return call(t, `{"operation":"acme.echo","input":{"n":-1e-400}}`) }, 422, "invalid_request"},
		{"oversized body", func(t *testing.T) raw {
			return exchange(t, sock, "POST /v1/toolbelt/call HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "+tok+
				"\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{\"operation\":\"emit\"")
		}, 413, "payload_too_large"},
		{"not an object", func(t *testing.T) raw { return call(t, `[]`) }, 422, "invalid_request"},
		{"input not an object", func(t *testing.T) raw { return call(t, `{"operation":"emit","input":[1]}`) }, 422, "invalid_request"},
		{"traversal", func(t *testing.T) raw { return send(t, sock, "POST", "/v1/toolbelt/../toolbelt/call", tok, `{}`, nil) }, 404, "not_found"},
		{"escaped slash", func(t *testing.T) raw { return send(t, sock, "POST", "/v1/toolbelt%2Fcall", tok, `{}`, nil) }, 404, "not_found"},
		{"dot segment", func(t *testing.T) raw { return send(t, sock, "GET", "/v1/toolbelt/./guidance", tok, "", nil) }, 404, "not_found"},
		{"OPTIONS *", func(t *testing.T) raw {
			return exchange(t, sock, "OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
		}, 404, "not_found"},
		{"OPTIONS * with the token", func(t *testing.T) raw {
			return exchange(t, sock, "OPTIONS * HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n")
		}, 404, "not_found"},
		{"OPTIONS on a route", func(t *testing.T) raw { return send(t, sock, "OPTIONS", "/v1/toolbelt/call", "", "", nil) }, 404, "not_found"},
		{"no token", func(t *testing.T) raw { return send(t, sock, "GET", "/v1/toolbelt/guidance", "", "", nil) }, 401, "unauthorized"},
		{"malformed token", func(t *testing.T) raw { return send(t, sock, "GET", "/v1/toolbelt/guidance", "not-a-token", "", nil) }, 401, "unauthorized"},
		{"forged token", func(t *testing.T) raw {
			return send(t, sock, "POST", "/v1/toolbelt/call", forged, `{"operation":"emit","input":{"type":"a.b"}}`, nil)
		}, 403, "forbidden"},
		{"another execution's token", func(t *testing.T) raw {
			return send(t, sock, "POST", "/v1/toolbelt/call", b.b.Token, `{"operation":"emit","input":{"type":"a.b"}}`, nil)
		}, 403, "forbidden"},
		{"non-UTF-8 capability", func(t *testing.T) raw {
			return send(t, sock, "GET", "/v1/toolbelt/serving?capability=%FF", tok, "", nil)
		}, 422, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantRaw(t, tc.got(t), tc.status, tc.code) })
	}

	t.Run("two different huge numbers are not the same request", func(t *testing.T) {
		for _, n := range []string{"1e400", "2e400"} {
			got := call(t, `{"operation":"acme.echo","request_id":"huge","input":{"n":`+n+`}}`)
			wantRaw(t, got, 422, "invalid_request")
		}
	})

	t.Run("Idempotency-Key reuse across executions", func(t *testing.T) {
		key := map[string]string{"Idempotency-Key": "shared"}
		body := `{"operation":"emit","input":{"type":"a.b"}}`
		first := send(t, sock, "POST", "/v1/toolbelt/call", tok, body, key)
		theirs := send(t, b.epB.Socket, "POST", "/v1/toolbelt/call", b.b.Token, body, key)
		wantRaw(t, first, 200, "")
		wantRaw(t, theirs, 200, "")
		if eventID(t, first) == eventID(t, theirs) {
			t.Fatalf("another execution's reuse of the key got the first one's event: %s", theirs.body)
		}
		changed := send(t, b.epB.Socket, "POST", "/v1/toolbelt/call", b.b.Token, `{"operation":"emit","input":{"type":"a.c"}}`, key)
		wantRaw(t, changed, 409, "request_conflict")
	})
}

func eventID(t *testing.T, r raw) string {
	t.Helper()
	var out struct {
		Result struct {
			EventID string `json:"event_id"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || out.Result.EventID == "" {
		t.Fatalf("no event in %d %s", r.status, r.body)
	}
	return out.Result.EventID
}

// TestForgedCallsDoNotGrowTheStore: a flood of forged-token calls on one
// execution's socket writes at most toolbelt.RefusalBurst records and one
// suppressed marker per window; the next window records again.
func TestForgedCallsDoNotGrowTheStore(t *testing.T) {
	b := setupExecution(t)
	ctx := context.Background()
	forged := strings.Repeat("B", 42) + "A"
	flood := func(n int) {
		for i := 0; i < n; i++ {
			wantRaw(t, send(t, b.epA.Socket, "POST", "/v1/toolbelt/call", forged, `{"operation":"emit","input":{"type":"a.b"}}`, nil), 403, "forbidden")
		}
	}
	rejected := func() (all, suppressed int) {
		recs, err := b.f.Env.Store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Kind: storage.ToolbeltRejected, Page: storage.Page{Limit: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Result == toolbelt.ResultSuppressed {
				suppressed++
			}
		}
		return len(recs), suppressed
	}
	flood(3 * toolbelt.RefusalBurst)
	if all, sup := rejected(); all != toolbelt.RefusalBurst+1 || sup != 1 {
		t.Fatalf("%d forged calls wrote %d refusal records (%d suppressed markers), want %d and 1", 3*toolbelt.RefusalBurst, all, sup, toolbelt.RefusalBurst+1)
	}
	// Another execution's socket has its own budget.
	wantRaw(t, send(t, b.epB.Socket, "POST", "/v1/toolbelt/call", forged, `{"operation":"emit","input":{"type":"a.b"}}`, nil), 403, "forbidden")
	if all, _ := rejected(); all != toolbelt.RefusalBurst+2 {
		t.Fatalf("a refusal on another socket was not recorded: %d records", all)
	}
	b.f.Env.Clock.Advance(toolbelt.RefusalWindow)
	flood(1)
	if all, _ := rejected(); all != toolbelt.RefusalBurst+3 {
		t.Fatalf("the next window's refusal was not recorded: %d records", all)
	}
}

// TestToolbeltSocketLimits: each execution's socket closes a body that
// never arrives, and a connection over its own cap, while another
// execution's socket is still served. The limits are set small; the test
// waits on the connection being closed, never on a duration.
func TestToolbeltSocketLimits(t *testing.T) {
	b := setupExecutionWith(t, unixsock.Limits{MaxConns: 2, BodyTimeout: 50 * time.Millisecond})
	sock, tok := b.epA.Socket, b.a.Token

	t.Run("slow body", func(t *testing.T) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("POST /v1/toolbelt/call HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"oper")); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c, "a body that never arrives")
	})

	t.Run("connection cap per execution", func(t *testing.T) {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for len(held) < 2 {
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			if served(c, tok) {
				held = append(held, c)
			} else {
				c.Close() // the slow body's connection was still counted
			}
		}
		extra, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer extra.Close()
		waitClosed(t, extra, "a connection over the cap")
		// The other execution's socket has its own connections.
		other, err := net.Dial("unix", b.epB.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if !served(other, b.b.Token) {
			t.Fatal("another execution's socket is not served while this one is full")
		}
	})
}

// served reports whether a guidance request on c is answered, keeping c
// open.
func served(c net.Conn, token string) bool {
	if _, err := c.Write([]byte("GET /v1/toolbelt/guidance HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + token + "\r\n\r\n")); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Time{})
	return true
}

// waitClosed reads from c until the server closes it. The deadline only
// keeps a broken server from hanging the test; nothing is timed.
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("%s: the server never closed the connection", what)
		}
		return
	}
}
