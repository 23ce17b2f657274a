// Package executor defines what the scheduler asks of an executor: run one
// segment of an execution, re-attach to a segment an earlier daemon started,
// resume a parked one, and stop one physically. Concrete executors live in
// the packages below it (shell first).
//
// It must never touch coordination storage or decide anything about Work:
// an executor reports what happened to its process, and the scheduler alone
// turns that into state.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Transport says how an execution reaches the toolbelt.
type Transport string

const (
	// TransportNone: the execution never calls the toolbelt, so it gets no
	// token and no endpoint.
	TransportNone Transport = "none"
	// TransportOS: the execution calls the toolbelt through the os CLI on
	// its own socket (OS_ENDPOINT, OS_TOKEN_FILE).
	TransportOS Transport = "os"
)

// Capability names a mechanical capability a binding may require
// (config "requires").
type Capability string

const (
	CapToolbelt Capability = "toolbelt"
	CapResume   Capability = "resume"
)

// Info describes an executor to the registry and the scheduler.
type Info struct {
	Name         string
	Transport    Transport
	Capabilities []Capability
	// Dirless: the executor keeps nothing of a segment on disk, so the
	// host creates no directory for its executions and RunRequest.Dir is
	// empty. Creating one is a file system metadata operation per
	// attempt (about a quarter of a millisecond of CPU on some hosts).
	Dirless bool
}

// Has reports whether the executor has capability c.
func (i Info) Has(c Capability) bool {
	for _, have := range i.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// ExecutionContext is what the host gives a segment beyond its config.
type ExecutionContext struct {
	// Token is the execution's current toolbelt token; empty for transport
	// none. Executors must not write it anywhere but hand the process
	// ToolbeltTokenFile instead.
	Token string
	// ToolbeltEndpoint is the path of the execution's own toolbelt socket.
	ToolbeltEndpoint string
	// ToolbeltTokenFile is the host-written file holding the current token;
	// it is replaced by rename when the token rotates.
	ToolbeltTokenFile string
	// ToolbeltDir is the directory holding the host's os binary.
	ToolbeltDir string
	// PlaybookDir holds the playbooks, one per skill as skills/<name>/SKILL.md.
	PlaybookDir string
}

// RunRequest is one segment of an execution.
type RunRequest struct {
	ExecutionID string
	WorkID      string
	ScopeID     string
	BindingID   string
	Epoch       int64
	// Config is the binding's executor config, as validated.
	Config json.RawMessage
	// Env holds the resolved secrets, by environment variable name. It is
	// never logged or stored.
	Env map[string]string
	// Dir is a directory the host owns for this execution; the executor
	// keeps its own state (pid, status, raw output) there so that a later
	// daemon can Recover the segment. Empty for a Dirless executor.
	Dir string
	// Deadline is when the attempt must end; the executor stops the process
	// when it passes.
	Deadline time.Time
	Context  ExecutionContext
	// Events are the Work's input Events this segment answers, oldest
	// first: for Run every input up to the attempt's watermark; for Resume
	// the inputs that arrived since the execution parked (the ones that
	// woke it); for Recover and Stop none. An agent executor builds its
	// prompt from them.
	Events []Event
	// Session is the agent session the execution's earlier segments
	// recorded (Result.Session), for Resume and Recover; "" for none.
	Session string
}

// Event is one input Event as a segment sees it: what the Work was given,
// never a storage record.
type Event struct {
	ID             string
	Seq            int64
	Type           string
	Source         string
	Scope          string
	CorrelationKey string
	// Data is the Event's JSON data (null when it has none).
	Data       json.RawMessage
	AcceptedAt time.Time
}

// Outcome is how a segment ended.
type Outcome string

const (
	Succeeded Outcome = "succeeded"
	Failed    Outcome = "failed"
	Cancelled Outcome = "cancelled"
	// Suspended: a resume-capable executor parked the segment on a
	// declared wait.
	Suspended Outcome = "suspended"
)

// Artifact is a file the segment produced, for the host to store.
type Artifact struct {
	Name      string
	MediaType string
	Path      string
}

// Result is what an executor observed of a finished segment.
type Result struct {
	Outcome  Outcome
	ExitCode int
	// Message is a short, safe explanation (no secrets, no output).
	Message   string
	Artifacts []Artifact
	// Session is the agent session a resume continues ("" for an executor
	// without one): recorded on the execution.
	Session string
	// Usage is what the segment consumed, when the executor can tell (nil
	// otherwise): added to the execution's totals.
	Usage *Usage
}

// Usage is what one segment of an agent consumed, as its own output
// reported it.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	// CostUSD is the agent's own estimate in US dollars (0 when it gives
	// none).
	CostUSD float64
	// Turns is how many model turns the segment took.
	Turns int64
}

// Add returns the sum of u and v; nil is zero.
func (u *Usage) Add(v *Usage) *Usage {
	if u == nil && v == nil {
		return nil
	}
	var sum Usage
	for _, x := range []*Usage{u, v} {
		if x == nil {
			continue
		}
		sum.InputTokens += x.InputTokens
		sum.OutputTokens += x.OutputTokens
		sum.CacheReadTokens += x.CacheReadTokens
		sum.CacheCreationTokens += x.CacheCreationTokens
		sum.CostUSD += x.CostUSD
		sum.Turns += x.Turns
	}
	return &sum
}

// ErrDetached is returned by Run, Recover and Resume when ctx ended before
// the segment did: the host stopped observing (daemon shutdown), and the
// process keeps running for a later daemon to Recover.
var ErrDetached = errors.New("executor: observation detached; the segment is still running")

// ErrGone is returned by Recover when nothing of the segment can be found:
// the process is not running and left no status.
var ErrGone = errors.New("executor: segment is gone")

// Executor runs segments. Run, Recover and Resume block until the segment
// ends (or ctx ends, with ErrDetached); the scheduler calls them on their
// own goroutines.
type Executor interface {
	Info() Info
	Run(ctx context.Context, req RunRequest) (Result, error)
	// Recover re-attaches to a segment an earlier daemon started with the
	// same Dir, and reports its real result when it ends.
	Recover(ctx context.Context, req RunRequest) (Result, error)
	// Resume continues a parked execution in a new epoch. Executors without
	// the resume capability return an error.
	Resume(ctx context.Context, req RunRequest) (Result, error)
	// Stop ends a segment physically: a polite signal, then force after
	// grace. It returns once the segment's processes are gone.
	Stop(ctx context.Context, req RunRequest, grace time.Duration) error
}

// UnavailableError says this daemon cannot run a segment the way its
// binding requires (a sandbox bwrap cannot create, for example). Nothing
// was started. The scheduler holds the Work with Reason and Detail instead
// of failing the attempt on something the operator has to fix on the
// machine. Detail is safe to show: it names what to install or fix, never
// a configured value.
type UnavailableError struct {
	Reason string
	Detail string
}

func (e *UnavailableError) Error() string { return e.Detail }

// ReasonSandboxUnavailable is the Reason of a binding that asks for a
// sandbox this daemon cannot create.
const ReasonSandboxUnavailable = "sandbox_unavailable"

// Preflighter is implemented by an executor that can tell, from a
// binding's config, that it cannot run a segment on this machine before
// anything is launched; the scheduler asks it before it issues a token.
// Its error is an *UnavailableError, or nil.
type Preflighter interface {
	Preflight(config json.RawMessage) error
}

// EndpointOptional is implemented by an executor whose segments can run
// without a toolbelt token and endpoint (no run directory, no token file,
// no socket) when their binding grants no operation. The scheduler still
// gives them one when NeedsEndpoint says a binding's config uses the
// endpoint for more than operations (a sandbox reaches its egress proxy
// through the run directory). An executor that does not implement it gets
// a token and an endpoint whenever its transport is not none.
type EndpointOptional interface {
	NeedsEndpoint(config json.RawMessage) bool
}
