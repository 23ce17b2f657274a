package unixhttp

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// serve runs handler on a real Unix socket under t.TempDir and returns
// its path.
func serve(t *testing.T, handler http.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func TestTalksOverTheSocket(t *testing.T) {
	var host, proto atomic.Value
	sock := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host.Store(r.Host)
		proto.Store(r.Proto)
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	c := New(sock, Options{})
	defer c.CloseIdleConnections()
	for _, url := range []string{"http://localhost/a", "http://example.invalid/b"} {
		resp, body, err := get(t, c, url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		if resp.StatusCode != http.StatusOK || body != "hello "+resp.Request.URL.Path {
			t.Errorf("GET %s = %d %q", url, resp.StatusCode, body)
		}
	}
	if got := proto.Load(); got != "HTTP/1.1" {
		t.Errorf("protocol %v, want HTTP/1.1", got)
	}
	// Whatever host the URL names, the socket is what is dialed.
	if got := host.Load(); got != "example.invalid" {
		t.Errorf("last host %v", got)
	}
}

func TestPoolIsBounded(t *testing.T) {
	tr := New("unused", Options{}).Transport.(*http.Transport)
	if tr.MaxIdleConns != maxIdleConns || tr.MaxIdleConnsPerHost != maxIdleConns || tr.IdleConnTimeout != idleConnTimeout || maxIdleConns <= 0 || idleConnTimeout <= 0 {
		t.Errorf("pool: %d idle, %d per host, timeout %v", tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout)
	}
	if tr.ForceAttemptHTTP2 || tr.Proxy != nil {
		t.Errorf("HTTP/2 %v, proxy %v", tr.ForceAttemptHTTP2, tr.Proxy != nil)
	}
}

func TestRefusesToFollowARedirect(t *testing.T) {
	var followed atomic.Int32
	sock := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/relative":
			http.Redirect(w, r, "/target", http.StatusFound)
		case "/absolute":
			http.Redirect(w, r, "http://localhost/target", http.StatusTemporaryRedirect)
		case "/target":
			followed.Add(1)
			io.WriteString(w, "followed")
		}
	}))
	refused := errors.New("no redirects here")
	for _, path := range []string{"/relative", "/absolute"} {
		// With RedirectError, the request fails with it.
		c := New(sock, Options{RedirectError: refused})
		if _, _, err := get(t, c, "http://localhost"+path); !errors.Is(err, refused) {
			t.Errorf("%s with RedirectError: %v, want the refusal", path, err)
		}
		c.CloseIdleConnections()
		// Without, the redirect itself is the answer.
		c = New(sock, Options{})
		resp, body, err := get(t, c, "http://localhost"+path)
		if err != nil || (resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusTemporaryRedirect) || body == "followed" {
			t.Errorf("%s without RedirectError: %v, %v, %q; want the redirect response", path, resp, err, body)
		}
		c.CloseIdleConnections()
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the redirect target was requested %d times", n)
	}
	// Control: a stock client over the same socket does follow.
	stock := &http.Client{Transport: &http.Transport{DialContext: New(sock, Options{}).Transport.(*http.Transport).DialContext}}
	if _, body, err := get(t, stock, "http://localhost/relative"); err != nil || body != "followed" || followed.Load() != 1 {
		t.Fatalf("control: a stock client got %q, %v", body, err)
	}
}

func TestIgnoresProxyEnvironment(t *testing.T) {
	// A proxy that records every request it receives.
	var proxied atomic.Int32
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	psrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		io.WriteString(w, "proxied")
	})}
	go psrv.Serve(pl)
	defer psrv.Close()
	proxy := "http://" + pl.Addr().String()
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	sock := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "direct")
	}))

	// Control: a transport that reads the environment goes to the proxy.
	// (http.ProxyFromEnvironment reads it once per process, so the control
	// reads it itself, and -count=N still tests this run's proxy.)
	fromEnv := func(*http.Request) (*url.URL, error) { return url.Parse(os.Getenv("HTTP_PROXY")) }
	stock := &http.Client{Transport: &http.Transport{Proxy: fromEnv}}
	if _, body, err := get(t, stock, "http://example.invalid/"); err != nil || body != "proxied" || proxied.Load() != 1 {
		t.Fatalf("control: the proxy environment is not in effect: %q, %v", body, err)
	}
	stock.CloseIdleConnections()

	c := New(sock, Options{})
	defer c.CloseIdleConnections()
	for _, url := range []string{"http://example.invalid/", "http://localhost/"} {
		if _, body, err := get(t, c, url); err != nil || body != "direct" {
			t.Errorf("GET %s = %q, %v; want the socket's answer", url, body, err)
		}
	}
	if n := proxied.Load(); n != 1 {
		t.Errorf("the proxy saw %d requests, want only the control's", n)
	}
}

type unreachable struct{ err error }

func (u *unreachable) Error() string { return "cannot reach: " + u.err.Error() }
func (u *unreachable) Unwrap() error { return u.err }

func TestDialError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	c := New(missing, Options{DialError: func(err error) error { return &unreachable{err} }})
	_, _, err := get(t, c, "http://localhost/")
	var u *unreachable
	if !errors.As(err, &u) {
		t.Errorf("with DialError: %v, want it wrapped", err)
	}
	_, _, err = get(t, New(missing, Options{}), "http://localhost/")
	var op *net.OpError
	if !errors.As(err, &op) || errors.As(err, &u) {
		t.Errorf("without DialError: %v, want the dialer's own error", err)
	}
}
