package extension

import (
	"errors"
	"fmt"
)

// Sentinel errors. Layers wrap them with %w; the management and toolbelt
// servers map them to status codes with errors.Is in one place.
var (
	// ErrUnauthorized: the credential is missing, unknown, revoked, expired,
	// or does not carry the authority the call needs.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: a genuine caller asked for something outside its
	// authority. The toolbelt answers every refusal but ErrAuthorityReleased
	// with it (403 forbidden).
	ErrForbidden = errors.New("forbidden")
	// ErrAuthorityReleased: the token is genuine, but its segment already
	// declared a wait or an outcome, so it may not act again. It wraps
	// ErrUnauthorized.
	ErrAuthorityReleased = fmt.Errorf("authority released: %w", ErrUnauthorized)
	// ErrRequestConflict: a request ID was reused with a different body.
	ErrRequestConflict = errors.New("request conflict")
	// ErrInvalid: a registration or request breaks a rule of its shape.
	ErrInvalid = errors.New("invalid")
	// ErrConflict: a name is already taken.
	ErrConflict = errors.New("conflict")
	// ErrNotFound: the named thing does not exist (or is not visible).
	ErrNotFound = errors.New("not found")
)

// OperationError is a handler's refusal: a stable code of the extension's
// own and a message for the caller. The toolbelt answers it with 422 and the
// code and message verbatim, so neither may contain a secret.
type OperationError struct {
	Code    string
	Message string
}

func (e *OperationError) Error() string { return e.Code + ": " + e.Message }

// GateRefusal wraps a gate's refusal and names the gate that refused.
type GateRefusal struct {
	Gate string
	Err  error
}

func (e *GateRefusal) Error() string { return "refused by gate " + e.Gate + ": " + e.Err.Error() }
func (e *GateRefusal) Unwrap() error { return e.Err }
