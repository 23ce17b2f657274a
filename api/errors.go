package api

import "net/http"

// ErrorEnvelope is the body of every refusal on both sockets.
type ErrorEnvelope struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the envelope's content: a stable code and a message for
// people that says what to do next. Neither ever holds a token, a digest,
// a secret, a configured value or a backend's error text.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Diagnostics, for invalid_config, are the configuration's problems;
	// for invalid_package, the package manifest's (pointers into
	// open-conduit-package.json).
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// The envelope's codes (docs/api.md, docs/toolbelt.md). Each has the
// status Status returns.
const (
	CodeUnauthorized           = "unauthorized"
	CodeForbidden              = "forbidden"
	CodeForbiddenRole          = "forbidden_role"
	CodeWrongCredentialClass   = "wrong_credential_class"
	CodeAuthorityReleased      = "authority_released"
	CodeNotFound               = "not_found"
	CodeMethodNotAllowed       = "method_not_allowed"
	CodeIdempotencyConflict    = "idempotency_conflict"
	CodeRequestConflict        = "request_conflict"
	CodeConflict               = "conflict"
	CodeScopeInUse             = "scope_in_use"
	CodeStaleGeneration        = "stale_generation"
	CodePayloadTooLarge        = "payload_too_large"
	CodeUnsupportedMediaType   = "unsupported_media_type"
	CodeInvalidRequest         = "invalid_request"
	CodeInvalidConfig          = "invalid_config"
	CodeInvalidPackage         = "invalid_package"
	CodeInvalidCursor          = "invalid_cursor"
	CodeCursorMismatch         = "cursor_mismatch"
	CodeCursorExpired          = "cursor_expired"
	CodeIdempotencyKeyRequired = "idempotency_key_required"
	CodeRangeNotSatisfiable    = "range_not_satisfiable"
	CodeCausalDepthExceeded    = "causal_depth_exceeded"
	CodeCausalRateExceeded     = "causal_rate_exceeded"
	CodeInternal               = "internal"

	// CodeAttemptLive refuses a rebind while the Work has a live attempt
	// (running, stopping or parked); CodeSystemHold a release of a hold
	// the system set (retry the Work once its cause is fixed).
	CodeAttemptLive = "attempt_live"
	CodeSystemHold  = "system_hold"

	// CodeGateFailed is the refusal of a gate that panicked or answered
	// with something other than an operation error: the host fails
	// closed. It is sent like an extension's own code, 422.
	CodeGateFailed = "gate_failed"
)

// codeStatus is the one table from an envelope code to its status.
var codeStatus = map[string]int{
	CodeUnauthorized:           http.StatusUnauthorized,
	CodeForbidden:              http.StatusForbidden,
	CodeForbiddenRole:          http.StatusForbidden,
	CodeWrongCredentialClass:   http.StatusForbidden,
	CodeAuthorityReleased:      http.StatusForbidden,
	CodeNotFound:               http.StatusNotFound,
	CodeMethodNotAllowed:       http.StatusMethodNotAllowed,
	CodeIdempotencyConflict:    http.StatusConflict,
	CodeRequestConflict:        http.StatusConflict,
	CodeConflict:               http.StatusConflict,
	CodeScopeInUse:             http.StatusConflict,
	CodeStaleGeneration:        http.StatusConflict,
	CodePayloadTooLarge:        http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:   http.StatusUnsupportedMediaType,
	CodeInvalidRequest:         http.StatusUnprocessableEntity,
	CodeInvalidConfig:          http.StatusUnprocessableEntity,
	CodeInvalidPackage:         http.StatusUnprocessableEntity,
	CodeInvalidCursor:          http.StatusUnprocessableEntity,
	CodeCursorMismatch:         http.StatusUnprocessableEntity,
	CodeCursorExpired:          http.StatusUnprocessableEntity,
	CodeIdempotencyKeyRequired: http.StatusBadRequest,
	CodeRangeNotSatisfiable:    http.StatusRequestedRangeNotSatisfiable,
	CodeCausalDepthExceeded:    http.StatusUnprocessableEntity,
	CodeCausalRateExceeded:     http.StatusTooManyRequests,
	CodeInternal:               http.StatusInternalServerError,
	CodeAttemptLive:            http.StatusConflict,
	CodeSystemHold:             http.StatusConflict,
	CodeGateFailed:             http.StatusUnprocessableEntity,
}

// Status returns the HTTP status a code is always sent with, and false
// for a code with no fixed status. An extension's own refusal (an
// operation's or an action's handler) is sent as 422 with its own code.
func Status(code string) (int, bool) {
	s, ok := codeStatus[code]
	return s, ok
}

// OperationErrorStatus is the status of an extension's own refusal.
const OperationErrorStatus = http.StatusUnprocessableEntity

// The kernel's and the toolbelt's refusal codes. An extension or a call
// record may see them (ToolbeltCall.Result, a handler's error); on the
// sockets each is sent under the envelope code of its kind (not_found,
// conflict, invalid_request, forbidden), except causal_depth_exceeded,
// causal_rate_exceeded and authority_released, which keep their own.
const (
	CodeInvalidEvent        = "invalid_event"
	CodeCoreTypeReserved    = "core_type_reserved"
	CodeDataTooLarge        = "data_too_large"
	CodeParentNotFound      = "parent_not_found"
	CodeEventConflict       = "event_conflict"
	CodeWorkNotFound        = "work_not_found"
	CodeExecutionNotFound   = "execution_not_found"
	CodeWorkState           = "work_state"
	CodeExecutionState      = "execution_state"
	CodeKeyTaken            = "key_taken"
	CodeInvalidWork         = "invalid_work"
	CodeActorRequired       = "actor_required"
	CodeScopeInactive       = "scope_inactive"
	CodeBindingRequired     = "binding_required"
	CodeStaleEpoch          = "stale_epoch"
	CodeLeaseExpired        = "lease_expired"
	CodeNotRunning          = "not_running"
	CodeInvalidDeclaration  = "invalid_declaration"
	CodeInvalidAction       = "invalid_action"
	CodeActionNotFound      = "action_not_found"
	CodeUnknownBinding      = "unknown_binding"
	CodeUnknownGrant        = "unknown_grant"
	CodeFamilyNotAllowed    = "family_not_allowed"
	CodeCorrelationNotOwned = "correlation_not_owned"
	CodeWorkHeld            = "work_held"
	CodeNotHeld             = "not_held"
	CodeEventNotFound       = "event_not_found"
	CodeAlreadyInput        = "already_input"
	// CodeWorkConflict: a manual Work's derived id names a Work another
	// request created; the management API sends it as
	// idempotency_conflict.
	CodeWorkConflict = "work_conflict"
)
