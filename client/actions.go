package client

import (
	"context"

	"github.com/go-json-experiment/json/jsontext"
)

// The operator actions extensions register (docs/api.md, Actions).

// Action describes a registered action.
type Action struct {
	Name         string         `json:"name"`
	Registration string         `json:"registration"`
	Summary      string         `json:"summary"`
	InputSchema  jsontext.Value `json:"input_schema"`
}

// Actions lists every registered action, in name order (one page).
func (c *Client) Actions(ctx context.Context) (*List[Action], error) {
	return list[Action](ctx, c, "/v1/actions")
}

// ActRequest is where an action is taken and with what: Scope is
// required, Work (a Work of Scope) and Input (a JSON object) optional.
type ActRequest struct {
	Scope string         `json:"scope"`
	Work  string         `json:"work,omitempty"`
	Input jsontext.Value `json:"input,omitempty"`
}

// Acted is the answer of an action: the core.action Event that records
// it, with the caller as its actor, and the action's result.
type Acted struct {
	Event  Event          `json:"event"`
	Result jsontext.Value `json:"result"`
	// Existing: an earlier request with the same Idempotency-Key accepted
	// the Event, and the action ran again with the same request id.
	Existing bool `json:"existing"`
	Mutation `json:"-"`
}

// Act runs the action name. It sends opts.IdempotencyKey, or a fresh key;
// retrying with the same key replays the answer, or, when the daemon never
// recorded it, records no second Event.
func (c *Client) Act(ctx context.Context, name string, req ActRequest, opts *RequestOptions) (*Acted, error) {
	var out Acted
	m, err := post(ctx, c, "/v1/actions/"+PathEscape(name), req, opts, true, &out)
	out.Mutation = m
	return &out, err
}
