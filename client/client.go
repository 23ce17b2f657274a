// Package client is the public Go client of Open Conduit's local
// management API: HTTP/1.1 JSON over the daemon's owner-only Unix socket.
// Refusals come back as *APIError carrying the API's stable code, with Is…
// helpers to test for them. The wire shapes are package api's: a shape the
// client returns as it came is an alias (Decision = api.Decision), and one
// it returns with how the request went embeds the api type beside Read,
// Mutation or Raw (Work is api.Work and Read).
//
// It must never dial anything but the configured socket path (the host is
// always localhost, no proxy is consulted and redirects are refused), and
// it must never print, log or cache a token: the token is read from its
// source on every request, so a rotated token file takes effect at once.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/unixhttp"
)

// TokenSource returns the bearer token for one request.
type TokenSource func() (string, error)

// TokenFile reads the token from path on every request, trimming the
// trailing newline, so that a token file replaced by rotation takes
// effect at once.
//
// A file other users may read or write (any group or other permission
// bit) is refused, naming its mode and the fix: a token in it may already
// be known to someone else.
func TokenFile(path string) TokenSource {
	return func() (string, error) {
		f, err := os.Open(path)
		if err != nil {
			return "", &TokenError{Path: path, Err: err}
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return "", &TokenError{Path: path, Err: err}
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return "", &TokenError{Path: path, Err: fmt.Errorf("other users can access it (mode %04o); run: chmod 600 %s, and rotate the token if anyone may have read it", perm, path)}
		}
		b, err := io.ReadAll(io.LimitReader(f, 64<<10))
		if err != nil {
			return "", &TokenError{Path: path, Err: err}
		}
		tok := strings.TrimRight(string(b), "\r\n")
		if tok == "" {
			return "", &TokenError{Path: path, Err: errors.New("the file is empty")}
		}
		return tok, nil
	}
}

// StaticToken always returns tok.
func StaticToken(tok string) TokenSource {
	return func() (string, error) { return tok, nil }
}

// TokenError says the token could not be read. It never holds the token.
type TokenError struct {
	Path string
	Err  error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("cannot read the token file %s: %v", e.Path, e.Err)
}

func (e *TokenError) Unwrap() error { return e.Err }

// UnreachableError says the daemon's socket could not be reached.
type UnreachableError struct {
	Socket string
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the daemon at %s: %v", e.Socket, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// APIError is the API's refusal: the HTTP status and the envelope's code
// and message.
type APIError struct {
	Status  int
	Code    string
	Message string
	// Diagnostics are an invalid configuration's problems
	// (invalid_config).
	Diagnostics []Diagnostic
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Client talks to one daemon's management socket.
type Client struct {
	socket string
	token  TokenSource
	http   *http.Client
}

// errRedirect refuses every redirect.
var errRedirect = errors.New("the daemon answered with a redirect; the client follows none")

// New returns a client of the daemon listening on socketPath, sending
// the token that token returns with each request.
func New(socketPath string, token TokenSource) *Client {
	return &Client{
		socket: socketPath,
		token:  token,
		http: unixhttp.New(socketPath, unixhttp.Options{
			DialError:     func(err error) error { return &UnreachableError{Socket: socketPath, Err: err} },
			RedirectError: errRedirect,
		}),
	}
}

// Socket is the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// CloseIdleConnections closes the client's connections to the daemon that
// carry no request now. A program that makes a client for one request
// and drops it calls it, so that no connection outlives the client.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// RequestOptions are per-request options.
type RequestOptions struct {
	// IdempotencyKey is sent as Idempotency-Key. Methods whose route
	// needs one make a fresh key when it is empty; pass the same key to
	// retry the same request after a lost response.
	IdempotencyKey string
	// IfNoneMatch is sent as If-None-Match on a read.
	IfNoneMatch string
}

// Response is a successful (2xx or 304) response.
type Response struct {
	Status int
	Header http.Header
	// Body is the response body as the API sent it.
	Body []byte
	// Replayed is true when the API replayed an earlier response to the
	// same Idempotency-Key.
	Replayed bool
}

// Do sends one request. path is the escaped path with its query
// (PathEscape each id). body, if not nil, is sent as JSON; a POST without
// a body sends {}. A refusal is returned as *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body any, opts *RequestOptions) (*Response, error) {
	resp, err := c.send(ctx, method, path, body, opts, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the daemon's response failed: %w", err)
	}
	return &Response{
		Status:   resp.StatusCode,
		Header:   resp.Header,
		Body:     b,
		Replayed: resp.Header.Get("Idempotent-Replayed") == "true",
	}, nil
}

// send sends one request with extra headers and returns the response with
// its body unread (the caller closes it). A refusal is read and returned
// as *APIError.
func (c *Client) send(ctx context.Context, method, path string, body any, opts *RequestOptions, header http.Header) (*http.Response, error) {
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		return nil, fmt.Errorf("client: path %q must be absolute", path)
	}
	var rd io.Reader
	if body != nil || method == http.MethodPost {
		if body == nil {
			body = struct{}{}
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	req.Host = "localhost"
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for k, vals := range header {
		req.Header[k] = vals
	}
	if opts != nil {
		if opts.IdempotencyKey != "" {
			req.Header.Set("Idempotency-Key", opts.IdempotencyKey)
		}
		if opts.IfNoneMatch != "" {
			req.Header.Set("If-None-Match", opts.IfNoneMatch)
		}
	}
	tok, err := c.token()
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *UnreachableError
		if errors.As(err, &ue) {
			return nil, ue
		}
		return nil, fmt.Errorf("request to the daemon at %s failed: %w", c.socket, err)
	}
	if resp.StatusCode >= 400 || (resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified) {
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err != nil {
			return nil, fmt.Errorf("reading the daemon's response failed: %w", err)
		}
		return nil, apiError(resp.StatusCode, b)
	}
	return resp, nil
}

func apiError(status int, body []byte) *APIError {
	var env api.ErrorEnvelope
	if err := json.Unmarshal(body, &env); err != nil || env.Error.Code == "" {
		return &APIError{Status: status, Code: "unexpected_response", Message: fmt.Sprintf("the daemon answered %d %s without an error envelope", status, http.StatusText(status))}
	}
	return &APIError{Status: status, Code: env.Error.Code, Message: env.Error.Message, Diagnostics: env.Error.Diagnostics}
}

// decode sends a request and decodes a successful body into out.
func (c *Client) decode(ctx context.Context, method, path string, body any, opts *RequestOptions, out any) (*Response, error) {
	resp, err := c.Do(ctx, method, path, body, opts)
	if err != nil {
		return nil, err
	}
	if len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return nil, fmt.Errorf("client: the daemon's response could not be decoded: %w", err)
		}
	}
	return resp, nil
}

// PathEscape escapes an id for use as one path segment; an id containing
// "/" becomes one segment with %2F.
func PathEscape(id string) string { return url.PathEscape(id) }

// NewIdempotencyKey returns a fresh random key.
func NewIdempotencyKey() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func withKey(opts *RequestOptions) *RequestOptions {
	o := RequestOptions{}
	if opts != nil {
		o = *opts
	}
	if o.IdempotencyKey == "" {
		o.IdempotencyKey = NewIdempotencyKey()
	}
	return &o
}

// ErrorCode returns the API code of err, or "" if err is not an *APIError.
func ErrorCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func isCode(err error, code string) bool { return ErrorCode(err) == code }

// IsUnauthorized: no valid token was sent (401 unauthorized).
func IsUnauthorized(err error) bool { return isCode(err, api.CodeUnauthorized) }

// IsForbidden: the request is outside the caller's authority (403 forbidden).
func IsForbidden(err error) bool { return isCode(err, api.CodeForbidden) }

// IsForbiddenRole: the credential's role is too low (403 forbidden_role).
func IsForbiddenRole(err error) bool { return isCode(err, api.CodeForbiddenRole) }

// IsWrongCredentialClass: an execution token on the management socket, or
// an operator token on the toolbelt (403 wrong_credential_class).
func IsWrongCredentialClass(err error) bool { return isCode(err, api.CodeWrongCredentialClass) }

// IsNotFound: no such record or route (404 not_found).
func IsNotFound(err error) bool { return isCode(err, api.CodeNotFound) }

// IsConflict: the request conflicts with the current state (409 conflict).
func IsConflict(err error) bool { return isCode(err, api.CodeConflict) }

// IsIdempotencyConflict: the key was used for another request (409).
func IsIdempotencyConflict(err error) bool { return isCode(err, api.CodeIdempotencyConflict) }

// IsStaleGeneration: the configuration changed since it was read (409).
func IsStaleGeneration(err error) bool { return isCode(err, api.CodeStaleGeneration) }

// IsInvalidRequest: the request broke a rule of its shape (422).
func IsInvalidRequest(err error) bool { return isCode(err, api.CodeInvalidRequest) }

// IsUnreachable: the daemon's socket could not be reached.
func IsUnreachable(err error) bool {
	var ue *UnreachableError
	return errors.As(err, &ue)
}

// IsTokenError reports whether err says the token file could not be read.
func IsTokenError(err error) bool {
	var te *TokenError
	return errors.As(err, &te)
}
