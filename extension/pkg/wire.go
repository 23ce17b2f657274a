package pkg

import (
	"encoding/json"
	"time"
)

// ProtocolVersion is the version of the extension protocol this package
// speaks (docs/extension-protocol.md).
const ProtocolVersion = "1"

// The methods of the protocol.
const (
	MethodInitialize     = "initialize"
	MethodCall           = "operation.call"
	MethodTranslateEmit  = "operation.translate_emit"
	MethodTranslateWait  = "operation.translate_wait"
	MethodGate           = "operation.gate"
	MethodStartGate      = "work.start_gate"
	MethodConfigCheck    = "config.check"
	MethodExecutorRun    = "executor.run"
	MethodExecutorRecov  = "executor.recover"
	MethodExecutorResume = "executor.resume"
	MethodExecutorStop   = "executor.stop"
	MethodShutdown       = "shutdown"
	MethodCancel         = "$/cancel"
)

// The error codes of the protocol: JSON-RPC 2.0's and the protocol's own.
const (
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
	CodeOperationError     = -32000
	CodeCancelled          = -32001
	CodeUnsupportedVersion = -32002
	CodeNotServing         = -32003
	CodeSegmentGone        = -32004
)

// MaxMessage is the longest line either side sends.
const MaxMessage = 16 << 20

// Gate verdicts.
const (
	VerdictAllow = "allow"
	VerdictPark  = "park"
)

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method only) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *ErrorObject    `json:"error,omitempty"`
}

// ErrorObject is a JSON-RPC error.
type ErrorObject struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// OperationErrorData is the data of a CodeOperationError: the package's
// verdict.
type OperationErrorData struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Party names a side of the handshake.
type Party struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// InitializeParams are the host's handshake.
type InitializeParams struct {
	ProtocolVersions []string `json:"protocol_versions"`
	Host             Party    `json:"host"`
	Package          Party    `json:"package"`
}

// InitializeResult is the package's answer to the handshake.
type InitializeResult struct {
	ProtocolVersion string   `json:"protocol_version"`
	Package         Party    `json:"package"`
	Serves          []string `json:"serves"`
}

// Authority is the checked authority of a call (never the token).
type Authority struct {
	Scope      string          `json:"scope"`
	Work       string          `json:"work"`
	Execution  string          `json:"execution"`
	Binding    string          `json:"binding"`
	Generation int64           `json:"generation"`
	Epoch      int64           `json:"epoch"`
	Operation  string          `json:"operation"`
	RequestID  string          `json:"request_id"`
	Config     json.RawMessage `json:"config"`
}

// CallParams are the params of operation.call, operation.translate_emit,
// operation.translate_wait and operation.gate.
type CallParams struct {
	Operation string          `json:"operation"`
	Input     json.RawMessage `json:"input"`
	Authority Authority       `json:"authority"`
}

// CallResult answers operation.call.
type CallResult struct {
	Output json.RawMessage `json:"output"`
}

// EmitResult answers operation.translate_emit.
type EmitResult struct {
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
}

// WaitPlan answers operation.translate_wait and is a gate's park.
type WaitPlan struct {
	Types     []string        `json:"types,omitempty"`
	Keys      []string        `json:"keys,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Reason    string          `json:"reason,omitempty"`
}

// GateResult answers operation.gate and work.start_gate.
type GateResult struct {
	Verdict string    `json:"verdict"`
	Plan    *WaitPlan `json:"plan,omitempty"`
}

// StartGateParams are the params of work.start_gate.
type StartGateParams struct {
	Scope      string       `json:"scope"`
	Work       string       `json:"work"`
	Binding    string       `json:"binding"`
	Generation int64        `json:"generation"`
	Parent     string       `json:"parent"`
	Inputs     []StartInput `json:"inputs"`
}

// StartInput is one input Event of a Work a start gate is asked about.
type StartInput struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Source         string          `json:"source"`
	CorrelationKey string          `json:"correlation_key"`
	Data           json.RawMessage `json:"data,omitempty"`
}

// ConfigCheckParams are the params of config.check.
type ConfigCheckParams struct {
	Config json.RawMessage `json:"config"`
}

// ConfigCheckResult answers config.check: no problem means accepted.
type ConfigCheckResult struct {
	Problems []ConfigProblem `json:"problems"`
}

// ConfigProblem is one problem of a package's config.
type ConfigProblem struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Remedy  string `json:"remedy"`
}

// ExecutorParams are the params of executor.run, recover, resume and stop.
type ExecutorParams struct {
	Kind    string     `json:"kind"`
	Request RunRequest `json:"request"`
	// GraceMS is executor.stop's grace before force.
	GraceMS int64 `json:"grace_ms,omitempty"`
}

// RunRequest is one segment of an execution.
type RunRequest struct {
	ExecutionID string            `json:"execution_id"`
	WorkID      string            `json:"work_id"`
	ScopeID     string            `json:"scope_id"`
	BindingID   string            `json:"binding_id"`
	Epoch       int64             `json:"epoch"`
	Config      json.RawMessage   `json:"config"`
	Env         map[string]string `json:"env"`
	Dir         string            `json:"dir"`
	Deadline    time.Time         `json:"deadline"`
	Context     ExecutionContext  `json:"context"`
	Events      []Event           `json:"events"`
	Session     string            `json:"session"`
}

// ExecutionContext is what the host gives a segment beyond its config:
// never the token, only the file that holds it.
type ExecutionContext struct {
	ToolbeltEndpoint  string `json:"toolbelt_endpoint"`
	ToolbeltTokenFile string `json:"toolbelt_token_file"`
	ToolbeltDir       string `json:"toolbelt_dir"`
	PlaybookDir       string `json:"playbook_dir"`
}

// Event is one input Event of a segment.
type Event struct {
	ID             string          `json:"id"`
	Seq            int64           `json:"seq"`
	Type           string          `json:"type"`
	Source         string          `json:"source"`
	Scope          string          `json:"scope"`
	CorrelationKey string          `json:"correlation_key"`
	Data           json.RawMessage `json:"data"`
	AcceptedAt     time.Time       `json:"accepted_at"`
}

// Outcomes of a segment.
const (
	Succeeded = "succeeded"
	Failed    = "failed"
	Cancelled = "cancelled"
	Suspended = "suspended"
)

// Result is how a segment ended.
type Result struct {
	Outcome   string     `json:"outcome"`
	ExitCode  int        `json:"exit_code"`
	Message   string     `json:"message,omitempty"`
	Artifacts []Artifact `json:"artifacts,omitempty"`
	Session   string     `json:"session,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"`
}

// Artifact is a file a segment produced.
type Artifact struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Path      string `json:"path"`
}

// Usage is what a segment consumed.
type Usage struct {
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CacheReadTokens     int64   `json:"cache_read_tokens"`
	CacheCreationTokens int64   `json:"cache_creation_tokens"`
	CostUSD             float64 `json:"cost_usd"`
	Turns               int64   `json:"turns"`
}

// CancelParams are the params of $/cancel.
type CancelParams struct {
	ID json.RawMessage `json:"id"`
}
