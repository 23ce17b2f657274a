package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// Code is a stable error code of the API's envelope.
type Code string

// The API's error codes. docs/api.md lists each with its status.
const (
	CodeUnauthorized           Code = "unauthorized"
	CodeForbidden              Code = "forbidden"
	CodeForbiddenRole          Code = "forbidden_role"
	CodeWrongCredentialClass   Code = "wrong_credential_class"
	CodeAuthorityReleased      Code = "authority_released"
	CodeNotFound               Code = "not_found"
	CodeMethodNotAllowed       Code = "method_not_allowed"
	CodeIdempotencyConflict    Code = "idempotency_conflict"
	CodeRequestConflict        Code = "request_conflict"
	CodeConflict               Code = "conflict"
	CodeScopeInUse             Code = "scope_in_use"
	CodeStaleGeneration        Code = "stale_generation"
	CodePayloadTooLarge        Code = "payload_too_large"
	CodeUnsupportedMediaType   Code = "unsupported_media_type"
	CodeInvalidRequest         Code = "invalid_request"
	CodeInvalidConfig          Code = "invalid_config"
	CodeInvalidPackage         Code = "invalid_package"
	CodeInvalidCursor          Code = "invalid_cursor"
	CodeCursorMismatch         Code = "cursor_mismatch"
	CodeCursorExpired          Code = "cursor_expired"
	CodeIdempotencyKeyRequired Code = "idempotency_key_required"
	CodeRangeNotSatisfiable    Code = "range_not_satisfiable"
	CodeCausalDepthExceeded    Code = "causal_depth_exceeded"
	CodeCausalRateExceeded     Code = "causal_rate_exceeded"
	CodeInternal               Code = "internal"
	CodeAttemptLive            Code = "attempt_live"
	CodeSystemHold             Code = "system_hold"
)

// sent is every code this server sends in its envelope. Each one's status
// is the wire's, api.Status: the one table from code to HTTP status lives
// in package api, beside the codes, so that a client and the server cannot
// disagree about it.
var sent = map[Code]bool{
	CodeUnauthorized:           true,
	CodeForbidden:              true,
	CodeForbiddenRole:          true,
	CodeWrongCredentialClass:   true,
	CodeAuthorityReleased:      true,
	CodeNotFound:               true,
	CodeMethodNotAllowed:       true,
	CodeIdempotencyConflict:    true,
	CodeRequestConflict:        true,
	CodeConflict:               true,
	CodeScopeInUse:             true,
	CodeStaleGeneration:        true,
	CodePayloadTooLarge:        true,
	CodeUnsupportedMediaType:   true,
	CodeInvalidRequest:         true,
	CodeInvalidConfig:          true,
	CodeInvalidPackage:         true,
	CodeInvalidCursor:          true,
	CodeCursorMismatch:         true,
	CodeCursorExpired:          true,
	CodeIdempotencyKeyRequired: true,
	CodeRangeNotSatisfiable:    true,
	CodeCausalDepthExceeded:    true,
	CodeCausalRateExceeded:     true,
	CodeInternal:               true,
	CodeAttemptLive:            true,
	CodeSystemHold:             true,
}

// Status returns the HTTP status of a code; an unknown code is 500.
func (c Code) Status() int {
	if s, ok := api.Status(string(c)); ok && sent[c] {
		return s
	}
	return http.StatusInternalServerError
}

// Sentinel errors of this package. Backends and handlers wrap them (or the
// sentinels of package extension) with %w; the error writer maps them with
// errors.Is.
var (
	ErrForbiddenRole          = errors.New("forbidden role")
	ErrWrongCredentialClass   = errors.New("wrong credential class")
	ErrMethodNotAllowed       = errors.New("method not allowed")
	ErrIdempotencyConflict    = errors.New("idempotency conflict")
	ErrIdempotencyKeyRequired = errors.New("idempotency key required")
	ErrScopeInUse             = errors.New("scope in use")
	ErrStaleGeneration        = errors.New("stale generation")
	ErrPayloadTooLarge        = errors.New("payload too large")
	ErrUnsupportedMediaType   = errors.New("unsupported media type")
	ErrInvalidConfig          = errors.New("invalid config")
	ErrInvalidCursor          = errors.New("invalid cursor")
	ErrCursorMismatch         = errors.New("cursor mismatch")
	ErrCursorExpired          = errors.New("cursor expired")
)

// sentinels is the one table from a sentinel error to its code and its
// generic message, in the order the sentinels are tried:
// ErrAuthorityReleased wraps ErrUnauthorized, so it comes first. A
// kernel.Error (the kernel's and the toolbelt's refusals) is mapped by the
// sentinel it unwraps to, keeping its own message, except that a refusal of
// authority (authority set) on a socket that keeps them bare answers only
// the generic message.
var sentinels = []struct {
	err       error
	code      Code
	msg       string
	authority bool
}{
	{extension.ErrAuthorityReleased, CodeAuthorityReleased, "this token's segment already declared a wait or an outcome; its authority is released", true},
	{extension.ErrUnauthorized, CodeUnauthorized, "a valid operator bearer token is required", true},
	{ErrWrongCredentialClass, CodeWrongCredentialClass, "this credential class is not accepted on this socket", false},
	{ErrForbiddenRole, CodeForbiddenRole, "your credential's role does not allow this request", false},
	{extension.ErrForbidden, CodeForbidden, "this request is outside your authority", true},
	{extension.ErrNotFound, CodeNotFound, "no such record; check the id", false},
	{ErrMethodNotAllowed, CodeMethodNotAllowed, "this path does not accept that method", false},
	{ErrIdempotencyConflict, CodeIdempotencyConflict, "this Idempotency-Key was already used for a different request; use a new key", false},
	{extension.ErrRequestConflict, CodeRequestConflict, "this request id was already used with a different body; use a new request id", false},
	{ErrScopeInUse, CodeScopeInUse, "the scope still has unfinished Work; finish or cancel it first", false},
	{ErrStaleGeneration, CodeStaleGeneration, "the configuration changed since you read it; read it again and retry", false},
	{extension.ErrConflict, CodeConflict, "the request conflicts with the current state", false},
	{ErrPayloadTooLarge, CodePayloadTooLarge, "the request body is larger than 1 MiB", false},
	{ErrUnsupportedMediaType, CodeUnsupportedMediaType, "send the body as Content-Type: application/json", false},
	{ErrIdempotencyKeyRequired, CodeIdempotencyKeyRequired, "this request needs an Idempotency-Key header; send a fresh unique key and reuse it only to retry the same request", false},
	{ErrInvalidConfig, CodeInvalidConfig, "the configuration does not validate", false},
	{ErrInvalidCursor, CodeInvalidCursor, "the cursor is not valid; start the listing again without a cursor", false},
	{ErrCursorMismatch, CodeCursorMismatch, "the cursor belongs to another listing or other filters; start again without a cursor", false},
	{ErrCursorExpired, CodeCursorExpired, "the cursor has expired; start the listing again without a cursor", false},
	{extension.ErrInvalid, CodeInvalidRequest, "the request is not valid", false},
}

// Error is a refusal whose message is safe to show the caller: it was
// written by this package or a handler from safe parts only (never a
// token, a secret, a configured value or a backend's error text). Err, if
// set, is kept for errors.Is and logs and never shown.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Diagnostics, for invalid_config, are the configuration's problems;
	// they go into the envelope as they are, and never hold a configured
	// value.
	Diagnostics []api.Diagnostic
	// Header is sent with the envelope, for a refusal that the protocol
	// answers with a header of its own (Content-Range on a refused range,
	// Retry-After). Content-Type, Cache-Control and ETag are the
	// envelope's and are not taken from here.
	Header http.Header
}

func (e *Error) Error() string {
	if e.Err != nil {
		return string(e.Code) + ": " + e.Message + ": " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message. The arguments must be
// safe to show: ids, names, field pointers, numbers.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with a safe message that keeps err for
// errors.Is and the server's log.
func Wrap(code Code, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// kernelCodes are the kernel's refusals that keep their own code in the
// envelope, because a caller acts on them differently from a malformed
// request: a causal bound means the chain of events must stop (or slow
// down), not that the request should be corrected.
var kernelCodes = map[string]struct {
	code Code
	msg  string // when the kernel gave none
}{
	kernel.ErrCausalDepthExceeded.Code: {CodeCausalDepthExceeded, "this event chain is as deep as the configuration allows (limits.causal_max_depth); start a new root instead of deriving from this one"},
	kernel.ErrCausalRateExceeded.Code:  {CodeCausalRateExceeded, "this event chain emitted as many events this minute as the configuration allows (limits.causal_per_minute); slow down"},
	kernel.ErrAttemptLive.Code:         {CodeAttemptLive, "the Work has a live attempt; wait for it to end or cancel it first"},
	kernel.ErrSystemHold.Code:          {CodeSystemHold, "the system holds the Work; fix the cause and retry the Work"},
	kernel.ErrWorkConflict.Code:        {CodeIdempotencyConflict, "this Idempotency-Key was already used for a different request; use a new key for a new request"},
}

// classify maps an error to its status, code and safe message. It is the
// only place that decides what an error means to the caller. With bare, a
// kernel refusal of authority keeps only its sentinel's generic message:
// the toolbelt tells a caller whose token failed a check nothing more,
// while an operator control names the reason. known is false for an error
// that matched nothing: a 500 whose text the caller never sees.
func classify(err error, bare bool) (status int, code, message string, known bool) {
	var pe *Error
	if errors.As(err, &pe) {
		c := pe.Code
		if !sent[c] {
			return http.StatusInternalServerError, string(CodeInternal), internalMessage, false
		}
		return c.Status(), string(c), pe.Message, true
	}
	var ke *kernel.Error
	if errors.As(err, &ke) {
		if kc, ok := kernelCodes[ke.Code]; ok {
			msg := ke.Message
			if msg == "" {
				msg = kc.msg
			}
			return kc.code.Status(), string(kc.code), msg, true
		}
		for _, s := range sentinels {
			if !errors.Is(err, s.err) {
				continue
			}
			msg := ke.Message
			if msg == "" || (s.authority && bare) {
				msg = s.msg
			}
			return s.code.Status(), string(s.code), msg, true
		}
	}
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return http.StatusUnprocessableEntity, oe.Code, oe.Message, true
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code.Status(), string(s.code), s.msg, true
		}
	}
	return http.StatusInternalServerError, string(CodeInternal), internalMessage, false
}

const internalMessage = "the daemon failed to handle the request; see its log, and retry"
