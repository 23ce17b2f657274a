package kernel

import (
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/extension"
)

// Error is a refusal with a stable code and a message that says what to do
// next. It unwraps to one of the extension sentinels (ErrInvalid,
// ErrConflict, ErrNotFound, ErrForbidden, ErrAuthorityReleased), which the
// servers map to a status; errors.Is with another *Error compares codes.
type Error struct {
	Code    string
	Message string
	Kind    error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the sentinel the error belongs to.
func (e *Error) Unwrap() error { return e.Kind }

// Is matches another *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// CodeOf returns the stable code of err ("" when it carries none).
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Refuse returns an *Error of the given kind and code whose message says
// what to do next.
func Refuse(kind error, code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Kind: kind}
}

// Codes the runtime refuses with. Sentinels are for errors.Is; the returned
// errors carry a specific message.
var (
	ErrInvalidEvent        = &Error{Code: "invalid_event", Kind: extension.ErrInvalid}
	ErrCoreTypeReserved    = &Error{Code: "core_type_reserved", Kind: extension.ErrInvalid}
	ErrDataTooLarge        = &Error{Code: "data_too_large", Kind: extension.ErrInvalid}
	ErrParentNotFound      = &Error{Code: "parent_not_found", Kind: extension.ErrInvalid}
	ErrEventConflict       = &Error{Code: "event_conflict", Kind: extension.ErrConflict}
	ErrCausalDepthExceeded = &Error{Code: "causal_depth_exceeded", Kind: extension.ErrInvalid}
	ErrCausalRateExceeded  = &Error{Code: "causal_rate_exceeded", Kind: extension.ErrInvalid}

	ErrWorkNotFound      = &Error{Code: "work_not_found", Kind: extension.ErrNotFound}
	ErrExecutionNotFound = &Error{Code: "execution_not_found", Kind: extension.ErrNotFound}
	ErrWorkState         = &Error{Code: "work_state", Kind: extension.ErrConflict}
	ErrExecutionState    = &Error{Code: "execution_state", Kind: extension.ErrConflict}
	ErrKeyTaken          = &Error{Code: "key_taken", Kind: extension.ErrConflict}
	ErrInvalidWork       = &Error{Code: "invalid_work", Kind: extension.ErrInvalid}
	ErrActorRequired     = &Error{Code: "actor_required", Kind: extension.ErrUnauthorized}

	// The Work-level controls (see Control.Hold, Release, Rebind and
	// Attach) and a manual Work's identity.
	ErrWorkHeld      = &Error{Code: "work_held", Kind: extension.ErrConflict}
	ErrNotHeld       = &Error{Code: "not_held", Kind: extension.ErrConflict}
	ErrSystemHold    = &Error{Code: "system_hold", Kind: extension.ErrConflict}
	ErrAttemptLive   = &Error{Code: "attempt_live", Kind: extension.ErrConflict}
	ErrEventNotFound = &Error{Code: "event_not_found", Kind: extension.ErrNotFound}
	ErrAlreadyInput  = &Error{Code: "already_input", Kind: extension.ErrConflict}
	ErrWorkConflict  = &Error{Code: "work_conflict", Kind: extension.ErrConflict}

	// The rules of where operator events and new Work may go (see
	// WorkBinding): an active scope, and a binding and grants of its own.
	ErrScopeInactive   = &Error{Code: "scope_inactive", Kind: extension.ErrInvalid}
	ErrBindingRequired = &Error{Code: "binding_required", Kind: extension.ErrInvalid}
	ErrUnknownBinding  = &Error{Code: "unknown_binding", Kind: extension.ErrInvalid}
	ErrUnknownGrant    = &Error{Code: "unknown_grant", Kind: extension.ErrInvalid}

	// ErrStaleEpoch: the call names an epoch that is not the execution's
	// current live one, or an owner that does not hold it.
	ErrStaleEpoch = &Error{Code: "stale_epoch", Kind: extension.ErrForbidden}
	// ErrLeaseExpired: the lease is (about to be) gone; the holder stops
	// trusting it LeaseMargin before it expires.
	ErrLeaseExpired = &Error{Code: "lease_expired", Kind: extension.ErrForbidden}
	// ErrNotRunning: the execution or its Work is not running.
	ErrNotRunning = &Error{Code: "not_running", Kind: extension.ErrForbidden}
	// ErrAuthorityReleased: the segment already declared a wait or an
	// outcome. It unwraps to extension.ErrAuthorityReleased (and so to
	// extension.ErrUnauthorized).
	ErrAuthorityReleased  = &Error{Code: "authority_released", Kind: extension.ErrAuthorityReleased}
	ErrInvalidDeclaration = &Error{Code: "invalid_declaration", Kind: extension.ErrInvalid}
)
