package kernel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// TestReconcileScopes: after an apply the Work it left behind is listed
// (a removed scope's, an inactive scope's, one whose binding is gone), a
// dry run changes nothing, and a reconcile cancels the first (releasing
// its keys), holds the others with scope_reconciled and records one event
// per Work with the operator; a retry under the same delivery id acts on
// nothing again, and a settled Work is not listed any more.
func TestReconcileScopes(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	before := kernel.ScopeTable{
		"gone": {Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"b1": {}}},
		"off":  {Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"b1": {}}},
		"kept": {Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"b1": {}, "old": {}}},
	}
	ctl := b.rulesControl(before)
	mk := func(scope, binding string, keys ...string) string {
		res, err := ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: scope, Binding: binding, Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return res.Work.ID
	}
	gone := mk("gone", "b1", "pr/1")
	off := mk("off", "b1")
	rebind := mk("kept", "old")
	fine := mk("kept", "b1")
	// The next generation: gone removed, off disabled, kept without old.
	after := kernel.ScopeTable{
		"off":  {Generation: 2, Active: false, Bindings: map[string]kernel.BindingView{"b1": {}}},
		"kept": {Generation: 2, Active: true, Bindings: map[string]kernel.BindingView{"b1": {}}},
	}
	ctl = b.rulesControl(after)

	if _, err := ctl.ReconcileScopes(ctx, kernel.ReconcileRequest{DryRun: true}); kernel.CodeOf(err) != kernel.ErrActorRequired.Code {
		t.Fatalf("reconcile without an operator: %v", err)
	}
	seq, _ := b.store.LastSeq(ctx)
	dry, err := ctl.ReconcileScopes(operator, kernel.ReconcileRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	got := func(res kernel.ReconcileResult) string {
		var parts []string
		for _, it := range res.Items {
			parts = append(parts, fmt.Sprintf("%s:%s:%s:%v", it.Work, it.Problem, it.Action, it.Keys))
		}
		return strings.Join(parts, " ")
	}
	want := fmt.Sprintf("%s:scope_removed:cancel:[pr/1 %s] %s:scope_inactive:hold:[%s] %s:binding_removed:hold:[%s]", gone, gone, off, off, rebind, rebind)
	if got(dry) != want || !dry.DryRun {
		t.Fatalf("dry run = %s\nwant %s", got(dry), want)
	}
	if !strings.Contains(dry.Items[2].Detail, "default binding b1") {
		t.Errorf("binding detail = %q, want the default binding named", dry.Items[2].Detail)
	}
	if now, _ := b.store.LastSeq(ctx); now != seq {
		t.Fatalf("a dry run wrote events: %d -> %d", seq, now)
	}
	if w, _ := b.store.GetWork(ctx, gone); w.State.Terminal() {
		t.Fatal("a dry run cancelled Work")
	}

	one, err := ctl.ReconcileScopes(operator, kernel.ReconcileRequest{Scope: "off", DeliveryID: "k1"})
	if err != nil || len(one.Items) != 1 || one.Items[0].Work != off {
		t.Fatalf("reconcile of one scope = %+v, %v", one, err)
	}
	res, err := ctl.ReconcileScopes(operator, kernel.ReconcileRequest{DeliveryID: "k2"})
	if err != nil || len(res.Items) != 2 {
		t.Fatalf("reconcile = %+v, %v (off's Work, settled, is not listed again)", res, err)
	}
	for _, it := range res.Items {
		ev, err := b.store.GetEvent(ctx, it.Event)
		if err != nil || ev.Type != kernel.TypeScopeReconciled || ev.Actor != "operator:ann" || ev.Work != it.Work || ev.DeliveryID != "k2/"+it.Work {
			t.Errorf("event of %s = %+v, %v", it.Work, ev, err)
		}
	}
	if w, _ := b.store.GetWork(ctx, gone); w.State != storage.WorkCancelled {
		t.Errorf("the removed scope's Work = %s, want cancelled", w.State)
	}
	if _, err := b.store.GetKeyOwner(ctx, "gone", "pr/1"); err == nil {
		t.Error("the cancelled Work still owns its key")
	}
	for _, id := range []string{off, rebind} {
		if w, _ := b.store.GetWork(ctx, id); w.State != storage.WorkReady || w.BlockedReason != kernel.HoldScopeReconciled || !strings.Contains(w.BlockedDetail, "operator:ann") {
			t.Errorf("Work %s = %s held %q (%q), want ready held scope_reconciled by the operator", id, w.State, w.BlockedReason, w.BlockedDetail)
		}
	}
	if w, _ := b.store.GetWork(ctx, fine); w.Held() {
		t.Errorf("a Work with nothing wrong was held: %+v", w)
	}

	// The same delivery id again: nothing left to list, nothing recorded.
	seq, _ = b.store.LastSeq(ctx)
	again, err := ctl.ReconcileScopes(operator, kernel.ReconcileRequest{DeliveryID: "k2"})
	if err != nil || len(again.Items) != 0 {
		t.Fatalf("reconcile again = %+v, %v", again, err)
	}
	if now, _ := b.store.LastSeq(ctx); now != seq {
		t.Fatalf("a second reconcile wrote events: %d -> %d", seq, now)
	}
	// A retry releases the hold; with the binding still gone, a reconcile
	// under the same delivery id replays its event and holds nothing.
	if _, err := ctl.Retry(operator, kernel.ControlRequest{Target: rebind}); err != nil {
		t.Fatal(err)
	}
	rep, err := ctl.ReconcileScopes(operator, kernel.ReconcileRequest{Scope: "kept", DeliveryID: "k2"})
	if err != nil || len(rep.Items) != 1 || !rep.Items[0].Replayed || rep.Items[0].Event != res.Items[1].Event {
		t.Fatalf("replayed reconcile = %+v, %v", rep, err)
	}
	if w, _ := b.store.GetWork(ctx, rebind); w.Held() {
		t.Errorf("a replayed reconcile held the Work again: %+v", w)
	}
}
