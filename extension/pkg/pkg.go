// Package pkg is the SDK an installed package is written on in Go: a
// program of its own that the daemon starts and talks to over the extension
// protocol (docs/extension-protocol.md) on its standard input and output. A
// package is a value with a name and a version (Package) that implements
// whichever of Operator, Gater, StartGater, Configurable and Executorer it
// provides, much as an in-process extension implements extension/inproc's
// interfaces; its main calls Serve(ctx, os.Stdin, os.Stdout, impl). The
// package's manifest (open-conduit-package.json) declares the same
// operations, gate and executors. The wire types of the protocol are here
// too, for the host and for tests.
//
// It imports only package extension and the standard library, so a
// package written on it knows the host only through the public contracts.
// It must never write anything but protocol messages to the output it is
// given, never answer an error's text to the host unless it is an
// *extension.OperationError (the package's own verdict), and never ask for
// or hold an execution's token.
package pkg

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

// Package is an installed package written on this SDK. Name and Version
// must be the manifest's: the host refuses a handshake that names another.
type Package interface {
	Name() string
	Version() string
}

// Operator is a package that provides operations. Each is served by the
// one of Handler (kind call), Emit (kind emit) or Wait (kind wait) it sets;
// the other fields of extension.Operation are the manifest's business and
// ignored here. A Handler must be idempotent on auth.RequestID.
type Operator interface {
	Operations() []extension.Operation
}

// Gater is a package with a gate (provides.operation_gate), asked before
// other registrations' operations run. req.Authority.Config is the
// package's own configuration. It lets the call through (nil, nil), parks
// it (a plan) or refuses it (an *extension.OperationError; any other error
// refuses the call with gate_failed).
type Gater interface {
	Gate(ctx context.Context, req extension.GateRequest) (*extension.WaitPlan, error)
}

// StartGater is a package with a start gate (provides.start_gate).
type StartGater interface {
	AllowStart(ctx context.Context, req extension.StartRequest) (*extension.WaitPlan, error)
}

// Configurable is a package with a configuration of its own
// (extensions.<name>.config). CheckConfig must decode strictly and change
// nothing; an *extension.ConfigError lists each problem, any other error is
// one problem at the config itself.
type Configurable interface {
	CheckConfig(config json.RawMessage) error
}

// Executorer is a package that provides executors (provides.executors).
type Executorer interface {
	Executors() []Executor
}

// Executor is one of a package's executors: bindings name it
// <package>.<kind>. Run, Recover and Resume block until the segment ends;
// their ctx ends when the host stops observing (not a request to stop the
// segment: that is Stop).
type Executor interface {
	Kind() string
	Run(ctx context.Context, req RunRequest) (Result, error)
	// Recover re-attaches to a segment an earlier process started with the
	// same Dir; ErrSegmentGone when nothing of it is left.
	Recover(ctx context.Context, req RunRequest) (Result, error)
	// Resume continues a parked execution (an executor declared with
	// resume); others return an error.
	Resume(ctx context.Context, req RunRequest) (Result, error)
	// Stop ends a segment: politely, then by force after grace.
	Stop(ctx context.Context, req RunRequest, grace time.Duration) error
}

// ErrSegmentGone is Recover's answer when nothing of the segment is left.
var ErrSegmentGone = errors.New("pkg: the segment is gone")

// Serves lists the methods p serves, as the handshake answers them.
func Serves(p Package) []string {
	var out []string
	if o, ok := p.(Operator); ok {
		var call, emit, wait bool
		for _, op := range o.Operations() {
			call = call || op.Handler != nil
			emit = emit || op.Emit != nil
			wait = wait || op.Wait != nil
		}
		if call {
			out = append(out, MethodCall)
		}
		if emit {
			out = append(out, MethodTranslateEmit)
		}
		if wait {
			out = append(out, MethodTranslateWait)
		}
	}
	if _, ok := p.(Gater); ok {
		out = append(out, MethodGate)
	}
	if _, ok := p.(StartGater); ok {
		out = append(out, MethodStartGate)
	}
	if _, ok := p.(Configurable); ok {
		out = append(out, MethodConfigCheck)
	}
	if e, ok := p.(Executorer); ok && len(e.Executors()) > 0 {
		out = append(out, MethodExecutorRun, MethodExecutorRecov, MethodExecutorResume, MethodExecutorStop)
	}
	return out
}

// AuthorityOf converts the protocol's authority into extension's.
func AuthorityOf(a Authority) extension.Authority {
	cfg := a.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage(`{}`)
	}
	return extension.Authority{Scope: a.Scope, Work: a.Work, Execution: a.Execution, Binding: a.Binding,
		Generation: a.Generation, Epoch: a.Epoch, Operation: a.Operation, RequestID: a.RequestID, Config: cfg}
}

// WireAuthority converts extension's authority into the protocol's (the
// token's id is not sent).
func WireAuthority(a extension.Authority) Authority {
	cfg := a.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage(`{}`)
	}
	return Authority{Scope: a.Scope, Work: a.Work, Execution: a.Execution, Binding: a.Binding,
		Generation: a.Generation, Epoch: a.Epoch, Operation: a.Operation, RequestID: a.RequestID, Config: cfg}
}

// WirePlan converts a wait plan into the protocol's.
func WirePlan(p extension.WaitPlan) WaitPlan {
	return WaitPlan{Types: p.Types, Keys: p.Keys, TimeoutMS: p.Timeout.Milliseconds(), Output: p.Output, Reason: p.Reason}
}

// PlanOf converts the protocol's wait plan into extension's.
func PlanOf(p WaitPlan) extension.WaitPlan {
	return extension.WaitPlan{Types: p.Types, Keys: p.Keys, Timeout: time.Duration(p.TimeoutMS) * time.Millisecond, Output: p.Output, Reason: p.Reason}
}
