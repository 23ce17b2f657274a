package extension

import (
	"context"
	"encoding/json"
)

// Toolbelt is what a running execution calls, through its own socket, to
// ask the host for outcomes. Every method authenticates the execution's
// token and passes the host's check chain (token, narrowing assertions,
// allowlist, ceiling, lease guard) before it does anything.
type Toolbelt interface {
	// Call invokes one operation with the authority of token.
	Call(ctx context.Context, token string, req CallRequest) (CallResult, error)
	// Guidance describes the operations token may call.
	Guidance(ctx context.Context, token string, assert Assertions) (Guidance, error)
	// Serving lists the granted operations that serve capability, in
	// name order.
	Serving(ctx context.Context, token string, assert Assertions, capability string) ([]string, error)
}

// Assertions narrow a request: when a field is set, the request is refused
// (ErrForbidden) unless the token's pinned authority is that scope, Work or
// execution. An execution's socket asserts its own execution on every
// request.
type Assertions struct {
	ScopeID     string
	WorkID      string
	ExecutionID string
	// SocketExecution is the execution whose socket the request came in
	// on: the socket asserts it on every request, as ExecutionID would.
	SocketExecution string
}

// CallRequest is one toolbelt call.
type CallRequest struct {
	// Operation is a builtin or a registered operation.
	Operation string
	// Input is the operation's input, a JSON object.
	Input json.RawMessage
	// RequestID makes the call idempotent for its execution: a repeat with
	// the same operation and input replays the committed result, a changed
	// one is ErrRequestConflict. Empty: every call is a new request.
	RequestID string
	Assertions
}

// CallResult is a call's committed result.
type CallResult struct {
	Operation string
	Result    json.RawMessage
	// Replayed: the result was committed by an earlier call with the same
	// request ID and nothing ran again.
	Replayed bool
}

// Guidance is what an agent is told about its granted operations.
type Guidance struct {
	// Guidance is Markdown about the granted operations as a whole.
	Guidance string
	// Operations are the granted operations in name order.
	Operations []OperationInfo
}

// OperationInfo describes one operation: what an agent needs to call it.
type OperationInfo struct {
	Name         string
	Summary      string
	InputSchema  json.RawMessage
	Guidance     string
	Capabilities []string
}

// Authority is the validated authority a handler, translator or gate is
// handed: who is calling, for which Work, under which lease epoch. It never
// holds the token.
type Authority struct {
	Scope      string
	Work       string
	Execution  string
	Binding    string
	Generation int64
	Epoch      int64
	// TokenID is the credential's revocation id (tok_…), never the token.
	TokenID string
	// Operation is the operation being called.
	Operation string
	// RequestID is the call's request ID ("" when it has none). Handlers
	// must be idempotent on it: a host crash between a handler's effect and
	// the commit of its result runs the handler again with the same ID.
	RequestID string
	// Config is the configuration of the registration the authority is
	// handed to (the operation's owner for a handler or translator, the
	// gate's registration for a gate): extensions.<name>.config of the
	// active generation, {} when it has none. It is what the
	// registration's CheckConfig accepted.
	Config json.RawMessage
}
