package extension

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Registration is what an extension hands the host's Registrar: its name,
// which owns the namespace <name>.*, its operations, its toolsets, its
// playbooks, its operator actions, an optional gate, an optional start gate
// and an optional check of its own configuration. Each committed
// configuration generation decides whether the registration is enabled and
// in which scopes (extensions.<name>): a disabled registration's
// operations are undeclared, its gate and start gate are not asked and its
// actions are not served. A generation with no entry for it enables it in
// every scope, unless it is OptIn.
type Registration struct {
	// Name is the registration name (see RegistrationName).
	Name string
	// Operations are served under the registration's namespace.
	Operations []Operation
	// Toolsets are named sets of the registration's operations by role.
	Toolsets []Toolset
	// Playbooks are the skills its agents start their turns on (see
	// Playbook); the host writes them where agent CLIs read skills.
	Playbooks []Playbook
	// Actions are served to operators only, under the registration's
	// namespace (see Action).
	Actions []Action
	// Gate, when set, is asked before every other registration's
	// operation runs (see Gate).
	Gate Gate
	// CheckConfig, when set, checks the registration's own configuration
	// (extensions.<name>.config, {} when the entry has none) whenever a
	// configuration is validated. It must decode strictly and change
	// nothing. A *ConfigError lists each problem at its place inside the
	// config; any other error is one problem at the config itself, its
	// text never shown. Without it, an entry with a config is refused.
	CheckConfig func(config json.RawMessage) error
	// InspectConfig, when set, reports what a config CheckConfig
	// accepted refers to outside itself (secret names, scope ids), which
	// validation checks against the whole configuration, and its
	// warnings. It must change nothing.
	InspectConfig func(config json.RawMessage) ConfigReport
	// Ingress, when set, is the registration's source of Events from
	// outside (see Ingress); its Events carry its Source.
	Ingress Ingress
	// StartGate, when set, is asked by the scheduler before a Work's
	// first attempt starts (see StartGate).
	StartGate StartGate
	// OptIn: the registration is enabled only where a configuration
	// entry (extensions.<name>) enables it. Without OptIn, a generation
	// that has no entry for it enables it in every scope.
	OptIn bool
}

// Operation is one operation an extension adds to the toolbelt. Exactly one
// of Handler, Emit and Wait serves it.
type Operation struct {
	// Name is <registration>.<suffix>.
	Name string
	// Summary is one sentence saying what it does.
	Summary string
	// InputSchema is a JSON Schema (2020-12) whose type is object; nil
	// means {"type":"object"}.
	InputSchema json.RawMessage
	// Guidance is Markdown telling an agent when and how to use it.
	Guidance string
	// Capabilities lists what it serves, such as git.credential. An
	// operation serving CapabilityGitCredential is sensitive whatever
	// Sensitive says.
	Capabilities []string
	// Sensitive: its result holds a credential; the host never stores it.
	// The host keeps no result or refusal of a sensitive operation in its
	// request record (only the input's hash, so a changed body is still a
	// request conflict), and a repeat with the same request ID runs the
	// Handler again instead of replaying: the Handler must be idempotent
	// on the request ID, as every Handler must. Only a Handler serves a
	// sensitive operation (an Emit's input becomes a stored Event).
	Sensitive bool
	// Handler runs the operation outside storage, after the host checked
	// the caller's authority. It never sees the token.
	Handler Handler
	// Emit translates the input into one Event that the host accepts like
	// the emit builtin, under the same fence, replay and causal checks.
	Emit Translator
	// Wait translates the input into a wait that the host declares like
	// the wait builtin, under the same fence and replay checks, owned by
	// the operation's registration: authority is released and the
	// segment waits for the plan's Events or its timeout.
	Wait WaitTranslator
}

// CapabilityGitCredential is the capability of an operation that answers
// git's credential requests (os git-credential): its result is a username
// and a password or token, so the operation is always sensitive.
const CapabilityGitCredential = "git.credential"

// IsSensitive reports whether the host must treat op's result as a
// credential: Sensitive is set, or op serves CapabilityGitCredential.
func (op Operation) IsSensitive() bool {
	return op.Sensitive || slices.Contains(op.Capabilities, CapabilityGitCredential)
}

// Handler serves an operation. A refusal it wants the caller to see is an
// *OperationError (422 with its code and message); any other error is the
// host's 500, and its text is neither answered nor logged (it may hold a
// credential): the host logs only the error's Go type. It must be
// idempotent on auth.RequestID.
type Handler func(ctx context.Context, auth Authority, input json.RawMessage) (json.RawMessage, error)

// Translator turns an operation's input into an Emission. It runs outside
// storage and must not have effects of its own.
type Translator func(ctx context.Context, auth Authority, input json.RawMessage) (Emission, error)

// WaitTranslator turns an operation's input into the wait the caller
// declares: the plan's Types and Keys (correlation keys of Events, such as
// those an ingress accepts) and its Timeout, with Output answered beside
// the declared wait (its Reason is unused). It runs outside storage and
// must not have effects of its own.
type WaitTranslator func(ctx context.Context, auth Authority, input json.RawMessage) (WaitPlan, error)

// Emission is an Event an operation asks the host to accept for the
// calling execution. The host assigns its source, Work, execution and
// causation.
type Emission struct {
	Type           string
	Data           json.RawMessage
	CorrelationKey string
}

// Gate is asked, in registration-name order, before the host runs another
// registration's operation (never its own, never a builtin).
type Gate interface {
	// Check lets the call through (nil, nil), parks the caller (a
	// WaitPlan), or refuses it (an error; an *OperationError reaches the
	// caller verbatim, wrapped in GateRefusal; any other error refuses
	// the call with gate_failed, and the host logs only its Go type,
	// never its text).
	Check(ctx context.Context, req GateRequest) (*WaitPlan, error)
}

// GateFunc adapts a function to Gate.
type GateFunc func(ctx context.Context, req GateRequest) (*WaitPlan, error)

// Check calls f.
func (f GateFunc) Check(ctx context.Context, req GateRequest) (*WaitPlan, error) { return f(ctx, req) }

// GateRequest is the call a gate is asked about. Authority.Config is the
// gate's own registration's configuration.
type GateRequest struct {
	Authority Authority
	Operation string
	Input     json.RawMessage
}

// WaitPlan parks a caller: the host declares a wait owned by the gating
// registration, the operation does not run, and the call returns Output.
// A start gate's plan parks a Work before its first attempt instead.
type WaitPlan struct {
	Types   []string
	Keys    []string
	Timeout time.Duration
	// Output is the call's result, a JSON object (nil: {}). A start
	// gate's plan has no call to answer and ignores it.
	Output json.RawMessage
	// Reason says, in a short safe sentence, why the caller waits. A Work
	// a start gate parked shows it while it waits; it must hold no secret.
	Reason string
}

// StartGate is asked by the scheduler, in registration-name order, before
// a Work's first attempt starts (never before a later attempt, a resume or
// a recovery).
type StartGate interface {
	// AllowStart lets the attempt start (nil, nil), parks the Work (a
	// WaitPlan: the Work waits, without an attempt, until the plan's
	// events arrive or its timeout, and the gates are asked again), or
	// refuses it (an error: an *OperationError fails the Work with its
	// code and message; any other error, a panic or a timeout fails it
	// with gate_failed, and the host logs only the error's Go type).
	AllowStart(ctx context.Context, req StartRequest) (*WaitPlan, error)
}

// StartGateFunc adapts a function to StartGate.
type StartGateFunc func(ctx context.Context, req StartRequest) (*WaitPlan, error)

// AllowStart calls f.
func (f StartGateFunc) AllowStart(ctx context.Context, req StartRequest) (*WaitPlan, error) {
	return f(ctx, req)
}

// StartRequest is the Work a start gate is asked about.
type StartRequest struct {
	Scope   string
	Work    string
	Binding string
	// Generation is the configuration generation the attempt would be
	// pinned to.
	Generation int64
	// Parent is the Work that created it ("" for none).
	Parent string
	// Inputs are the Work's queued input events, oldest first: a Work
	// woken from a start gate's wait has the event that woke it (or the
	// host's core.wait.timed_out) last.
	Inputs []StartInput
}

// StartInput is one input event of a Work a start gate is asked about.
type StartInput struct {
	ID             string
	Type           string
	Source         string
	CorrelationKey string
	Data           json.RawMessage
}

// Registrar accepts registrations. A refused registration registers
// nothing.
type Registrar interface {
	Register(reg Registration) error
}
