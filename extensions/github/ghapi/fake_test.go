package ghapi

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// fakeClock is the injected clock; tests move it, nothing sleeps.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// seen is one request the fake received.
type seen struct {
	Method, Path, Query string
	Auth                string
	Body                string
}

// reply is what a route answers.
type reply struct {
	status int
	header map[string]string
	body   any
}

// fakeGitHub is a local GitHub API server (httptest on 127.0.0.1) that
// checks what the real client sends: the API version and Accept headers
// on every request, an RS256 JWT of the App (verified with the test key's
// public half, at the fake clock's time) on the App's endpoints, and an
// installation token it issued and that has not expired everywhere else.
type fakeGitHub struct {
	t     *testing.T
	srv   *httptest.Server
	clock *fakeClock
	appID string
	pub   *rsa.PublicKey

	mu       sync.Mutex
	requests []seen
	routes   map[string]func(seen) reply
	tokens   map[string]tokenInfo // issued installation tokens
	issued   int
	static   string // a plain token the fake accepts, when set
	instID   int64
}

type tokenInfo struct {
	expires time.Time
	repos   []string
}

const tokenPrefix = "ghs_CANARYinstallation"

func newFake(t *testing.T, clock *fakeClock, appID string, pub *rsa.PublicKey) *fakeGitHub {
	f := &fakeGitHub{t: t, clock: clock, appID: appID, pub: pub, routes: map[string]func(seen) reply{}, tokens: map[string]tokenInfo{}, instID: 77}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) url() string { return f.srv.URL + "/" }

func (f *fakeGitHub) route(methodPath string, h func(seen) reply) {
	f.mu.Lock()
	f.routes[methodPath] = h
	f.mu.Unlock()
}

func (f *fakeGitHub) seen() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.requests...)
}

func (f *fakeGitHub) reset() {
	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, r reply) {
	for k, v := range r.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	if r.body != nil {
		_ = json.NewEncoder(w).Encode(r.body)
	}
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: string(body)}
	f.mu.Lock()
	f.requests = append(f.requests, s)
	f.mu.Unlock()

	if v := r.Header.Get("X-GitHub-Api-Version"); v != "2022-11-28" {
		f.t.Errorf("%s %s: X-GitHub-Api-Version %q", r.Method, r.URL.Path, v)
	}
	if a := r.Header.Get("Accept"); !strings.HasPrefix(a, "application/vnd.github") {
		f.t.Errorf("%s %s: Accept %q", r.Method, r.URL.Path, a)
	}
	if len(body) > 0 && !json.Valid(body) {
		f.t.Errorf("%s %s: body is not JSON", r.Method, r.URL.Path)
	}
	unauthorized := reply{status: 401, body: map[string]string{"message": "Bad credentials CANARYbody", "documentation_url": "https://docs.github.com/rest"}}

	bearer, ok := strings.CutPrefix(s.Auth, "Bearer ")
	if !ok {
		writeJSON(w, unauthorized)
		return
	}
	appEndpoint := strings.HasPrefix(r.URL.Path, "/app/") || strings.HasSuffix(r.URL.Path, "/installation")
	if appEndpoint {
		if err := f.verifyJWT(bearer); err != nil {
			f.t.Logf("fake: JWT refused: %v", err)
			writeJSON(w, unauthorized)
			return
		}
	} else if !f.tokenOK(bearer, r.URL.Path) {
		writeJSON(w, unauthorized)
		return
	}

	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	h := f.routes[key]
	f.mu.Unlock()
	switch {
	case h != nil:
		writeJSON(w, h(s))
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/repos/") && strings.HasSuffix(r.URL.Path, "/installation"):
		writeJSON(w, reply{status: 200, body: map[string]any{"id": f.instID, "app_id": 4242}})
	case r.Method == "POST" && r.URL.Path == fmt.Sprintf("/app/installations/%d/access_tokens", f.instID):
		var req struct {
			Repositories []string `json:"repositories"`
		}
		_ = json.Unmarshal(body, &req)
		f.mu.Lock()
		f.issued++
		tok := fmt.Sprintf("%s%03d", tokenPrefix, f.issued)
		exp := f.clock.Now().Add(time.Hour).Truncate(time.Second)
		f.tokens[tok] = tokenInfo{expires: exp, repos: req.Repositories}
		f.mu.Unlock()
		writeJSON(w, reply{status: 201, body: map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)}})
	default:
		writeJSON(w, reply{status: 404, body: map[string]string{"message": "Not Found CANARYbody"}})
	}
}

func (f *fakeGitHub) verifyJWT(s string) error {
	now := f.clock.Now()
	tok, err := jwt.Parse(s, func(*jwt.Token) (any, error) { return f.pub, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithIssuedAt(), jwt.WithIssuer(f.appID), jwt.WithExpirationRequired())
	if err != nil {
		return err
	}
	iat, _ := tok.Claims.GetIssuedAt()
	exp, _ := tok.Claims.GetExpirationTime()
	if iat == nil || exp == nil || exp.Sub(iat.Time) > 10*time.Minute || exp.Before(now) || iat.After(now) {
		return fmt.Errorf("iat/exp window")
	}
	return nil
}

// tokenOK: tok is a token the fake issued, not expired at the fake
// clock's time, narrowed to the repository the path names (or the static
// token).
func (f *fakeGitHub) tokenOK(tok, path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.static != "" && tok == f.static {
		return true
	}
	info, ok := f.tokens[tok]
	if !ok || !f.clock.Now().Before(info.expires) {
		return false
	}
	parts := strings.Split(path, "/") // "", "repos", owner, repo, ...
	if len(parts) < 4 || parts[1] != "repos" {
		return false
	}
	for _, r := range info.repos {
		if r == parts[3] {
			return true
		}
	}
	return false
}

// minted answers how many installation tokens the fake issued.
func (f *fakeGitHub) minted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issued
}

// revoke makes every issued token invalid, as a revocation on GitHub's
// side would.
func (f *fakeGitHub) revoke() {
	f.mu.Lock()
	f.tokens = map[string]tokenInfo{}
	f.mu.Unlock()
}
