package management

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// The routes of an execution's toolbelt socket: nothing else is served
// there.
const (
	PathToolbeltCall     = "/v1/toolbelt/call"
	PathToolbeltGuidance = "/v1/toolbelt/guidance"
	PathToolbeltServing  = "/v1/toolbelt/serving"
)

// ExecutionHandler serves an execution's own toolbelt socket
// (<state>/runs/<key>/toolbelt.sock, served by runs.Dirs.Serve). It answers
// only POST /v1/toolbelt/call, GET /v1/toolbelt/guidance and GET
// /v1/toolbelt/serving?capability=; every other method and path is 404
// not_found before authentication. An operator credential is 403
// wrong_credential_class. Every request asserts the socket's execution
// (runs.ExecutionFromContext), as execution_id would, so another
// execution's token, or a call asserting another execution, is 403
// forbidden. Errors go through the server's one mapping; the toolbelt's
// precise refusal reasons are logged by the toolbelt, never answered.
func (s *Server) ExecutionHandler(tb extension.Toolbelt) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var serve HandlerFunc
		switch {
		case r.Method == http.MethodPost && r.URL.EscapedPath() == PathToolbeltCall:
			serve = func(r *http.Request) (any, error) { return s.toolbeltCall(w, r, tb) }
		case r.Method == http.MethodGet && r.URL.EscapedPath() == PathToolbeltGuidance:
			serve = func(r *http.Request) (any, error) { return toolbeltGuidance(r, tb) }
		case r.Method == http.MethodGet && r.URL.EscapedPath() == PathToolbeltServing:
			serve = func(r *http.Request) (any, error) { return toolbeltServing(r, tb) }
		default:
			s.writeError(w, r, Errorf(CodeNotFound, "this socket serves only POST %s, GET %s and GET %s", PathToolbeltCall, PathToolbeltGuidance, PathToolbeltServing))
			return
		}
		r, err := s.executionRequest(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out, err := serve(r)
		if err != nil {
			s.writeError(w, r, toolbeltError(err))
			return
		}
		s.writeResult(w, r, out)
	})
}

type tokenKey struct{}

// executionRequest checks the bearer's shape and refuses an operator
// credential; the toolbelt itself authenticates an execution token, which
// goes on the returned request's context.
func (s *Server) executionRequest(r *http.Request) (*http.Request, error) {
	token, present := bearerToken(r)
	if !present {
		return r, Wrap(CodeUnauthorized, extension.ErrUnauthorized, "a bearer token is required: send Authorization: Bearer <token> with the execution's token (OS_TOKEN_FILE)")
	}
	if !bearer.WellFormed(token) {
		return r, Wrap(CodeUnauthorized, extension.ErrUnauthorized, "the bearer token is malformed; send the execution's current token exactly as the token file holds it")
	}
	c, err := s.opts.Credentials.ByDigest(r.Context(), bearer.DigestOf(token))
	switch {
	case err == nil && c.Active():
		return r, Wrap(CodeWrongCredentialClass, ErrWrongCredentialClass,
			"this is an operator credential; an execution's toolbelt socket accepts only that execution's token (operators use the management socket)")
	case err != nil && !errors.Is(err, extension.ErrNotFound):
		return r, err
	}
	if _, ok := runs.ExecutionFromContext(r.Context()); !ok {
		// Not served through a run directory: there is no execution to
		// assert, so nothing is served (fail closed).
		return r, Wrap(CodeForbidden, extension.ErrForbidden, "this request did not arrive on an execution's toolbelt socket")
	}
	return r.WithContext(context.WithValue(r.Context(), tokenKey{}, token)), nil
}

// socketAssertions are the request's assertions: the socket's execution.
func socketAssertions(r *http.Request) (string, extension.Assertions) {
	token, _ := r.Context().Value(tokenKey{}).(string)
	exe, _ := runs.ExecutionFromContext(r.Context())
	return token, extension.Assertions{SocketExecution: exe}
}

// toolbeltError maps the toolbelt's refusals onto the envelope: every
// refusal of the check chain stays the bare forbidden (or
// authority_released), telling a forged or superseded caller nothing; a
// refusal of the request's shape keeps its message, written from the
// caller's own request, never a token or secret.
func toolbeltError(err error) error { return runtimeErr(err, true) }

// ToolbeltCallRequest is the body of POST /v1/toolbelt/call.
type ToolbeltCallRequest struct {
	Operation   string          `json:"operation"`
	Input       json.RawMessage `json:"input"`
	RequestID   string          `json:"request_id,omitempty"`
	ScopeID     string          `json:"scope_id,omitempty"`
	WorkID      string          `json:"work_id,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
}

// ToolbeltCallResponse is its 200 body.
type ToolbeltCallResponse struct {
	Operation string          `json:"operation"`
	Result    json.RawMessage `json:"result"`
	Replayed  bool            `json:"replayed"`
}

func (s *Server) toolbeltCall(w http.ResponseWriter, r *http.Request, tb extension.Toolbelt) (any, error) {
	body, _, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	r = withBody(r, body)
	var req ToolbeltCallRequest
	if err := DecodeBody(r, &req); err != nil {
		return nil, err
	}
	if req.Operation == "" {
		return nil, Errorf(CodeInvalidRequest, "operation is required: a builtin (emit, create_work, wait, declare_outcome, read_context) or a granted operation")
	}
	if len(req.Input) == 0 {
		return nil, Errorf(CodeInvalidRequest, "input is required: the operation's input object ({} when it takes none)")
	}
	if key := r.Header.Values("Idempotency-Key"); len(key) > 0 {
		if len(key) > 1 || key[0] == "" {
			return nil, Errorf(CodeInvalidRequest, "send at most one non-empty Idempotency-Key header")
		}
		if req.RequestID == "" {
			req.RequestID = key[0]
		} else if req.RequestID != key[0] {
			return nil, Errorf(CodeInvalidRequest, "request_id and the Idempotency-Key header differ; send one of them, or the same value in both")
		}
	}
	token, assert := socketAssertions(r)
	assert.ScopeID, assert.WorkID, assert.ExecutionID = req.ScopeID, req.WorkID, req.ExecutionID
	res, err := tb.Call(r.Context(), token, extension.CallRequest{
		Operation: req.Operation, Input: req.Input, RequestID: req.RequestID, Assertions: assert,
	})
	if err != nil {
		return nil, err
	}
	return ToolbeltCallResponse{Operation: res.Operation, Result: res.Result, Replayed: res.Replayed}, nil
}

// ToolbeltGuidance is the body of GET /v1/toolbelt/guidance.
type ToolbeltGuidance struct {
	Guidance   string              `json:"guidance"`
	Operations []ToolbeltOperation `json:"operations"`
}

// ToolbeltOperation describes one granted operation.
type ToolbeltOperation struct {
	Name         string          `json:"name"`
	Summary      string          `json:"summary"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Guidance     string          `json:"guidance"`
	Capabilities []string        `json:"capabilities"`
}

func toolbeltGuidance(r *http.Request, tb extension.Toolbelt) (any, error) {
	if err := NoQuery(r); err != nil {
		return nil, err
	}
	token, assert := socketAssertions(r)
	g, err := tb.Guidance(r.Context(), token, assert)
	if err != nil {
		return nil, err
	}
	out := ToolbeltGuidance{Guidance: g.Guidance, Operations: []ToolbeltOperation{}}
	for _, op := range g.Operations {
		caps := op.Capabilities
		if caps == nil {
			caps = []string{}
		}
		schema := op.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Operations = append(out.Operations, ToolbeltOperation{Name: op.Name, Summary: op.Summary, InputSchema: schema, Guidance: op.Guidance, Capabilities: caps})
	}
	return out, nil
}

// ToolbeltServing is the body of GET /v1/toolbelt/serving.
type ToolbeltServing struct {
	Capability string   `json:"capability"`
	Operations []string `json:"operations"`
}

func toolbeltServing(r *http.Request, tb extension.Toolbelt) (any, error) {
	q, err := Query(r, "capability")
	if err != nil {
		return nil, err
	}
	capability := q.Get("capability")
	if capability == "" {
		return nil, Errorf(CodeInvalidRequest, "the capability query parameter is required, for example ?capability=git.credential")
	}
	token, assert := socketAssertions(r)
	ops, err := tb.Serving(r.Context(), token, assert, capability)
	if err != nil {
		return nil, err
	}
	if ops == nil {
		ops = []string{}
	}
	return ToolbeltServing{Capability: capability, Operations: ops}, nil
}

// ToolbeltTokens adapts the toolbelt's token records to ExecutionTokens,
// so that the management socket recognises an execution token (403
// wrong_credential_class on every route) and revokes one by id:
// management.Options{ExecutionTokens: management.ToolbeltTokens(tb)}.
func ToolbeltTokens(tb *toolbelt.Toolbelt) ExecutionTokens { return toolbeltTokens{tb} }

type toolbeltTokens struct{ tb *toolbelt.Toolbelt }

func (t toolbeltTokens) ByDigest(ctx context.Context, d Digest) (ExecutionToken, error) {
	tok, err := t.tb.TokenByDigest(ctx, d)
	if err != nil {
		return ExecutionToken{}, err
	}
	return ExecutionToken{ID: tok.ID, ExecutionID: tok.Execution, ExpiresAt: tok.ExpiresAt, RevokedAt: tok.RevokedAt}, nil
}

// Revoke revokes the token at the toolbelt's own clock; at is the
// server's view of now and is not needed.
func (t toolbeltTokens) Revoke(ctx context.Context, id string, _ time.Time) error {
	return t.tb.Revoke(ctx, id)
}
