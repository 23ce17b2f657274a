package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// Limits bound what one daemon runs. Options.Limits sets them at
// start; Scheduler.SetLimits replaces them while the scheduler runs, and
// each decision reads the limits current at that moment (see SetLimits).
type Limits struct {
	// MaxRunning is how many attempts this daemon holds leases for at once
	// (running or stopping; parked ones do not count). Default 4.
	MaxRunning int
	// Lease is how long a lease lasts between renewals (default 30s). The
	// daemon renews it every Lease/3 and stops trusting it
	// kernel.LeaseMargin before it expires.
	Lease time.Duration
	// AttemptTimeout bounds one segment: its deadline is set at claim and
	// resume (default 1h). Executors stop the process when it passes.
	AttemptTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxRunning <= 0 {
		l.MaxRunning = 4
	}
	if l.Lease <= 0 {
		l.Lease = 30 * time.Second
	}
	if l.AttemptTimeout <= 0 {
		l.AttemptTimeout = time.Hour
	}
	return l
}

// BindingQuery asks for a binding. Generation 0 means the active
// generation; otherwise the generation an attempt is pinned to.
type BindingQuery struct {
	Scope      string
	Binding    string
	Generation int64
}

// Binding is what the scheduler needs of a binding to run it.
type Binding struct {
	Executor string
	// Config is the executor config, as validated.
	Config json.RawMessage
	// Generation is the generation it comes from (pinned on a new
	// execution).
	Generation int64
	// NoOperations: the binding grants no operation, neither its own nor
	// through any of its grants, so a segment could call nothing on a
	// toolbelt. Its segments get no token and no endpoint when their
	// executor allows it (executor.EndpointOptional).
	NoOperations bool
	// NoSecrets: the binding selects no secret, so preparing its attempt
	// resolves none. With an executor that needs no toolbelt endpoint
	// (see usesToolbelt), nothing in its preparation can hang, and its
	// claims are not held to PreparePerBinding (see prepareRoom).
	NoSecrets bool
}

// BindingLookup resolves a binding (the daemon adapts the configuration).
type BindingLookup func(ctx context.Context, q BindingQuery) (Binding, error)

// Endpoint is an execution's own toolbelt endpoint.
type Endpoint struct {
	// Socket is the path of the execution's toolbelt socket.
	Socket string
	// TokenFile is the host-written file holding the current token.
	TokenFile string
}

// ToolbeltEndpoints prepares an execution's endpoint with its fresh token
// (writes the token file, serves the socket) before Run, Recover and
// Resume.
type ToolbeltEndpoints func(ctx context.Context, executionID, token string) (Endpoint, error)

// SecretsRequest names the attempt whose secrets are resolved.
type SecretsRequest struct {
	ExecutionID string
	WorkID      string
	ScopeID     string
	BindingID   string
	// Generation is the attempt's pinned generation.
	Generation int64
}

// SecretsFunc resolves the environment of an attempt, immediately before
// Run, Recover or Resume, outside any transaction.
type SecretsFunc func(ctx context.Context, req SecretsRequest) (map[string]string, error)

// SecretError is a safe description of a secret that could not be
// resolved: its name and a stable code, never its reference or value.
type SecretError struct {
	Name string
	Code string
}

func (e *SecretError) Error() string {
	return fmt.Sprintf("secret %s could not be resolved (%s)", e.Name, e.Code)
}

// StartGate is one registration's start gate.
type StartGate struct {
	// Registration is the registration name: it orders the gates and owns
	// the wait a park registers.
	Registration string
	Gate         extension.StartGate
}

// StartGates is the port to the start gates: those to ask about a Work of
// scope whose first attempt would be pinned to generation. The daemon
// composes it from the registrations; the scheduler asks them in
// registration-name order whatever order they come in (see startgate.go).
type StartGates func(scope string, generation int64) []StartGate

// Options configure a Scheduler.
type Options struct {
	Store   storage.Store
	Runtime *kernel.Runtime
	// Clock and IDs default to the runtime's.
	Clock clock.Clock
	IDs   *ids.Generator
	// Owner is this daemon instance's id; every lease it takes names it.
	Owner string
	// Node is the state directory's stable id (statedir.NodeID): every
	// execution this scheduler claims records it, RecoverOrphans takes
	// over only its own node's attempts, and an expired attempt of
	// another node is recovered as lost, since its process cannot be
	// adopted here. "" treats every execution as this node's (one
	// daemon on its own store).
	Node string
	// Duties, when set, says whether this daemon holds each store-wide
	// duty now: FireDue runs only under DutyTimers and RecoverExpired
	// only under DutyRecovery. Nil runs both (one daemon on its store).
	Duties DutyGate
	// Limits are the limits at start (zero fields take the defaults);
	// SetLimits replaces them later.
	Limits Limits
	// Executors by name.
	Executors map[string]executor.Executor
	Bindings  BindingLookup

	// MoreExecutors, when set, is asked for an executor Executors does not
	// hold (nil: none): the executors installed packages add and remove
	// while the daemon runs.
	MoreExecutors func(name string) executor.Executor
	// Toolbelt issues tokens; optional. When set, ToolbeltEndpoints is
	// required.
	Toolbelt          toolbelt.TokenIssuer
	ToolbeltEndpoints ToolbeltEndpoints
	// ToolbeltDir and PlaybookDir go into every RunRequest's context.
	ToolbeltDir string
	PlaybookDir string
	// Secrets resolves an attempt's environment; optional.
	Secrets SecretsFunc
	// StartGates are asked before a Work's first attempt; optional.
	StartGates StartGates
	// StartGateTimeout bounds one start gate's answer (default 30s): past
	// it the gate fails closed (gate_failed).
	StartGateTimeout time.Duration
	// ExecutionsDir holds one host-owned directory per execution (the
	// RunRequest's Dir), kept across recoveries.
	ExecutionsDir string
	// Artifacts stores what a segment produced; optional.
	Artifacts *storage.Artifacts
	// ArtifactLimit is how many bytes of one artifact are stored
	// (default MaxArtifactBytes); past it the artifact is cut (see
	// artifactCut).
	ArtifactLimit int64
	// StopGrace is the grace between the polite and the forced stop of a
	// cancelled attempt (default 10s).
	StopGrace time.Duration
	// OnRenewal, when set, is told the outcome of every lease renewal
	// (RenewalRenewed, RenewalLost, RenewalError): the daemon's metrics.
	OnRenewal func(outcome string)
	// Logger is required.
	Logger *slog.Logger
}

func (o *Options) check() error {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("a store"))
	}
	if o.Runtime == nil {
		errs = append(errs, errors.New("a runtime"))
	}
	if o.Owner == "" {
		errs = append(errs, errors.New("an owner id"))
	}
	if o.Bindings == nil {
		errs = append(errs, errors.New("a binding lookup"))
	}
	if o.ExecutionsDir == "" {
		errs = append(errs, errors.New("an executions directory"))
	}
	if o.Logger == nil {
		errs = append(errs, errors.New("a logger"))
	}
	if o.Toolbelt != nil && o.ToolbeltEndpoints == nil {
		errs = append(errs, errors.New("ToolbeltEndpoints whenever Toolbelt is set"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("scheduler: the options need %w", errors.Join(errs...))
	}
	if o.Clock == nil {
		o.Clock = o.Runtime.Clock()
	}
	if o.IDs == nil {
		o.IDs = o.Runtime.IDs()
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.StartGateTimeout <= 0 {
		o.StartGateTimeout = 30 * time.Second
	}
	if o.ArtifactLimit <= 0 {
		o.ArtifactLimit = MaxArtifactBytes
	}
	o.Limits = o.Limits.withDefaults()
	return nil
}

// executor returns the executor of this name, nil when there is none.
func (s *Scheduler) executor(name string) executor.Executor {
	if ex, ok := s.o.Executors[name]; ok {
		return ex
	}
	if s.o.MoreExecutors != nil {
		return s.o.MoreExecutors(name)
	}
	return nil
}
