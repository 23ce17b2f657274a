package client

import (
	"context"

	"github.com/open-conduit/open-conduit/api"
)

// The operator actions extensions register (docs/api.md, Actions).

// Action describes a registered action.
type Action = api.Action

// Actions lists every registered action, in name order (one page).
func (c *Client) Actions(ctx context.Context) (*List[Action], error) {
	return list[Action](ctx, c, "/v1/actions")
}

// ActRequest is where an action is taken and with what: Scope is
// required, Work (a Work of Scope) and Input (a JSON object) optional.
type ActRequest = api.ActRequest

// Acted is the answer of an action: the core.action Event that records
// it, with the caller as its actor, and the action's result.
type Acted struct {
	api.Acted
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
