package client

import (
	"context"

	"github.com/open-conduit/open-conduit/api"
)

// ReconcileRequest asks for the Work the active configuration leaves
// behind, in one scope or all, and whether only to list it.
type ReconcileRequest = api.ReconcileRequest

// Reconciled is the answer of a scope reconcile.
type Reconciled struct {
	api.Reconciled
	Mutation `json:"-"`
}

// ReconcileScopes lists the Work an apply left behind and, unless
// DryRun, settles each by the documented rule (POST /v1/scopes/reconcile).
func (c *Client) ReconcileScopes(ctx context.Context, req ReconcileRequest, opts *RequestOptions) (*Reconciled, error) {
	var out Reconciled
	m, err := post(ctx, c, "/v1/scopes/reconcile", req, opts, true, &out)
	out.Mutation = m
	return &out, err
}
