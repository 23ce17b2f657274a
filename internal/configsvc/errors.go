package configsvc

import (
	"errors"

	"github.com/open-conduit/open-conduit/internal/config"
)

// The kinds of the service's refusals of an apply. A refusal is a
// *Refusal whose Kind is one of them, so errors.Is(err, ErrStaleGeneration)
// tells them apart; the servers map them to their codes.
var (
	// ErrStaleGeneration: the apply named a generation that is no longer
	// the active one.
	ErrStaleGeneration = errors.New("stale generation")
	// ErrScopeInUse: the configuration removes or reparents a scope that
	// still has unfinished Work.
	ErrScopeInUse = errors.New("scope in use")
	// ErrHashMismatch: the document's hash is not the hash the caller
	// expected (it changed since it was validated).
	ErrHashMismatch = errors.New("hash mismatch")
	// ErrInvalidConfig: the configuration does not validate; the refusal
	// carries its diagnostics.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrBadPointer: a set named a member that cannot be set (its parent
	// does not exist, the pointer or the value is malformed).
	ErrBadPointer = errors.New("bad pointer")
)

// Refusal is the service's refusal of a configuration. Its Message says
// what to do next and is written from generation numbers, scope ids and
// counts only, never a configured value, so that it can be shown to the
// caller.
type Refusal struct {
	// Kind is one of the sentinels of this package.
	Kind    error
	Message string
	// Diagnostics, for ErrInvalidConfig, are the configuration's problems
	// (they never hold a configured value).
	Diagnostics []config.Diagnostic
}

func (e *Refusal) Error() string { return e.Kind.Error() + ": " + e.Message }

// Unwrap returns the refusal's kind.
func (e *Refusal) Unwrap() error { return e.Kind }
