package wire

import (
	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// Reconciled is the body of POST /v1/scopes/reconcile.
func Reconciled(res kernel.ReconcileResult) api.Reconciled {
	out := api.Reconciled{Generation: res.Generation, DryRun: res.DryRun, Items: make([]api.ReconcileItem, 0, len(res.Items))}
	for _, it := range res.Items {
		item := api.ReconcileItem{
			Work: it.Work, Scope: it.Scope, Binding: it.Binding, State: string(it.State), Problem: it.Problem, Action: it.Action,
			Detail: it.Detail, Keys: append([]string{}, it.Keys...), Event: it.Event, Existing: it.Replayed,
		}
		if it.Result.ID != "" {
			w := Work(it.Result)
			item.Result = &w
		}
		out.Items = append(out.Items, item)
	}
	return out
}
