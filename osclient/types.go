package osclient

import (
	"encoding/json"
	"errors"

	"github.com/open-conduit/open-conduit/api"
)

// The toolbelt's wire shapes are package api's; the names below keep the
// ones this client always had.

// CallRequest is what Call sends: the body of POST /v1/toolbelt/call
// (api.CallRequest) and the Idempotency-Key header.
type CallRequest struct {
	// Operation is the operation to invoke: a builtin or a granted
	// extension operation.
	Operation string
	// Input is the operation's input, a JSON object; {} when empty.
	Input json.RawMessage
	// RequestID makes the call idempotent: a repeat with the same body
	// replays the committed result, a changed body is request_conflict.
	RequestID string
	// ScopeID, WorkID and ExecutionID are narrowing assertions: when set,
	// the call is refused (403 forbidden) unless the token's authority is
	// that scope, Work or execution.
	ScopeID     string
	WorkID      string
	ExecutionID string
	// IdempotencyKey is sent as the Idempotency-Key header; the toolbelt
	// uses it as the request ID when RequestID is empty.
	IdempotencyKey string
}

// body is the request's wire body.
func (r CallRequest) body() api.CallRequest {
	return api.CallRequest{Operation: r.Operation, Input: r.Input, RequestID: r.RequestID,
		ScopeID: r.ScopeID, WorkID: r.WorkID, ExecutionID: r.ExecutionID}
}

// CallResponse is the 200 body of POST /v1/toolbelt/call.
type CallResponse = api.CallResponse

// apiGuidance names the embedded api.Guidance so that its field Guidance
// is not shadowed by the embedding.
type apiGuidance = api.Guidance

// Guidance is the body of GET /v1/toolbelt/guidance, with the document as
// received.
type Guidance struct {
	apiGuidance
	// Raw is the document as received.
	Raw json.RawMessage `json:"-"`
}

// Operation describes one granted operation.
type Operation = api.Operation

// Serving is the body of GET /v1/toolbelt/serving.
type Serving = api.Serving

// Builtin operations and their inputs and results.
const (
	OpEmit           = api.OpEmit
	OpCreateWork     = api.OpCreateWork
	OpWait           = api.OpWait
	OpDeclareOutcome = api.OpDeclareOutcome
	OpReadContext    = api.OpReadContext
)

type (
	// EmitInput is the input of emit.
	EmitInput = api.EmitInput
	// EmitResult is the result of emit.
	EmitResult = api.EmitResult
	// CreateWorkInput is the input of create_work.
	CreateWorkInput = api.CreateWorkInput
	// EventInput is an Event a call hands the host to accept.
	EventInput = api.EventInput
	// CreateWorkResult is the result of create_work.
	CreateWorkResult = api.CreateWorkResult
	// WaitInput is the input of wait.
	WaitInput = api.WaitInput
	// OutcomeInput is the input of declare_outcome.
	OutcomeInput = api.OutcomeInput
	// DeclaredResult is the result of wait and declare_outcome.
	DeclaredResult = api.DeclaredResult
)

// CapabilityGitCredential is the capability of operations that answer git's
// credential requests.
const CapabilityGitCredential = api.CapabilityGitCredential

// GitCredentialInput is the input of an operation serving git.credential.
type GitCredentialInput = api.GitCredentialInput

// GitCredential is the result of an operation serving git.credential. It
// is a secret, so it is not one of package api's shapes, which never hold
// one.
type GitCredential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Error codes. The toolbelt's own are the first group (api's); the client
// makes the second group itself, for failures that never reached an
// answer.
const (
	CodeUnauthorized         = api.CodeUnauthorized         // 401
	CodeForbidden            = api.CodeForbidden            // 403
	CodeAuthorityReleased    = api.CodeAuthorityReleased    // 403
	CodeWrongCredentialClass = api.CodeWrongCredentialClass // 403
	CodeNotFound             = api.CodeNotFound             // 404
	CodeRequestConflict      = api.CodeRequestConflict      // 409
	CodeInvalidRequest       = api.CodeInvalidRequest       // 422

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
	return errors.As(err, &e) && e.Status == api.OperationErrorStatus
}
