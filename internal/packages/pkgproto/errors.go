package pkgproto

import (
	"fmt"
	"strings"
	"time"
)

// The failures of a call that are not the package's verdict. Their Go
// types name the kind of failure (the toolbelt logs only the type of an
// extension's error), and their texts hold nothing the package wrote.

// UnavailableError: the package's process is not running (restarting,
// stopped) or ended while the call was in flight.
type UnavailableError struct {
	Package string
	Method  string
	Reason  string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("package %s could not answer %s: %s", e.Package, e.Method, e.Reason)
}

// TimeoutError: the package did not answer within the call's bound.
type TimeoutError struct {
	Package string
	Method  string
	After   time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("package %s did not answer %s within %s", e.Package, e.Method, e.After)
}

// RemoteError: the package answered with a JSON-RPC error that is not an
// operation error. Its message and data are not kept.
type RemoteError struct {
	Package string
	Method  string
	Code    int
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("package %s answered %s with error code %d", e.Package, e.Method, e.Code)
}

// ProtocolError: the package's answer breaks the protocol (a result that
// does not decode, an unknown verdict, a park without a plan).
type ProtocolError struct {
	Package string
	Method  string
	What    string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("package %s answered %s against the protocol: %s", e.Package, e.Method, e.What)
}

// HandshakeError: the package's process started but its handshake was
// refused, so it is not run.
type HandshakeError struct {
	Package string
	Reason  string
}

func (e *HandshakeError) Error() string {
	return fmt.Sprintf("package %s refused: %s", e.Package, e.Reason)
}

// StartError: the package's process could not be started.
type StartError struct {
	Package string
	Reason  string
	Err     error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("package %s could not be started: %s", e.Package, e.Reason)
}

func (e *StartError) Unwrap() error { return e.Err }

func quoteList(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ", ")
}
