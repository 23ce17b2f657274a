package management

import (
	"net/http"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/wire"
)

// ReconcileBody is the body of POST /v1/scopes/reconcile.
type ReconcileBody struct {
	Scope  string `json:"scope,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// reconcileScopes serves POST /v1/scopes/reconcile: the kernel lists the
// Work the active generation leaves behind and, unless dry_run, settles
// each by its rule, stamping the operator; the handler only decodes and
// shapes the answer. Like every control it needs operate and an
// Idempotency-Key (a dry run too: the key replays its answer).
func (rs *Resources) reconcileScopes(r *http.Request) (any, error) {
	var body ReconcileBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if len(body.Scope) > 128 {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "scope is not a scope id")
	}
	delivery, err := derived(r, "scopes.reconcile", body.Scope)
	if err != nil {
		return nil, err
	}
	ctx, _ := actorContext(r)
	res, err := rs.control.ReconcileScopes(ctx, kernel.ReconcileRequest{Scope: body.Scope, DryRun: body.DryRun, DeliveryID: delivery})
	if err != nil {
		return nil, err
	}
	return wire.Reconciled(res), nil
}
