package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

func TestTokenIsReadOnEveryRequest(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	ctx := context.Background()
	file := filepath.Join(h.StateDir, "copy.token")
	if err := statedir.WriteTokenFile(file, h.OwnerToken(t)); err != nil {
		t.Fatal(err)
	}
	c := client.New(h.Socket, client.TokenFile(file))
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	// Rotate through the same client and write the new token where it
	// reads it: the next request uses it without a new client.
	rot, err := c.Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("old token after rotation: %v", err)
	}
	if err := statedir.WriteTokenFile(file, rot.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("rotated token file not picked up: %v", err)
	}
}

func TestTokenFileErrors(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	missing := filepath.Join(h.StateDir, "missing.token")
	_, err := client.New(h.Socket, client.TokenFile(missing)).Health(context.Background())
	var te *client.TokenError
	if !errors.As(err, &te) || te.Path != missing || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing token file: %v", err)
	}
	empty := filepath.Join(h.StateDir, "empty.token")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := client.New(h.Socket, client.TokenFile(empty)).Health(context.Background()); !errors.As(err, &te) {
		t.Fatalf("empty token file: %v", err)
	}
	// A token file other users can read is refused, with its mode and
	// the fix, and its token is never sent.
	open := filepath.Join(h.StateDir, "open.token")
	if err := statedir.WriteTokenFile(open, h.OwnerToken(t)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = client.New(h.Socket, client.TokenFile(open)).Health(context.Background())
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "0644") || !strings.Contains(err.Error(), "chmod 600 "+open) {
		t.Fatalf("token file at 0644: %v, want a refusal naming the mode and the fix", err)
	}
}

func TestUnreachable(t *testing.T) {
	dir := mgmttest.NewStateDir(t)
	_, err := client.New(filepath.Join(dir, "none.sock"), client.StaticToken("x")).Health(context.Background())
	if !client.IsUnreachable(err) || !strings.Contains(err.Error(), "none.sock") {
		t.Fatalf("dialing a missing socket: %v", err)
	}
}

func TestAPIErrorsAreTyped(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	ctx := context.Background()
	_, err := client.New(h.Socket, client.StaticToken("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")).Health(ctx)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != "unauthorized" || ae.Message == "" {
		t.Fatalf("bad token: %#v", err)
	}
	if !client.IsUnauthorized(err) || client.IsNotFound(err) || client.ErrorCode(err) != "unauthorized" {
		t.Fatal("Is helpers disagree with the code")
	}
	_, err = h.Client.Do(ctx, "GET", "/v1/nothing", nil, nil)
	if !client.IsNotFound(err) {
		t.Fatalf("unknown route: %v", err)
	}
	if client.ErrorCode(errors.New("plain")) != "" || client.IsUnauthorized(nil) {
		t.Fatal("non-API errors have a code")
	}
	if _, err := h.Client.Do(ctx, "GET", "v1/health", nil, nil); err == nil {
		t.Fatal("relative path accepted")
	}
}

// fakeDaemon serves handler on a Unix socket, for what the real server
// never does (redirects, bodies without an envelope).
func fakeDaemon(t *testing.T, handler http.Handler) string {
	t.Helper()
	sock := filepath.Join(mgmttest.NewStateDir(t), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestNoRedirectsNoProxyHostLocalhost(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:9")
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:9")
	t.Setenv("ALL_PROXY", "http://127.0.0.1:9")
	var mu sync.Mutex
	var hosts []string
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/health", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		w.Write([]byte(`{"status":"ok","version":"x","generation":1}`))
	})
	mux.HandleFunc("/v1/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/v1/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/v1/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Store(true) })
	mux.HandleFunc("/v1/plain", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream text", http.StatusBadGateway)
	})
	sock := fakeDaemon(t, mux)
	c := client.New(sock, client.StaticToken("t"))
	ctx := context.Background()
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("health through the socket despite proxy variables: %v", err)
	}
	if len(hosts) != 1 || hosts[0] != "localhost" {
		t.Fatalf("hosts seen = %v, want [localhost]", hosts)
	}
	if _, err := c.Do(ctx, "GET", "/v1/redirect", nil, nil); err == nil || followed.Load() {
		t.Fatalf("redirect: err=%v followed=%v", err, followed.Load())
	}
	_, err := c.Do(ctx, "GET", "/v1/plain", nil, nil)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "unexpected_response" || strings.Contains(ae.Message, "upstream text") {
		t.Fatalf("non-envelope error: %#v", err)
	}
}

// TestCloseIdleConnections: a client's kept-alive connection is closed by
// CloseIdleConnections, so a client made for one request leaves nothing
// open behind it.
func TestCloseIdleConnections(t *testing.T) {
	sock := filepath.Join(mgmttest.NewStateDir(t), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{}, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"status":"ok"}`)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				closed <- struct{}{}
			}
		},
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := client.New(sock, client.StaticToken("t"))
	if _, err := c.Do(t.Context(), "GET", "/v1/health", nil, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		t.Fatal("the connection closed before CloseIdleConnections")
	default:
	}
	c.CloseIdleConnections()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("the idle connection was never closed")
	}
}
