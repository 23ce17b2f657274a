package osclient

import (
	"encoding/json"
	"errors"
)

// CallRequest is the body of POST /v1/toolbelt/call.
type CallRequest struct {
	// Operation is the operation to invoke: a builtin or a granted
	// extension operation.
	Operation string `json:"operation"`
	// Input is the operation's input, a JSON object; {} when empty.
	Input json.RawMessage `json:"input"`
	// RequestID makes the call idempotent: a repeat with the same body
	// replays the committed result, a changed body is request_conflict.
	RequestID string `json:"request_id,omitempty"`
	// ScopeID, WorkID and ExecutionID are narrowing assertions: when set,
	// the call is refused (403 forbidden) unless the token's authority is
	// that scope, Work or execution.
	ScopeID     string `json:"scope_id,omitempty"`
	WorkID      string `json:"work_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// IdempotencyKey is sent as the Idempotency-Key header; the toolbelt
	// uses it as the request ID when RequestID is empty.
	IdempotencyKey string `json:"-"`
}

// CallResponse is the 200 body of POST /v1/toolbelt/call.
type CallResponse struct {
	Operation string          `json:"operation"`
	Result    json.RawMessage `json:"result"`
	// Replayed is true when the result is the one committed for an earlier
	// call with the same request ID.
	Replayed bool `json:"replayed"`
}

// Guidance is the body of GET /v1/toolbelt/guidance.
type Guidance struct {
	// Guidance is agent guidance in Markdown for the token's granted
	// operations as a whole; os mcp serves it as its instructions.
	Guidance   string      `json:"guidance"`
	Operations []Operation `json:"operations"`
	// Raw is the document as received.
	Raw json.RawMessage `json:"-"`
}

// Operation describes one granted operation.
type Operation struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// InputSchema is a JSON Schema of the operation's input object.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Guidance is the operation's own guidance, in Markdown.
	Guidance string `json:"guidance,omitempty"`
	// Capabilities lists what the operation serves (git.credential).
	Capabilities []string `json:"capabilities,omitempty"`
}

// Serving is the body of GET /v1/toolbelt/serving.
type Serving struct {
	Capability string `json:"capability"`
	// Operations are the granted operations that serve the capability, in
	// the toolbelt's order; a client uses the first.
	Operations []string `json:"operations"`
}

// Builtin operations and their inputs and results.
const (
	OpEmit           = "emit"
	OpCreateWork     = "create_work"
	OpWait           = "wait"
	OpDeclareOutcome = "declare_outcome"
	OpReadContext    = "read_context"
)

// EmitInput is the input of emit.
type EmitInput struct {
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
}

// EmitResult is the result of emit.
type EmitResult struct {
	EventID string `json:"event_id"`
	Seq     int64  `json:"seq"`
}

// CreateWorkInput is the input of create_work.
type CreateWorkInput struct {
	Binding        string      `json:"binding,omitempty"`
	CorrelationKey string      `json:"correlation_key,omitempty"`
	Input          *EventInput `json:"input,omitempty"`
	Grants         []string    `json:"grants,omitempty"`
}

// EventInput is an Event a call hands the host to accept.
type EventInput struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// CreateWorkResult is the result of create_work.
type CreateWorkResult struct {
	WorkID string `json:"work_id"`
}

// WaitInput is the input of wait.
type WaitInput struct {
	Types   []string `json:"types,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
}

// OutcomeInput is the input of declare_outcome.
type OutcomeInput struct {
	Outcome string          `json:"outcome"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// DeclaredResult is the result of wait and declare_outcome.
type DeclaredResult struct {
	// Declared is "wait" or "outcome".
	Declared string          `json:"declared"`
	Wait     json.RawMessage `json:"wait,omitempty"`
}

// CapabilityGitCredential is the capability of operations that answer git's
// credential requests.
const CapabilityGitCredential = "git.credential"

// GitCredentialInput is the input of an operation serving git.credential.
type GitCredentialInput struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Path     string `json:"path,omitempty"`
	Username string `json:"username,omitempty"`
}

// GitCredential is the result of an operation serving git.credential.
type GitCredential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Error codes. The toolbelt's own are the first group; the client makes the
// second group itself, for failures that never reached an answer.
const (
	CodeUnauthorized         = "unauthorized"           // 401
	CodeForbidden            = "forbidden"              // 403
	CodeAuthorityReleased    = "authority_released"     // 403
	CodeWrongCredentialClass = "wrong_credential_class" // 403
	CodeNotFound             = "not_found"              // 404
	CodeRequestConflict      = "request_conflict"       // 409
	CodeInvalidRequest       = "invalid_request"        // 422

	CodeEnvironmentUnset    = "environment_unset"
	CodeTokenUnavailable    = "token_unavailable"
	CodeEndpointUnreachable = "endpoint_unreachable"
	CodeBadResponse         = "bad_response"
)

// Error is a refusal by the toolbelt (Status is its HTTP status) or a
// failure to get an answer (Status 0). Code is stable; Message is for a
// person and never holds the token.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// CodeOf returns the code of an *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsAuthorityReleased reports whether the call was refused because this
// segment already declared a wait or an outcome: the declaration landed, and
// the process should exit.
func IsAuthorityReleased(err error) bool { return CodeOf(err) == CodeAuthorityReleased }

// IsForbidden reports a bare 403 forbidden refusal.
func IsForbidden(err error) bool { return CodeOf(err) == CodeForbidden }

// IsRequestConflict reports a request ID reused with a different body.
func IsRequestConflict(err error) bool { return CodeOf(err) == CodeRequestConflict }

// IsOperationError reports a 422 refusal with an extension handler's own
// code (or invalid_request).
func IsOperationError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == 422
}
