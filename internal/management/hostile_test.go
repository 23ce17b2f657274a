package management_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// The hostile-input suite of the management socket: what a malicious or
// broken client sends, over the real Unix socket, each case with the
// status and code it must get.

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
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	return raw{status: resp.StatusCode, header: resp.Header, body: []byte(body.String())}
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

func TestHostileManagementRequests(t *testing.T) {
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	tok := s.OwnerToken(t)
	ctx := context.Background()
	key := func(k string) map[string]string { return map[string]string{"Idempotency-Key": k} }

	// A valid cursor of the events listing, for the tampering cases.
	for i := 0; i < 3; i++ {
		createWork(t, s, "hostile-"+string(rune('a'+i)))
	}
	page := do(t, s.Harness, req{method: "GET", path: "/v1/events?limit=1&scope=setup", token: tok})
	var listed struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(page.body, &listed); err != nil || listed.NextCursor == "" {
		t.Fatalf("the first page = %d %s", page.status, page.body)
	}
	cur := listed.NextCursor
	body, mac, _ := strings.Cut(cur, ".")
	flipped := body[:len(body)-1] + map[bool]string{true: "A", false: "B"}[body[len(body)-1] != 'A'] + "." + mac

	cases := []struct {
		name   string
		q      req
		status int
		code   string
	}{
		// Bodies.
		{"duplicate keys", req{method: "POST", path: "/v1/events", body: `{"type":"a.b","type":"a.c","scope":"setup"}`, header: key("h1")}, 422, "invalid_request"},
		{"unknown field", req{method: "POST", path: "/v1/work", body: `{"scope":"setup","bogus":1}`, header: key("h2")}, 422, "invalid_request"},
		{"null", req{method: "POST", path: "/v1/work", body: `{"scope":null}`, header: key("h3")}, 422, "invalid_request"},
		{"nested null", req{method: "POST", path: "/v1/work", body: `{"scope":"setup","input":{"type":"a.b","data":{"x":[null]}}}`, header: key("h4")}, 422, "invalid_request"},
		{"invalid UTF-8", req{method: "POST", path: "/v1/work", body: "{\"scope\":\"se\xfftup\"}", header: key("h5")}, 422, "invalid_request"},
		{"number overflow", req{method: "POST", path: "/v1/work", body: `{"scope":"setup","input":{"type":"a.b","data":{"n":1e400}}}`, header: key("h6")}, 422, "invalid_request"},
		{"negative overflow", req{method: "POST", path: "/v1/events", body: `{"type":"a.b","scope":"setup","data":{"n":-2e308}}`, header: key("h7")}, 422, "invalid_request"},
		{"number underflow", req{method: "POST", path: "/v1/events", body: `{"type":"a.b","scope":"setup","data":{"n":1e-400}}`, header: key("h8")}, 422, "invalid_request"},
		{"number overflow in validate", req{method: "POST", path: "/v1/config/validate", body: `{"config":{"version":1e400}}`}, 422, "invalid_request"},
		{"oversized body", req{method: "POST", path: "/v1/config/validate", body: `{"config":"` + strings.Repeat("x", 1<<20) + `"}`}, 413, "payload_too_large"},
		{"not an object", req{method: "POST", path: "/v1/config/validate", body: `[1]`}, 422, "invalid_request"},
		{"two values", req{method: "POST", path: "/v1/config/validate", body: `{} {}`}, 422, "invalid_request"},
		{"not JSON", req{method: "POST", path: "/v1/config/validate", body: `{}`, noContentType: true}, 415, "unsupported_media_type"},
		// Ids and paths.
		{"traversal", req{method: "GET", path: "/v1/work/../health"}, 404, "not_found"},
		{"escaped traversal", req{method: "GET", path: "/v1/work/..%2Fhealth"}, 404, "not_found"},
		{"escaped slash in an id", req{method: "GET", path: "/v1/events/evt%2Fwith%2Fslashes"}, 404, "not_found"},
		{"escaped slash in a control", req{method: "POST", path: "/v1/work/wrk%2Fx/cancel", body: `{}`, header: key("h9")}, 404, "not_found"},
		{"dot segment", req{method: "GET", path: "/v1/./work"}, 404, "not_found"},
		// Queries and cursors.
		{"non-UTF-8 filter", req{method: "GET", path: "/v1/events?scope=%FF"}, 422, "invalid_request"},
		{"non-UTF-8 filter with a valid cursor", req{method: "GET", path: "/v1/events?limit=1&scope=%FF&cursor=" + cur}, 422, "invalid_request"},
		{"tampered cursor", req{method: "GET", path: "/v1/events?limit=1&scope=setup&cursor=" + flipped}, 422, "invalid_cursor"},
		{"truncated cursor", req{method: "GET", path: "/v1/events?limit=1&scope=setup&cursor=" + cur[:len(cur)-3]}, 422, "invalid_cursor"},
		{"cursor of other filters", req{method: "GET", path: "/v1/events?limit=1&scope=other&cursor=" + cur}, 422, "cursor_mismatch"},
		{"cursor of another listing", req{method: "GET", path: "/v1/work?limit=1&scope=setup&cursor=" + cur}, 422, "cursor_mismatch"},
		{"garbage cursor", req{method: "GET", path: "/v1/events?cursor=%00%FF."}, 422, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.token = tok
			expect(t, do(t, s.Harness, tc.q), tc.status, tc.code)
		})
	}

	t.Run("oversized body that never ends", func(t *testing.T) {
		got := exchange(t, s.Socket, "POST /v1/config/validate HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "+tok+
			"\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{\"config\"")
		expect(t, got, 413, "payload_too_large")
	})

	t.Run("two different huge numbers are not the same request", func(t *testing.T) {
		// Both are refused, so neither can replay the other's answer.
		for i, n := range []string{"1e400", "2e400"} {
			got := do(t, s.Harness, req{method: "POST", path: "/v1/events", token: tok, body: `{"type":"a.b","scope":"setup","data":{"n":` + n + `}}`, header: key("same-key")})
			expect(t, got, 422, "invalid_request")
			_ = i
		}
	})

	t.Run("OPTIONS * needs a token or is 404", func(t *testing.T) {
		expect(t, exchange(t, s.Socket, "OPTIONS * HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"), 401, "unauthorized")
		expect(t, exchange(t, s.Socket, "OPTIONS * HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "+tok+"\r\nConnection: close\r\n\r\n"), 404, "not_found")
		expect(t, do(t, s.Harness, req{method: "OPTIONS", path: "/v1/work"}), 401, "unauthorized")
		expect(t, do(t, s.Harness, req{method: "OPTIONS", path: "/v1/work", token: tok}), 405, "method_not_allowed")
		expect(t, do(t, s.Harness, req{method: "TRACE", path: "/v1/health"}), 401, "unauthorized")
	})

	t.Run("Idempotency-Key reuse across operators", func(t *testing.T) {
		other, _ := s.AddOperator(t, "mallory", management.RoleOperate)
		otherTok := strings.TrimSpace(readFile(t, other))
		bodyA := `{"scope":"setup","input":{"type":"a.b","data":{"n":1}}}`
		first := do(t, s.Harness, req{method: "POST", path: "/v1/work", token: tok, body: bodyA, header: key("shared")})
		expect(t, first, 201, "")
		// Another operator's same key is its own request: never the first
		// operator's answer, never a conflict with it.
		theirs := do(t, s.Harness, req{method: "POST", path: "/v1/work", token: otherTok, body: bodyA, header: key("shared")})
		expect(t, theirs, 201, "")
		if workID(t, theirs) == workID(t, first) || theirs.header.Get("Idempotent-Replayed") == "true" {
			t.Fatalf("another operator's reuse of the key got the first operator's answer: %s", theirs.body)
		}
		changed := do(t, s.Harness, req{method: "POST", path: "/v1/work", token: otherTok, body: `{"scope":"setup"}`, header: key("shared")})
		expect(t, changed, 409, "idempotency_conflict")
		again := do(t, s.Harness, req{method: "POST", path: "/v1/work", token: tok, body: bodyA, header: key("shared")})
		if workID(t, again) != workID(t, first) {
			t.Fatalf("the first operator's retry = %s, want its own answer %s", again.body, first.body)
		}
	})

	t.Run("ranges follow RFC 9110", func(t *testing.T) {
		work := createWork(t, s, "ranges").Work.ID
		exe := insertExecution(t, s, work, "exe_ranges")
		a, err := s.Artifacts.Put(ctx, storage.Artifact{ID: "art_ranges", Execution: exe, Work: work, Name: "log", MediaType: "text/plain", CreatedAt: s.Clock.Now()}, strings.NewReader("0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		path := "/v1/artifacts/" + a.ID + "/content"
		for _, tc := range []struct {
			rng, want string
			status    int
			code      string
		}{
			{"bytes=2-4", "234", 206, ""},
			{"BYTES=2-4", "234", 206, ""},
			{"Bytes=-2", "89", 206, ""},
			{"bytes=8-9999999999999999999", "89", 206, ""},
			{"bytes=8-000000000000000000000000009", "89", 206, ""},
			{"bytes=-99999999999999999999999", "0123456789", 206, ""},
			{"bytes=0000000000000000000003-3", "3", 206, ""},
			{"bytes=9999999999999999999-", "", 416, "range_not_satisfiable"},
			{"bytes=10-", "", 416, "range_not_satisfiable"},
			{"bytes=0-1,3-4", "", 416, "range_not_satisfiable"},
			{"bytes=x-1", "", 416, "range_not_satisfiable"},
			{"lines=0-1", "0123456789", 200, ""},
		} {
			got := do(t, s.Harness, req{method: "GET", path: path, token: tok, header: map[string]string{"Range": tc.rng}})
			if got.status != tc.status || got.code() != tc.code || (tc.status != 416 && string(got.body) != tc.want) {
				t.Errorf("Range %q = %d %q %s, want %d %q %q", tc.rng, got.status, got.code(), got.body, tc.status, tc.code, tc.want)
			}
			if tc.status == 416 && got.header.Get("Content-Range") != "bytes */10" {
				t.Errorf("Range %q: Content-Range %q, want bytes */10", tc.rng, got.header.Get("Content-Range"))
			}
		}
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func workID(t *testing.T, r raw) string {
	t.Helper()
	var out struct {
		Work struct {
			ID string `json:"id"`
		} `json:"work"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil || out.Work.ID == "" {
		t.Fatalf("no work in %d %s", r.status, r.body)
	}
	return out.Work.ID
}

// TestManagementSocketLimits: a body that never arrives loses its
// connection once the socket's body timeout passed, and a connection over
// the socket's cap is closed at once. The limits are set small; the test
// waits on the connection being closed, never on a duration.
func TestManagementSocketLimits(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{Limits: unixsock.Limits{MaxConns: 2, BodyTimeout: 50 * time.Millisecond}})
	tok := h.OwnerToken(t)

	t.Run("slow body", func(t *testing.T) {
		c, err := net.Dial("unix", h.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Write([]byte("POST /v1/config/validate HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"con"))
		if err != nil {
			t.Fatal(err)
		}
		waitClosed(t, c, "a body that never arrives")
	})

	t.Run("connection cap", func(t *testing.T) {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		// Two connections served and kept open (the slow body's
		// connection may still be counted for a moment: retry).
		for len(held) < 2 {
			c, err := net.Dial("unix", h.Socket)
			if err != nil {
				t.Fatal(err)
			}
			if served(c) {
				held = append(held, c)
			} else {
				c.Close()
			}
		}
		extra, err := net.Dial("unix", h.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer extra.Close()
		waitClosed(t, extra, "a connection over the cap")
		// Once one ends, a new one is served again.
		held[0].Close()
		held = held[1:]
		for {
			if _, err := tryHealth(h.Socket); err == nil {
				break
			}
		}
	})
}

// served reports whether a request on c is answered, keeping c open.
func served(c net.Conn) bool {
	if _, err := c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n")); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Time{})
	return true
}

// tryHealth asks for health on a fresh connection; an error means the
// connection was closed before an answer (the cap still full).
func tryHealth(sock string) (int, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")); err != nil {
		return 0, err
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
