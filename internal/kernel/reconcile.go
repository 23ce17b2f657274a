package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// TypeScopeReconciled is the control event of one Work settled by a scope
// reconcile: bound to the Work (its key is the Work's id), not routed.
const TypeScopeReconciled = "core.scope.reconciled"

// HoldScopeReconciled is the blocked reason of a Work a scope reconcile
// held; a retry releases it.
const HoldScopeReconciled = "scope_reconciled"

// What a scope reconcile finds wrong with a Work left behind by an apply.
const (
	// ProblemScopeRemoved: the Work's scope is no longer in the active
	// generation, or is a tombstone there.
	ProblemScopeRemoved = "scope_removed"
	// ProblemScopeInactive: the scope is there but not active (disabled,
	// or under an inactive parent).
	ProblemScopeInactive = "scope_inactive"
	// ProblemBindingRemoved: the scope no longer has the Work's binding.
	ProblemBindingRemoved = "binding_removed"
)

// How a scope reconcile settles a Work.
const (
	// ReconcileCancel: the Work is cancelled (its attempt fenced, its
	// keys released): what a removed scope's Work gets, since nothing of
	// that scope can run again.
	ReconcileCancel = "cancel"
	// ReconcileHold: the Work is held with scope_reconciled until an
	// operator fixes the configuration (or rebinds it) and retries it.
	ReconcileHold = "hold"
)

// ReconcileRequest asks for the Work an apply left behind.
type ReconcileRequest struct {
	// Scope limits it to one scope ("" for every scope).
	Scope string
	// DryRun lists the Work and what would be done, changing nothing.
	DryRun bool
	// DeliveryID, derived from the Idempotency-Key, makes each settled
	// Work's control event <DeliveryID>/<work>: a retried request acts
	// on no Work twice.
	DeliveryID string
}

// ReconcileItem is one Work left behind and how it is (or would be)
// settled.
type ReconcileItem struct {
	Work    string
	Scope   string
	Binding string
	State   storage.WorkState
	Problem string
	Action  string
	Detail  string
	// Keys are the keys the Work owns (for a removed scope, what the
	// cancel releases).
	Keys []string
	// Event is the control event that settled it ("" in a dry run).
	Event string
	// Replayed: an earlier request with the same delivery id settled it.
	Replayed bool
	// Result is the Work after it was settled (zero in a dry run).
	Result storage.Work
}

// ReconcileResult is every Work left behind, in the order of the Work
// list (oldest first).
type ReconcileResult struct {
	Generation int64
	DryRun     bool
	Items      []ReconcileItem
}

// ReconcileScopes lists the nonterminal Work the active configuration
// generation leaves behind (in Scope, or every scope), and unless DryRun
// settles each by the rule (rule):
//
//   - its scope removed: cancel, with the scope reconcile's control event
//     as the cause (fences the attempt, ends the Wait, releases its keys);
//   - its scope inactive: hold with scope_reconciled;
//   - its binding gone from its scope: hold with scope_reconciled, the
//     detail naming the scope's default binding (its only one) when it
//     has one.
//
// A Work already held with scope_reconciled is settled and not listed. A
// running attempt of a held Work goes on; only new attempts wait. Each
// settled Work gets a core.scope.reconciled event stamped with the
// operator, in its own transaction.
func (c *Control) ReconcileScopes(ctx context.Context, req ReconcileRequest) (ReconcileResult, error) {
	actor, err := ActorOf(ctx)
	if err != nil {
		return ReconcileResult{}, err
	}
	out := ReconcileResult{DryRun: req.DryRun, Items: []ReconcileItem{}}
	out.Generation = lookupScope(ctx, c.scopes, 0, req.Scope).Generation
	var after *storage.Position
	for {
		page, err := c.store.ListWork(ctx, &storage.ListWorkParams{Scope: req.Scope, Page: storage.Page{After: after, Limit: storage.MaxLimit}})
		if err != nil {
			return out, err
		}
		for _, w := range page {
			it, ok := c.leftBehind(ctx, w)
			if !ok {
				continue
			}
			if it.Keys, err = ownedKeys(ctx, c.store, w); err != nil {
				return out, err
			}
			if !req.DryRun {
				if err := c.settle(ctx, actor, req.DeliveryID, &it); err != nil {
					return out, err
				}
			}
			out.Items = append(out.Items, it)
		}
		if len(page) < storage.MaxLimit {
			return out, nil
		}
		last := page[len(page)-1]
		after = &storage.Position{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// leftBehind is the rule: what is wrong with a Work under the active
// generation, and how it is settled; ok is false for a Work that is fine,
// finished, or already settled.
func (c *Control) leftBehind(ctx context.Context, w storage.Work) (ReconcileItem, bool) {
	if w.State.Terminal() || w.BlockedReason == HoldScopeReconciled {
		return ReconcileItem{}, false
	}
	it := ReconcileItem{Work: w.ID, Scope: w.Scope, Binding: w.Binding, State: w.State}
	v, known := c.scopes.Scope(ctx, 0, w.Scope)
	switch {
	case !known || v.Removed:
		it.Problem, it.Action = ProblemScopeRemoved, ReconcileCancel
		it.Detail = fmt.Sprintf("scope %s is not in configuration generation %d; nothing of it runs again, so the Work is cancelled and its keys released", w.Scope, v.Generation)
	case !v.Active:
		it.Problem, it.Action = ProblemScopeInactive, ReconcileHold
		it.Detail = fmt.Sprintf("scope %s is not active in configuration generation %d; enable it and retry the Work, or cancel it", w.Scope, v.Generation)
	default:
		if _, ok := v.Bindings[w.Binding]; ok {
			return ReconcileItem{}, false
		}
		it.Problem, it.Action = ProblemBindingRemoved, ReconcileHold
		it.Detail = fmt.Sprintf("scope %s has no binding %s in configuration generation %d; ", w.Scope, w.Binding, v.Generation)
		if def, ok := defaultBinding(v); ok {
			it.Detail += fmt.Sprintf("rebind it to the scope's default binding %s (open-conduit work rebind %s --binding %s) and retry it, or cancel it", def, w.ID, def)
		} else {
			it.Detail += "rebind it to one of the scope's bindings and retry it, or cancel it"
		}
	}
	return it, true
}

// defaultBinding is a scope's default binding: its only one.
func defaultBinding(v ScopeView) (string, bool) {
	if len(v.Bindings) != 1 {
		return "", false
	}
	for id := range v.Bindings {
		return id, true
	}
	return "", false
}

// ownedKeys are the keys a nonterminal Work owns in its scope, sorted.
func ownedKeys(ctx context.Context, rd storage.Reader, w storage.Work) ([]string, error) {
	ever, err := rd.ListKeysEverOwned(ctx, w.ID)
	if err != nil {
		return nil, err
	}
	keys := []string{}
	for _, k := range ever {
		if owner, err := rd.GetKeyOwner(ctx, w.Scope, k); err == nil && owner.ID == w.ID && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// settle applies an item's action in one transaction with its control
// event. A replayed event acts on nothing; a Work that changed since it was
// listed (finished, or already held by a reconcile) is left as it is.
func (c *Control) settle(ctx context.Context, actor, deliveryID string, it *ReconcileItem) error {
	return c.store.WithTx(ctx, func(tx storage.Tx) error {
		w, err := tx.GetWork(ctx, it.Work)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"work_id": it.Work, "problem": it.Problem, "action": it.Action, "detail": it.Detail})
		ev := storage.Event{
			Type: TypeScopeReconciled, Source: SourceManual, Scope: w.Scope, Work: w.ID, CorrelationKey: w.ID,
			Data: body, Parent: w.CreatedEvent, Actor: actor,
		}
		if deliveryID != "" {
			ev.DeliveryID = deliveryID + "/" + w.ID
		}
		ev, err = c.rt.AcceptInTx(ctx, tx, ev)
		if err != nil {
			return err
		}
		it.Event, it.Replayed = ev.ID, ev.Replayed
		if ev.Replayed || w.State.Terminal() || w.BlockedReason == HoldScopeReconciled {
			it.Result = w
			return nil
		}
		switch it.Action {
		case ReconcileCancel:
			it.Result, err = c.rt.CancelWorkInTx(ctx, tx, w.ID, ev)
		default:
			it.Result, err = c.rt.HoldInTx(ctx, tx, w.ID, HoldScopeReconciled, "held by "+actor+" (scope reconcile): "+it.Detail)
		}
		return err
	})
}
