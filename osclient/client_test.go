package osclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

type bundle struct {
	socket    string
	tokenFile string
	mu        sync.Mutex
	seen      []*http.Request
}

// setup serves h on a real Unix socket in a short temporary directory and
// writes a token file.
func setup(t testing.TB, token string, h http.HandlerFunc) (*Client, *bundle) {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &bundle{socket: filepath.Join(dir, "toolbelt.sock"), tokenFile: filepath.Join(dir, "token")}
	if err := os.WriteFile(b.tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", b.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, r)
		b.mu.Unlock()
		h(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := New(b.socket, b.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, b
}

func (b *bundle) last(t *testing.T) *http.Request {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) == 0 {
		t.Fatal("no request reached the server")
	}
	return b.seen[len(b.seen)-1]
}

func TestRequestShape(t *testing.T) {
	c, b := setup(t, "tok-abc\r\n", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"operation":"emit","result":{"event_id":"evt_1","seq":1},"replayed":false}`)
	})
	resp, err := c.Call(context.Background(), CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"a.b"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Result) != `{"event_id":"evt_1","seq":1}` || resp.Operation != "emit" {
		t.Errorf("response = %+v", resp)
	}
	r := b.last(t)
	if r.Host != "localhost" || r.RequestURI != PathCall || r.Method != "POST" {
		t.Errorf("request = %s %s, Host %q", r.Method, r.RequestURI, r.Host)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer tok-abc" {
		t.Errorf("the trailing line break was not trimmed from the bearer (%d bytes)", len(got))
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Idempotency-Key") != "" {
		t.Errorf("headers = %v", r.Header)
	}
}

func TestNoRedirects(t *testing.T) {
	c, b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == PathGuidance {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		fmt.Fprint(w, `{"guidance":"followed"}`)
	})
	_, err := c.Guidance(context.Background())
	if CodeOf(err) != CodeBadResponse {
		t.Fatalf("a redirect gave %v, want bad_response", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) != 1 {
		t.Errorf("the client followed the redirect: %d requests", len(b.seen))
	}
}

func TestErrorEnvelope(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   string
		is     func(error) bool
	}{
		{403, `{"error":{"code":"authority_released","message":"declared"}}`, CodeAuthorityReleased, IsAuthorityReleased},
		{403, `{"error":{"code":"forbidden","message":"forbidden"}}`, CodeForbidden, IsForbidden},
		{409, `{"error":{"code":"request_conflict","message":"changed"}}`, CodeRequestConflict, IsRequestConflict},
		{422, `{"error":{"code":"github_not_found","message":"no such PR"}}`, "github_not_found", IsOperationError},
		{500, `<html>oops</html>`, CodeBadResponse, nil},
		{403, `{"error":{}}`, CodeBadResponse, nil},
	} {
		c, _ := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			fmt.Fprint(w, tc.body)
		})
		_, err := c.Call(context.Background(), CallRequest{Operation: "emit"})
		var e *Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("HTTP %d %s: %v, want code %s", tc.status, tc.body, err, tc.code)
			continue
		}
		if tc.is != nil && !tc.is(err) {
			t.Errorf("HTTP %d %s: the Is helper does not recognise %v", tc.status, tc.body, err)
		}
	}
}

func TestTokenFileNeverEchoed(t *testing.T) {
	for _, content := range []string{"", "\n", "two words", "line\nbreak"} {
		c, b := setup(t, content, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"capability":"git.credential","operations":[]}`)
		})
		_, err := c.Serving(context.Background(), CapabilityGitCredential)
		if CodeOf(err) != CodeTokenUnavailable {
			t.Errorf("token file %q: %v, want token_unavailable", content, err)
			continue
		}
		if strings.TrimSpace(content) != "" && strings.Contains(err.Error(), strings.TrimSpace(content)) {
			t.Errorf("the error echoes the token file: %v", err)
		}
		b.mu.Lock()
		if len(b.seen) != 0 {
			t.Errorf("token file %q: a request was sent", content)
		}
		b.mu.Unlock()
	}
}

func TestServingQuery(t *testing.T) {
	c, b := setup(t, "tok", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"capability":%q,"operations":["github.git.credential"]}`, r.URL.Query().Get("capability"))
	})
	s, err := c.Serving(context.Background(), CapabilityGitCredential)
	if err != nil {
		t.Fatal(err)
	}
	if s.Capability != "git.credential" || len(s.Operations) != 1 || s.Operations[0] != "github.git.credential" {
		t.Errorf("serving = %+v", s)
	}
	if r := b.last(t); r.Method != "GET" || r.URL.Path != PathServing || r.URL.RawQuery != "capability=git.credential" {
		t.Errorf("request = %s %s", r.Method, r.URL)
	}
}

func TestNewNeedsBoth(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{EnvEndpoint: "/run/x.sock"},
		{EnvTokenFile: "/run/token"},
	} {
		if _, err := FromEnv(func(k string) string { return env[k] }); CodeOf(err) != CodeEnvironmentUnset {
			t.Errorf("env %v: %v, want environment_unset", env, err)
		}
	}
}

// BenchmarkCallFloor measures a toolbelt round trip over the Unix socket to
// a handler that does nothing: the floor under every real call, including
// the token file read.
func BenchmarkCallFloor(b *testing.B) {
	body := []byte(`{"operation":"emit","result":{},"replayed":false}`)
	c, _ := setup(b, "tok", func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	req := CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"bench.tick"}`)}
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Call(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel16", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Call(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// The token is read again when the host replaces the file by rename, when
// a refusal says it is no longer good, and never outlives the file: a
// removed file is token_unavailable, not the token read before.
func TestTokenFollowsTheFile(t *testing.T) {
	status := http.StatusOK
	c, b := setup(t, "tok-1", func(w http.ResponseWriter, r *http.Request) {
		if status != http.StatusOK {
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":{"code":"token_invalid","message":"refused"}}`)
			return
		}
		fmt.Fprint(w, `{"capability":"git.credential","operations":[]}`)
	})
	call := func(want string) {
		t.Helper()
		_, err := c.Serving(context.Background(), CapabilityGitCredential)
		if status == http.StatusOK && err != nil {
			t.Fatal(err)
		}
		if got := b.last(t).Header.Get("Authorization"); got != "Bearer "+want {
			t.Fatalf("Authorization %q, want the token %s", got, want)
		}
	}
	replace := func(token string) {
		t.Helper()
		tmp := b.tokenFile + ".new"
		if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, b.tokenFile); err != nil {
			t.Fatal(err)
		}
	}
	call("tok-1")
	call("tok-1")
	replace("tok-2")
	call("tok-2")

	// Rewritten in place at the same size and modification time (not as
	// the host does it): stat cannot tell it apart, so the old token is
	// sent, but its refusal makes the next call read the file.
	fi, err := os.Stat(b.tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.tokenFile, []byte("tok-3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(b.tokenFile, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	call("tok-2")
	status = http.StatusUnauthorized
	call("tok-2")
	status = http.StatusOK
	call("tok-3")

	if err := os.Remove(b.tokenFile); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	sent := len(b.seen)
	b.mu.Unlock()
	if _, err := c.Serving(context.Background(), CapabilityGitCredential); CodeOf(err) != CodeTokenUnavailable {
		t.Fatalf("after the file was removed: %v, want token_unavailable", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.seen) != sent {
		t.Fatal("a request was sent with the token of a removed file")
	}
}
