package toolbeltapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/runs"
)

// The routes are api.PathToolbeltCall, api.PathToolbeltGuidance and
// api.PathToolbeltServing.
const (
	PathCall     = api.PathToolbeltCall
	PathGuidance = api.PathToolbeltGuidance
	PathServing  = api.PathToolbeltServing
)

// Operators is the port through which the socket learns whether a bearer
// token is an operator's credential, to refuse it by name.
type Operators interface {
	// IsOperator reports whether digest, the SHA-256 of a bearer token's
	// text, is an active operator credential's. An unknown or revoked one
	// is false with no error.
	IsOperator(ctx context.Context, digest bearer.Digest) (bool, error)
}

// Options are what the handler serves and asks.
type Options struct {
	// Toolbelt answers every call (required).
	Toolbelt extension.Toolbelt
	// Operators recognises operator credentials (required).
	Operators Operators
	// Logger receives the failures that map to no code; never a token or
	// a body. Nil discards.
	Logger *slog.Logger
	// Refused, when set, is told the code of every refusal answered.
	Refused func(code string)
}

// handler serves one daemon's toolbelt sockets.
type handler struct {
	tb  extension.Toolbelt
	ops Operators
	out httpapi.Writer
}

// New returns the handler of every execution's own toolbelt socket
// (<state>/runs/<key>/toolbelt.sock, served by runs.Dirs.Serve). It
// answers only POST /v1/toolbelt/call, GET /v1/toolbelt/guidance and GET
// /v1/toolbelt/serving?capability=; every other method and path is 404
// not_found before authentication. An operator credential is 403
// wrong_credential_class. Every request asserts the socket's execution
// (runs.ExecutionFromContext), as execution_id would, so another
// execution's token, or a call asserting another execution, is 403
// forbidden. Errors go through the one mapping of package httpapi, with
// refusals of authority kept bare; the toolbelt's precise refusal reasons
// are logged by the toolbelt, never answered.
//
// A missing Toolbelt or Operators is a composition error: New panics.
func New(opts Options) http.Handler {
	if opts.Toolbelt == nil || opts.Operators == nil {
		panic("toolbeltapi: Options need a Toolbelt and Operators")
	}
	return &handler{tb: opts.Toolbelt, ops: opts.Operators, out: httpapi.Writer{
		Log: opts.Logger, Failed: "toolbelt request failed", Bare: true, Refused: opts.Refused,
		Caller: func(r *http.Request) string {
			exe, _ := runs.ExecutionFromContext(r.Context())
			return "execution:" + exe
		},
	}}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var serve httpapi.HandlerFunc
	switch {
	case r.Method == http.MethodPost && r.URL.EscapedPath() == PathCall:
		serve = func(r *http.Request) (any, error) { return h.call(w, r) }
	case r.Method == http.MethodGet && r.URL.EscapedPath() == PathGuidance:
		serve = h.guidance
	case r.Method == http.MethodGet && r.URL.EscapedPath() == PathServing:
		serve = h.serving
	default:
		h.out.Error(w, r, httpapi.Errorf(httpapi.CodeNotFound, "this socket serves only POST %s, GET %s and GET %s", PathCall, PathGuidance, PathServing))
		return
	}
	r, err := h.executionRequest(r)
	if err != nil {
		h.out.Error(w, r, err)
		return
	}
	out, err := serve(r)
	if err != nil {
		h.out.Error(w, r, err)
		return
	}
	h.out.Result(w, r, out)
}

type tokenKey struct{}

// executionRequest checks the bearer's shape and refuses an operator
// credential; the toolbelt itself authenticates an execution token, which
// goes on the returned request's context.
func (h *handler) executionRequest(r *http.Request) (*http.Request, error) {
	token, present := httpapi.BearerToken(r)
	if !present {
		return r, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized, "a bearer token is required: send Authorization: Bearer <token> with the execution's token (OS_TOKEN_FILE)")
	}
	if !bearer.WellFormed(token) {
		return r, httpapi.Wrap(httpapi.CodeUnauthorized, extension.ErrUnauthorized, "the bearer token is malformed; send the execution's current token exactly as the token file holds it")
	}
	operator, err := h.ops.IsOperator(r.Context(), bearer.DigestOf(token))
	switch {
	case err != nil:
		return r, err
	case operator:
		return r, httpapi.Wrap(httpapi.CodeWrongCredentialClass, httpapi.ErrWrongCredentialClass,
			"this is an operator credential; an execution's toolbelt socket accepts only that execution's token (operators use the management socket)")
	}
	if _, ok := runs.ExecutionFromContext(r.Context()); !ok {
		// Not served through a run directory: there is no execution to
		// assert, so nothing is served (fail closed).
		return r, httpapi.Wrap(httpapi.CodeForbidden, extension.ErrForbidden, "this request did not arrive on an execution's toolbelt socket")
	}
	return r.WithContext(context.WithValue(r.Context(), tokenKey{}, token)), nil
}

// socketAssertions are the request's assertions: the socket's execution.
func socketAssertions(r *http.Request) (string, extension.Assertions) {
	token, _ := r.Context().Value(tokenKey{}).(string)
	exe, _ := runs.ExecutionFromContext(r.Context())
	return token, extension.Assertions{SocketExecution: exe}
}

// call serves POST /v1/toolbelt/call. A refusal of the check chain stays
// the bare forbidden (or authority_released), telling a forged or
// superseded caller nothing; a refusal of the request's shape keeps its
// message, written from the caller's own request, never a token or secret.
func (h *handler) call(w http.ResponseWriter, r *http.Request) (any, error) {
	body, err := httpapi.ReadJSON(w, r)
	if err != nil {
		return nil, err
	}
	r = httpapi.WithBody(r, body)
	var req api.CallRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	if req.Operation == "" {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "operation is required: a builtin (emit, create_work, wait, declare_outcome, read_context) or a granted operation")
	}
	if len(req.Input) == 0 {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "input is required: the operation's input object ({} when it takes none)")
	}
	if key := r.Header.Values("Idempotency-Key"); len(key) > 0 {
		if len(key) > 1 || key[0] == "" {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "send at most one non-empty Idempotency-Key header")
		}
		if req.RequestID == "" {
			req.RequestID = key[0]
		} else if req.RequestID != key[0] {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "request_id and the Idempotency-Key header differ; send one of them, or the same value in both")
		}
	}
	token, assert := socketAssertions(r)
	assert.ScopeID, assert.WorkID, assert.ExecutionID = req.ScopeID, req.WorkID, req.ExecutionID
	res, err := h.tb.Call(r.Context(), token, extension.CallRequest{
		Operation: req.Operation, Input: req.Input, RequestID: req.RequestID, Assertions: assert,
	})
	if err != nil {
		return nil, err
	}
	return CallOut(res), nil
}

// Operation describes one granted operation.
type Operation struct {
	Name         string          `json:"name"`
	Summary      string          `json:"summary"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Guidance     string          `json:"guidance"`
	Capabilities []string        `json:"capabilities"`
}

func (h *handler) guidance(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	token, assert := socketAssertions(r)
	g, err := h.tb.Guidance(r.Context(), token, assert)
	if err != nil {
		return nil, err
	}
	return GuidanceOut(g), nil
}

func (h *handler) serving(r *http.Request) (any, error) {
	q, err := httpapi.Query(r, "capability")
	if err != nil {
		return nil, err
	}
	capability := q.Get("capability")
	if capability == "" {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "the capability query parameter is required, for example ?capability=git.credential")
	}
	token, assert := socketAssertions(r)
	ops, err := h.tb.Serving(r.Context(), token, assert, capability)
	if err != nil {
		return nil, err
	}
	return ServingOut(capability, ops), nil
}
