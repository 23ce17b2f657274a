// Package ghtest is a fake GitHub for tests: an HTTP server on 127.0.0.1
// that serves the REST API a GitHub App's installation uses (the App's
// installation lookup and token exchange, checked against the App's RS256
// JWT; issue comments, pull requests, their reviews and merges, checked
// against the installation tokens it issued and kept as GitHub keeps them,
// see repoAPI) under /api/v3/, and, when given a directory of bare
// repositories, git's smart HTTP protocol through git's own `git
// http-backend` (net/http/cgi), which requires basic auth with an
// installation token issued for that repository. It records every request it served, so a test can check
// what a real client sent.
//
// It is a test helper: no production package may import it. It never
// logs a token or a key, and it holds only throwaway credentials it made
// itself.
package ghtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenPrefix starts every installation token the fake issues, so a test
// can search for any of them (a canary).
const TokenPrefix = "ghs_CANARYghtest"

// Options configure the fake.
type Options struct {
	// AppID is the App's id (default 4242).
	AppID int64
	// Installation is the App's installation id on every repository
	// (default 77).
	Installation int64
	// Repositories are the repositories (owner/repo) the App is installed
	// on; any other is 404 on the installation lookup. Empty: every one.
	Repositories []string
	// GitRoot, when set, is a directory of bare repositories
	// (<owner>/<repo>.git) served over git's smart HTTP.
	GitRoot string
	// Now is the clock tokens expire by (default time.Now: the daemon
	// under test reads the real clock).
	Now func() time.Time
	// TokenLifetime is an installation token's (default 1h).
	TokenLifetime time.Duration
}

// Request is one request the fake served.
type Request struct {
	Method string
	Path   string
	// Auth is how it authenticated: "jwt", "token <repo>", "basic <repo>"
	// or "" (never the credential).
	Auth string
	// Body is the request's body (API requests only).
	Body string
	// Status is what the fake answered.
	Status int
}

// Server is the running fake.
type Server struct {
	// URL is the server's root, http://127.0.0.1:PORT.
	URL string
	// KeyPEM is the App's private key (PKCS #1 PEM), to be handed to the
	// client under test as its secret.
	KeyPEM string

	o   Options
	key *rsa.PrivateKey
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	tokens   map[string]issued
	n        int
	repos    map[string]*repoState // by lower-case owner/repo
	created  int
	hold     chan struct{} // while creations are held
}

type issued struct {
	repos   []string // lower-case owner/repo
	expires time.Time
}

// New starts the fake; it stops when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.AppID == 0 {
		o.AppID = 4242
	}
	if o.Installation == 0 {
		o.Installation = 77
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TokenLifetime == 0 {
		o.TokenLifetime = time.Hour
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{o: o, key: key, tokens: map[string]issued{}, repos: map[string]*repoState{},
		KeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.Listener = ln
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	t.Cleanup(s.ReleaseCreations) // before Close, which waits for held answers
	s.URL = s.srv.URL
	return s
}

// APIURL is the API's base URL, as GitHub Enterprise Server names it.
func (s *Server) APIURL() string { return s.URL + "/api/v3/" }

// AppID is the App's id.
func (s *Server) AppID() int64 { return s.o.AppID }

// Host is host:port, the host git names.
func (s *Server) Host() string { return strings.TrimPrefix(s.URL, "http://") }

// Requests are the requests served so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Tokens are the installation tokens issued so far.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tokens))
	for tok := range s.tokens {
		out = append(out, tok)
	}
	return out
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

var (
	installationPath = regexp.MustCompile(`^/api/v3/repos/([^/]+)/([^/]+)/installation$`)
	tokensPath       = regexp.MustCompile(`^/api/v3/app/installations/([0-9]+)/access_tokens$`)
	repoPath         = regexp.MustCompile(`^/api/v3/repos/([^/]+)/([^/]+)(/.*)$`)
	gitPath          = regexp.MustCompile(`^/([^/]+)/([^/]+)\.git(/.*)$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if m := gitPath.FindStringSubmatch(r.URL.Path); m != nil && s.o.GitRoot != "" {
		s.git(w, r, strings.ToLower(m[1]+"/"+m[2]))
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := Request{Method: r.Method, Path: r.URL.Path, Body: string(body)}
	answer := func(status int, v any) {
		rec.Status = status
		s.record(rec)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if r.Header.Get("X-GitHub-Api-Version") == "" || !strings.Contains(r.Header.Get("Accept"), "application/vnd.github") {
		answer(http.StatusBadRequest, map[string]string{"message": "the fake wants GitHub's Accept and X-GitHub-Api-Version headers"})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v3/app":
		if !s.jwt(r) {
			answer(http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
			return
		}
		rec.Auth = "jwt"
		answer(http.StatusOK, map[string]any{"id": s.o.AppID, "slug": AppSlug, "name": "ghtest app"})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v3/user":
		// As GitHub answers an installation token: it acts as the App's
		// bot, not as a user.
		answer(http.StatusForbidden, map[string]string{"message": "Resource not accessible by integration"})
	case r.Method == http.MethodGet && installationPath.MatchString(r.URL.Path):
		m := installationPath.FindStringSubmatch(r.URL.Path)
		if !s.jwt(r) {
			answer(http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
			return
		}
		rec.Auth = "jwt"
		if !s.installed(m[1] + "/" + m[2]) {
			answer(http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		answer(http.StatusOK, map[string]any{"id": s.o.Installation, "app_id": s.o.AppID})
	case r.Method == http.MethodPost && tokensPath.MatchString(r.URL.Path):
		m := tokensPath.FindStringSubmatch(r.URL.Path)
		if !s.jwt(r) {
			answer(http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
			return
		}
		rec.Auth = "jwt"
		if m[1] != strconv.FormatInt(s.o.Installation, 10) {
			answer(http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		var in struct {
			Repositories []string `json:"repositories"`
		}
		_ = json.Unmarshal(body, &in)
		tok, exp := s.issue(in.Repositories)
		answer(http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)})
	case repoPath.MatchString(r.URL.Path):
		m := repoPath.FindStringSubmatch(r.URL.Path)
		repo := strings.ToLower(m[1] + "/" + m[2])
		if !s.bearer(r, repo) {
			answer(http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
			return
		}
		rec.Auth = "token " + repo
		status, v, link, hold := s.repoAPI(r, m[1]+"/"+m[2], m[3], body)
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
		if link != "" {
			w.Header().Set("Link", link)
		}
		answer(status, v)
	default:
		answer(http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
}

func (s *Server) installed(repo string) bool {
	if len(s.o.Repositories) == 0 {
		return true
	}
	for _, r := range s.o.Repositories {
		if strings.EqualFold(r, repo) {
			return true
		}
	}
	return false
}

// jwt checks the App's RS256 JWT at the fake's clock.
func (s *Server) jwt(r *http.Request) bool {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return &s.key.PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(s.o.Now), jwt.WithIssuedAt(), jwt.WithExpirationRequired())
	return err == nil && claims.Issuer == strconv.FormatInt(s.o.AppID, 10)
}

func (s *Server) issue(names []string) (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	tok := fmt.Sprintf("%s%06d", TokenPrefix, s.n)
	exp := s.o.Now().Add(s.o.TokenLifetime).Truncate(time.Second)
	var repos []string
	for _, n := range names {
		repos = append(repos, strings.ToLower(n))
	}
	s.tokens[tok] = issued{repos: repos, expires: exp}
	return tok, exp
}

// valid reports whether tok is an unexpired token issued for repo.
func (s *Server) valid(tok, repo string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	is, ok := s.tokens[tok]
	if !ok || !s.o.Now().Before(is.expires) {
		return false
	}
	name := repo[strings.IndexByte(repo, '/')+1:]
	for _, r := range is.repos {
		if r == name || r == repo {
			return true
		}
	}
	return false
}

func (s *Server) bearer(r *http.Request, repo string) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(h, "token ")
	}
	return ok && s.valid(tok, repo)
}

// git serves the smart HTTP protocol of repo through git http-backend,
// once basic auth carries an installation token issued for repo.
func (s *Server) git(w http.ResponseWriter, r *http.Request, repo string) {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	user, pass, ok := r.BasicAuth()
	if !ok || user != "x-access-token" || !s.valid(pass, repo) {
		rec.Status = http.StatusUnauthorized
		s.record(rec)
		w.Header().Set("WWW-Authenticate", `Basic realm="ghtest"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
		return
	}
	rec.Auth, rec.Status = "basic "+repo, http.StatusOK
	s.record(rec)
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		http.Error(w, "git is not installed", http.StatusInternalServerError)
		return
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + s.o.GitRoot, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user},
	}
	h.ServeHTTP(w, r)
}
