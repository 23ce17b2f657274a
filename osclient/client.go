// Package osclient is the Go client of an execution's toolbelt socket, as
// docs/toolbelt.md fixes the wire protocol: HTTP/1.1 over the Unix socket
// named by OS_ENDPOINT, with the bearer token read from OS_TOKEN_FILE (the
// host rotates it by rename: every call checks that the file is the one it
// read, and reads it again when it is not). The os CLI is built on it, and
// any program running inside an execution may use it.
//
// It must never print, log or return the token, put it anywhere but the
// Authorization header of a request to the configured socket, follow a
// redirect, or use a proxy.
package osclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/unixhttp"
)

// The environment an execution's process gets from the host.
const (
	EnvEndpoint  = "OS_ENDPOINT"   // the path of the execution's toolbelt socket
	EnvTokenFile = "OS_TOKEN_FILE" // the file holding the execution's current token
	// EnvDialRetry optionally bounds how long a call keeps dialling a
	// socket that refuses connections (a Go duration; 0 turns retrying
	// off; DialRetry when unset or not a duration).
	EnvDialRetry = "OS_DIAL_RETRY"
)

// Routes of the toolbelt socket.
const (
	PathCall     = "/v1/toolbelt/call"
	PathGuidance = "/v1/toolbelt/guidance"
	PathServing  = "/v1/toolbelt/serving"
)

// maxResponse bounds a response body the client reads.
const maxResponse = 16 << 20

// DialRetry is how long a call keeps dialling a toolbelt socket that
// refuses connections or is not there, as while the daemon restarts and
// binds it again; after it the call fails endpoint_unreachable.
const DialRetry = 30 * time.Second

// Client calls one execution's toolbelt. It is safe for concurrent use.
type Client struct {
	endpoint  string
	tokenFile string
	hc        *http.Client

	// mu guards read, the token file as last read.
	mu   sync.Mutex
	read readToken
}

// readToken is a token and the file it was read from, as stat saw it.
type readToken struct {
	token string
	file  os.FileInfo
}

// New returns a client of the socket at endpoint, authenticating with the
// token in tokenFile.
func New(endpoint, tokenFile string) (*Client, error) {
	return newClient(endpoint, tokenFile, DialRetry)
}

func newClient(endpoint, tokenFile string, retry time.Duration) (*Client, error) {
	if endpoint == "" || tokenFile == "" {
		return nil, &Error{Code: CodeEnvironmentUnset, Message: EnvEndpoint + " and " + EnvTokenFile + " are not both set"}
	}
	return &Client{
		endpoint:  endpoint,
		tokenFile: tokenFile,
		// A redirect comes back as the response itself, which do refuses
		// as a status without an error envelope.
		hc: unixhttp.New(endpoint, unixhttp.Options{DialRetry: retry}),
	}, nil
}

// FromEnv returns a client configured by OS_ENDPOINT and OS_TOKEN_FILE, as
// read through getenv (os.Getenv when nil).
func FromEnv(getenv func(string) string) (*Client, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	retry := DialRetry
	if d, err := time.ParseDuration(getenv(EnvDialRetry)); err == nil && d >= 0 {
		retry = d
	}
	return newClient(getenv(EnvEndpoint), getenv(EnvTokenFile), retry)
}

// Endpoint returns the socket path the client dials.
func (c *Client) Endpoint() string { return c.endpoint }

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Call invokes an operation: POST /v1/toolbelt/call.
func (c *Client) Call(ctx context.Context, req CallRequest) (*CallResponse, error) {
	if len(bytes.TrimSpace(req.Input)) == 0 {
		req.Input = json.RawMessage(`{}`)
	}
	body, err := json.Marshal(req.body())
	if err != nil {
		return nil, &Error{Code: CodeInvalidRequest, Message: "the input is not valid JSON: " + err.Error()}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost"+PathCall, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	var out CallResponse
	if err := c.do(hreq, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Guidance reads the guidance of the token's granted operations: GET
// /v1/toolbelt/guidance.
func (c *Client) Guidance(ctx context.Context) (*Guidance, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost"+PathGuidance, nil)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.do(hreq, &raw); err != nil {
		return nil, err
	}
	var g Guidance
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, badResponse("the guidance document is malformed: " + err.Error())
	}
	g.Raw = raw
	return &g, nil
}

// Serving lists which of the token's granted operations serve capability:
// GET /v1/toolbelt/serving?capability=.
func (c *Client) Serving(ctx context.Context, capability string) (*Serving, error) {
	u := "http://localhost" + PathServing + "?" + url.Values{"capability": {capability}}.Encode()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	var out Serving
	if err := c.do(hreq, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// do authenticates hreq with the current token, sends it and decodes a 200
// body into out, or the error envelope into an *Error.
func (c *Client) do(hreq *http.Request, out any) error {
	token, err := c.token()
	if err != nil {
		return err
	}
	hreq.Header.Set("Authorization", "Bearer "+token)
	hreq.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		if ctxErr := hreq.Context().Err(); ctxErr != nil {
			return ctxErr
		}
		return &Error{Code: CodeEndpointUnreachable, Message: fmt.Sprintf("cannot reach the toolbelt socket %s: %v", c.endpoint, unwrapURLError(err))}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		// The token was refused: the next call reads the file again,
		// whatever stat says of it.
		c.mu.Lock()
		c.read = readToken{}
		c.mu.Unlock()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return &Error{Code: CodeEndpointUnreachable, Message: fmt.Sprintf("the toolbelt socket %s closed the connection mid-response: %v", c.endpoint, err)}
	}
	if len(body) > maxResponse {
		return badResponse(fmt.Sprintf("the response is larger than %d bytes", maxResponse))
	}
	if resp.StatusCode != http.StatusOK {
		var env api.ErrorEnvelope
		if json.Unmarshal(body, &env) != nil || env.Error.Code == "" {
			return badResponse(fmt.Sprintf("HTTP %d without an error envelope", resp.StatusCode))
		}
		return &Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return badResponse("the response body is not the expected JSON: " + err.Error())
	}
	return nil
}

// token is the token in the token file. The host replaces the file by
// rename whenever it rotates the token, so each call stats it: the same
// file (device and inode), size and modification time as when it was
// last read is the same token, and anything else is read again. A stat
// costs one system call where a read costs four.
func (c *Client) token() (string, error) {
	fi, err := os.Stat(c.tokenFile)
	if err != nil {
		return "", c.tokenUnavailable(err)
	}
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read.file != nil && os.SameFile(fi, read.file) && fi.Size() == read.file.Size() && fi.ModTime().Equal(read.file.ModTime()) {
		return read.token, nil
	}
	b, err := os.ReadFile(c.tokenFile)
	if err != nil {
		return "", c.tokenUnavailable(err)
	}
	token := strings.TrimRight(string(b), "\r\n")
	if token == "" || strings.IndexFunc(token, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		// Never say what is in the file: it may be a token.
		return "", &Error{Code: CodeTokenUnavailable, Message: fmt.Sprintf("the token file %s named by %s does not hold a token", c.tokenFile, EnvTokenFile)}
	}
	// Kept with what stat saw before the read: were the file replaced in
	// between, the next call sees a different file and reads it again.
	c.mu.Lock()
	c.read = readToken{token: token, file: fi}
	c.mu.Unlock()
	return token, nil
}

// tokenUnavailable is the error of a token file that cannot be read.
func (c *Client) tokenUnavailable(err error) error {
	var pe *os.PathError
	reason := err.Error()
	if errors.As(err, &pe) {
		reason = pe.Err.Error()
	}
	return &Error{Code: CodeTokenUnavailable, Message: fmt.Sprintf("cannot read the token file %s named by %s: %s", c.tokenFile, EnvTokenFile, reason)}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func badResponse(msg string) *Error {
	return &Error{Code: CodeBadResponse, Message: "the toolbelt's answer makes no sense to this os: " + msg}
}
