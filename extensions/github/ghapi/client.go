package ghapi

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v93/github"
)

// DefaultBaseURL is github.com's API. GitHub Enterprise Server's is
// https://HOST/api/v3/.
const DefaultBaseURL = "https://api.github.com/"

// DefaultTimeout bounds one request to GitHub when no HTTP client is given.
const DefaultTimeout = 30 * time.Second

// MaxResponseBytes bounds the body of any one answer GitHub gives; a larger
// one is refused with github_response_too_large before it is decoded.
const MaxResponseBytes = 8 << 20

var errTooLarge = errors.New("ghapi: response body too large")

// baseURL checks and normalises an API base URL: absolute http or https,
// no credentials, query or fragment, ending in "/". The error never quotes
// it.
func baseURL(raw string) (string, error) {
	if raw == "" {
		return DefaultBaseURL, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("ghapi: the GitHub API base URL must be an absolute http or https URL without credentials, query or fragment")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u.String(), nil
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Timeout: DefaultTimeout}
}

// newClient is a go-github client for base that sends token as a Bearer
// credential (to base's origin only: the library drops it elsewhere). Its
// own rate-limit bookkeeping is off, since it reads the wall clock: every
// request goes to GitHub, and GitHub's answer decides.
func newClient(base string, hc *http.Client, token string) (*github.Client, error) {
	limited := *hc
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	limited.Transport = limitTransport{rt}
	return github.NewClient(
		github.WithHTTPClient(&limited),
		github.WithURLs(&base, &base),
		github.WithAuthToken(token),
		github.WithDisableRateLimitCheck(),
		github.WithUserAgent("open-conduit-github"),
	)
}

// limitTransport fails the read of any body longer than MaxResponseBytes.
type limitTransport struct{ rt http.RoundTripper }

func (l limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: MaxResponseBytes}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// isTransport reports whether err is a failure to reach GitHub at all.
func isTransport(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}
