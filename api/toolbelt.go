package api

import (
	"encoding/json"
	"time"
)

// The routes of an execution's toolbelt socket; nothing else is served
// there. The management socket declares the same paths only to refuse
// them (403 wrong_credential_class).
const (
	PathToolbeltCall     = "/v1/toolbelt/call"
	PathToolbeltGuidance = "/v1/toolbelt/guidance"
	PathToolbeltServing  = "/v1/toolbelt/serving"
)

// CallRequest is the body of POST /v1/toolbelt/call.
type CallRequest struct {
	// Operation is a builtin (Op…) or a granted extension operation.
	Operation string `json:"operation"`
	// Input is the operation's input, a JSON object ({} when it takes
	// none).
	Input json.RawMessage `json:"input"`
	// RequestID makes the call idempotent: a repeat with the same body
	// replays the committed result, a changed body is request_conflict.
	RequestID string `json:"request_id,omitempty"`
	// ScopeID, WorkID and ExecutionID are narrowing assertions: the call
	// is refused (403 forbidden) unless the token's authority is that
	// scope, Work and execution.
	ScopeID     string `json:"scope_id,omitempty"`
	WorkID      string `json:"work_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
}

// CallResponse is the 200 body of POST /v1/toolbelt/call.
type CallResponse struct {
	Operation string          `json:"operation"`
	Result    json.RawMessage `json:"result"`
	// Replayed is true when the result is the one committed for an
	// earlier call with the same request ID.
	Replayed bool `json:"replayed"`
}

// Guidance is the body of GET /v1/toolbelt/guidance.
type Guidance struct {
	// Guidance is agent guidance in Markdown for the token's granted
	// operations as a whole.
	Guidance   string      `json:"guidance"`
	Operations []Operation `json:"operations"`
}

// Operation describes one granted operation in Guidance.
type Operation struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// InputSchema is a JSON Schema of the operation's input object
	// ({"type":"object"} when it declares none).
	InputSchema json.RawMessage `json:"input_schema"`
	// Guidance is the operation's own guidance, in Markdown.
	Guidance string `json:"guidance"`
	// Capabilities lists what the operation serves (git.credential).
	Capabilities []string `json:"capabilities"`
}

// Serving is the body of GET /v1/toolbelt/serving?capability=C.
type Serving struct {
	Capability string `json:"capability"`
	// Operations are the granted operations that serve the capability, in
	// the toolbelt's order; a client uses the first. Empty, never 404,
	// when none does.
	Operations []string `json:"operations"`
}

// Builtin operations.
const (
	OpEmit           = "emit"
	OpCreateWork     = "create_work"
	OpWait           = "wait"
	OpDeclareOutcome = "declare_outcome"
	OpReadContext    = "read_context"
)

// EmitInput is the input of emit.
type EmitInput struct {
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
}

// EmitResult is the result of emit.
type EmitResult struct {
	EventID string `json:"event_id"`
	Seq     int64  `json:"seq"`
}

// CreateWorkInput is the input of create_work.
type CreateWorkInput struct {
	Binding        string      `json:"binding,omitempty"`
	CorrelationKey string      `json:"correlation_key,omitempty"`
	Input          *EventInput `json:"input,omitempty"`
	Grants         []string    `json:"grants,omitempty"`
}

// EventInput is an Event a call hands the host to accept (a child
// Work's input).
type EventInput struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// CreateWorkResult is the result of create_work.
type CreateWorkResult struct {
	WorkID         string `json:"work_id"`
	CreatedEventID string `json:"created_event_id"`
}

// WaitInput is the input of wait. Timeout is a Go duration ("10m").
type WaitInput struct {
	Types   []string `json:"types,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
}

// OutcomeInput is the input of declare_outcome: Outcome is succeeded or
// failed.
type OutcomeInput struct {
	Outcome string          `json:"outcome"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Declarations, as DeclaredResult.Declared names them.
const (
	DeclarationWait    = "wait"
	DeclarationOutcome = "outcome"
)

// DeclaredResult is the result of wait and declare_outcome; Wait is the
// declared wait (wait only).
type DeclaredResult struct {
	Declared string        `json:"declared"`
	Wait     *DeclaredWait `json:"wait,omitempty"`
}

// DeclaredWait is a wait as a call declared it.
type DeclaredWait struct {
	Types   []string `json:"types"`
	Keys    []string `json:"keys"`
	Timeout string   `json:"timeout,omitempty"`
	// Registration names the gate's registration that parked the call.
	Registration string `json:"registration,omitempty"`
}

// ParkedResult is the result of a call a gate parked: the operation did
// not run, the segment's wait is declared, and Output is the gate's
// answer (a JSON object).
type ParkedResult struct {
	Parked string          `json:"parked"`
	Output json.RawMessage `json:"output"`
	Wait   DeclaredWait    `json:"wait"`
}

// ReadContextResult is the result of read_context: each member only when
// the scope's read ceiling allows it (Work for the work read, Inputs and
// Events for the events read). The members are in the order the host has
// always sent them, by name.
type ReadContextResult struct {
	Events []Event        `json:"events,omitzero"`
	Inputs []ContextInput `json:"inputs,omitzero"`
	Work   *Work          `json:"work,omitzero"`
}

// ContextInput is one queued input of the Work in ReadContextResult.
type ContextInput struct {
	Position int64 `json:"position"`
	Event    Event `json:"event"`
}

// CapabilityGitCredential is the capability of operations that answer
// git's credential requests.
const CapabilityGitCredential = "git.credential"

// GitCredentialInput is the input of an operation serving git.credential.
type GitCredentialInput struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Path     string `json:"path,omitempty"`
	Username string `json:"username,omitempty"`
}

// The result of an operation serving git.credential, a username and a
// password, is a secret: it has no type here (osclient.GitCredential), and
// the host never records it for replay.

// Toolbelt call record kinds (ToolbeltCall.Kind).
const (
	ToolbeltCalled   = "toolbelt.called"
	ToolbeltRejected = "toolbelt.rejected"
)

// Operations a call record names for the toolbelt's reads.
const (
	RecordGuidance = "toolbelt.guidance"
	RecordServing  = "toolbelt.serving"
)

// Toolbelt call results (ToolbeltCall.Result), besides a handler's own
// code.
const (
	CallOK                = "ok"
	CallForbidden         = "forbidden"
	CallAuthorityReleased = "authority_released"
	CallRequestConflict   = "request_conflict"
	CallInvalid           = "invalid"
	CallConflict          = "conflict"
	CallGateRefused       = "gate_refused"
	CallParked            = "parked"
	CallError             = "error"
)

// ToolbeltCall is one toolbelt request or refusal as GET
// /v1/toolbelt/calls shows it. It never holds a token, a digest or an
// input value.
type ToolbeltCall struct {
	ID string `json:"id"`
	// Kind is ToolbeltCalled or ToolbeltRejected.
	Kind string `json:"kind"`
	// Operation is the operation called ("" for an unreadable request).
	Operation string `json:"operation"`
	// Execution, Epoch and TokenID are known once the token was found.
	Execution string `json:"execution,omitempty"`
	Epoch     int64  `json:"epoch,omitempty"`
	TokenID   string `json:"token_id,omitempty"`
	// Result is one of the Call… results or a handler's own code.
	Result string `json:"result"`
	// Gate names the gate that parked or refused the call.
	Gate string `json:"gate,omitempty"`
	// Refusal classifies a refused call: config_drift when its operation
	// is one the binding's playbook declares in the generation the
	// execution is pinned to.
	Refusal  string    `json:"refusal,omitempty"`
	Replayed bool      `json:"replayed,omitempty"`
	At       time.Time `json:"at"`
}
