package extension

import (
	"context"
	"encoding/json"
)

// Action is something an operator asks an extension to do: through the
// management API (POST /v1/actions/{name}) or `open-conduit act`. It is
// operator-side only: the toolbelt never serves an action, so no execution
// can call one, and no binding can grant one. The host records every
// request as a core.action Event stamped with the operator who asked,
// before the handler runs.
type Action struct {
	// Name is <registration>.<suffix>, in the registration's namespace
	// like an operation's, and never the name of one of its operations.
	Name string
	// Summary is one sentence saying what it does.
	Summary string
	// InputSchema is a JSON Schema (2020-12) whose type is object; nil
	// means {"type":"object"}.
	InputSchema json.RawMessage
	// Handler runs the action, outside storage, after the host accepted
	// its core.action Event.
	Handler ActionHandler
}

// ActionHandler serves an action. Its result is a JSON object (nil:
// {}). A refusal it wants the operator to see is an *OperationError (422
// with its code and message, neither holding a secret); any other error
// is the host's 500. It must be idempotent on req.RequestID: a retried
// request whose answer was lost (the daemon crashed before it recorded
// it) runs the handler again with the same RequestID and Event.
type ActionHandler func(ctx context.Context, req ActionRequest) (json.RawMessage, error)

// ActionRequest is what the host hands an action's handler: who asked,
// about what, and with which input.
type ActionRequest struct {
	// Action is the action's name.
	Action string
	// Caller is the authenticated operator who asked (operator:<name>).
	// The host sets it from the request's credential, never from its
	// body.
	Caller string
	// Scope is the scope the action is taken in; the host checked that
	// it is active.
	Scope string
	// Work, when set, is a Work of Scope the action is about.
	Work string
	// Input is the operator's input, a JSON object ({} when none). The
	// core.action Event records it, so an action never takes a secret as
	// input.
	Input json.RawMessage
	// RequestID identifies the request across retries: it derives from
	// the operator's Idempotency-Key ("" when the caller gave none).
	RequestID string
	// Event is the id of the core.action Event that records the request.
	Event string
}
