package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The state machines of hold and release, rebind and attach, and a manual
// Work's identity (see docs/kernel.md).

func TestHoldKeepsARunningAttemptAndStopsNewOnes(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	exe := b.run(t, w.ID)
	res, err := b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "freeze for the release", DeliveryID: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Type != kernel.TypeManualHold || res.Event.Actor != "operator:ann" || res.Work.BlockedReason != kernel.HoldOperator ||
		res.Work.BlockedDetail != "freeze for the release" || res.Work.State != storage.WorkRunning {
		t.Fatalf("hold = %+v", res)
	}
	if kernel.HoldBy(res.Work.BlockedReason) != kernel.HoldByOperator || kernel.HoldBy(kernel.HoldAttemptLost) != kernel.HoldBySystem || kernel.HoldBy("") != "" {
		t.Fatal("HoldBy does not tell the operator's holds from the system's")
	}
	b.reopen(t)
	got, _ := b.store.GetExecution(ctx, exe.ID)
	if got.State != storage.ExecutionRunning || got.Epoch != exe.Epoch {
		t.Fatalf("a hold without stop fenced the attempt: %+v", got)
	}
	if _, err := b.rt.LeaseGuard(ctx, b.store, exe.ID, exe.Epoch, "me"); err != nil {
		t.Fatalf("the running attempt of a held Work lost its authority: %v", err)
	}
	// Replayed under the same delivery id: the same event, nothing done.
	again, err := b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "freeze for the release", DeliveryID: "h1"})
	if err != nil || !again.Replayed || again.Event.ID != res.Event.ID {
		t.Fatalf("replayed hold = %+v, %v", again, err)
	}
	_, err = b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "again"})
	mustCode(t, err, "work_held")
	_, err = b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID})
	mustCode(t, err, "invalid_work")
	_, err = b.ctl.Hold(operator, kernel.HoldRequest{Target: "work_nope", Reason: "x"})
	mustCode(t, err, "work_not_found")
	_, err = b.ctl.Hold(context.Background(), kernel.HoldRequest{Target: w.ID, Reason: "x"})
	mustCode(t, err, "actor_required")

	rel, err := b.ctl.Release(operator, kernel.ControlRequest{Target: w.ID, DeliveryID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if rel.Event.Type != kernel.TypeManualRelease || rel.Event.Actor != "operator:ann" || rel.Work.Held() || rel.Work.State != storage.WorkRunning {
		t.Fatalf("release = %+v", rel)
	}
	if rel.Work.InputCount != w.InputCount {
		t.Fatalf("release queued an input: %d, was %d", rel.Work.InputCount, w.InputCount)
	}
	_, err = b.ctl.Release(operator, kernel.ControlRequest{Target: w.ID})
	mustCode(t, err, "not_held")
	if again, err := b.ctl.Release(operator, kernel.ControlRequest{Target: w.ID, DeliveryID: "r1"}); err != nil || !again.Replayed {
		t.Fatalf("replayed release = %+v, %v", again, err)
	}
}

func TestHoldStopFencesTheAttempt(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	exe := b.run(t, w.ID)
	res, err := b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "runaway", Stop: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Work.State != storage.WorkReady || res.Work.BlockedReason != kernel.HoldOperator || res.Execution.State != storage.ExecutionStopping {
		t.Fatalf("hold --stop = %+v", res)
	}
	if _, err := b.rt.LeaseGuard(ctx, b.store, exe.ID, exe.Epoch, "me"); kernel.CodeOf(err) != "not_running" {
		t.Fatalf("lease guard of the stopped attempt: %v", err)
	}
	// Once the stop is confirmed the Work is still not claimed: it is
	// held.
	if _, err := b.ctl.ConfirmStopped(ctx, exe.ID, exe.Epoch, "stopped", nil); err != nil {
		t.Fatal(err)
	}
	if ready, err := b.store.ListClaimable(ctx, 10); err != nil || len(ready) != 0 {
		t.Fatalf("claimable while held = %+v, %v", ready, err)
	}
	if _, err := b.ctl.Release(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	if ready, err := b.store.ListClaimable(ctx, 10); err != nil || len(ready) != 1 {
		t.Fatalf("claimable once released = %+v, %v", ready, err)
	}
}

func TestHoldStopOfAParkedAttempt(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	exe := b.run(t, w.ID)
	b.waitOn(t, exe, kernel.WaitSpec{Types: []string{"ci.done"}}, 0)
	park := storage.ExecutionParked
	if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, State: &park, Now: b.clock.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	res, err := b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "later", Stop: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Work.State != storage.WorkReady || res.Execution.State != storage.ExecutionFinished || res.Execution.Result != storage.ResultCancelled {
		t.Fatalf("hold --stop of a parked attempt = %+v", res)
	}
	if _, err := b.store.GetActiveWait(ctx, w.ID); err == nil {
		t.Fatal("the Wait of the stopped attempt is still active")
	}
}

func TestReleaseRefusesASystemHold(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := b.rt.HoldInTx(ctx, tx, w.ID, kernel.HoldSecretUnavailable, "a secret could not be resolved")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := b.ctl.Release(operator, kernel.ControlRequest{Target: w.ID})
	mustCode(t, err, "system_hold")
	_, err = b.ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "mine"})
	mustCode(t, err, "work_held")
	// An execution cancel's hold is the operator's: release lifts it.
	w2 := b.createWork(t, kernel.CreateWorkRequest{Scope: "s2"})
	exe := b.run(t, w2.ID)
	if _, err := b.ctl.CancelExecution(operator, kernel.ControlRequest{Target: exe.ID}); err != nil {
		t.Fatal(err)
	}
	if res, err := b.ctl.Release(operator, kernel.ControlRequest{Target: w2.ID}); err != nil || res.Work.Held() {
		t.Fatalf("release of operator_cancelled = %+v, %v", res, err)
	}
	b.finish(t, w2.ID, storage.WorkSucceeded)
	_, err = b.ctl.Hold(operator, kernel.HoldRequest{Target: w2.ID, Reason: "too late"})
	mustCode(t, err, "work_state")
}

var rebindScopes = kernel.ScopeTable{
	"s1":  {Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"b1": {Grants: []string{"deploy"}}, "b2": {Grants: []string{"read"}}}},
	"off": {Generation: 1, Active: false, Bindings: map[string]kernel.BindingView{"b1": {}, "b2": {}}},
}

func TestRebind(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	ctl := b.rulesControl(rebindScopes)
	res, err := ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: "b1", Grants: []string{"deploy"}})
	if err != nil {
		t.Fatal(err)
	}
	w := res.Work
	exe := b.run(t, w.ID)
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b2", Grants: []string{}})
	mustCode(t, err, "attempt_live")
	// The refusal wrote nothing: no control event.
	if evs, _ := b.store.ListEvents(ctx, &storage.ListEventsParams{Type: kernel.TypeManualRebind}); len(evs) != 0 {
		t.Fatalf("a refused rebind left events: %+v", evs)
	}
	finished, ok := storage.ExecutionFinished, storage.ResultFailed
	ready := storage.WorkReady
	if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, State: &finished, Result: &ok, Now: b.clock.Now()}); err != nil {
			return err
		}
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, State: &ready, Now: b.clock.Now()})
		if err != nil {
			return err
		}
		_, err = b.rt.HoldInTx(ctx, tx, w.ID, kernel.HoldBindingUnavailable, "binding b1 is not available")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b9"})
	mustCode(t, err, "unknown_binding")
	// Its grant deploy is not one of b2's.
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b2"})
	mustCode(t, err, "unknown_grant")
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID})
	mustCode(t, err, "invalid_work")
	moved, err := ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b2", Grants: []string{"read"}, DeliveryID: "rb1"})
	if err != nil {
		t.Fatal(err)
	}
	if moved.Event.Type != kernel.TypeManualRebind || moved.Event.Actor != "operator:ann" || moved.Work.Binding != "b2" ||
		len(moved.Work.Grants) != 1 || moved.Work.Grants[0] != "read" || moved.Work.Held() {
		t.Fatalf("rebind = %+v", moved)
	}
	b.reopen(t)
	if got, _ := b.store.GetWork(ctx, w.ID); got.Binding != "b2" {
		t.Fatalf("stored binding = %s", got.Binding)
	}
	ctl = b.rulesControl(rebindScopes)
	if again, err := ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b2", Grants: []string{"read"}, DeliveryID: "rb1"}); err != nil || !again.Replayed || again.Event.ID != moved.Event.ID {
		t.Fatalf("replayed rebind = %+v, %v", again, err)
	}
	// The same delivery id for another binding is another request.
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b1", DeliveryID: "rb1"})
	mustCode(t, err, "event_conflict")
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b2", Grants: []string{"read"}})
	mustCode(t, err, "invalid_work")
	// A held Work that is not binding_unavailable stays held.
	if _, err := ctl.Hold(operator, kernel.HoldRequest{Target: w.ID, Reason: "keep"}); err != nil {
		t.Fatal(err)
	}
	back, err := ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b1", Grants: []string{}})
	if err != nil || back.Work.BlockedReason != kernel.HoldOperator || back.Work.Binding != "b1" {
		t.Fatalf("rebind of an operator-held Work = %+v, %v", back, err)
	}
	b.finish(t, w.ID, storage.WorkSucceeded)
	_, err = ctl.Rebind(operator, kernel.RebindRequest{Target: w.ID, Binding: "b2", Grants: []string{}})
	mustCode(t, err, "work_state")
}

func TestAttach(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	other := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/2"}})
	ev, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "ci.result", Data: []byte(`{"ok":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s2", Type: "ci.result"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Event: ev.Event.ID, Key: "pr/1", DeliveryID: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Type != kernel.TypeManualAttach || res.Event.Actor != "operator:ann" || res.Work.InputCount != w.InputCount+1 {
		t.Fatalf("attach = %+v", res)
	}
	ins, _ := b.store.ListInputs(ctx, &storage.ListInputsParams{Work: w.ID, AfterPosition: w.InputCount})
	if len(ins) != 1 || ins[0].Event != ev.Event.ID {
		t.Fatalf("inputs after attach = %+v", ins)
	}
	if owner, err := b.store.GetKeyOwner(ctx, "s1", "pr/1"); err != nil || owner.ID != w.ID {
		t.Fatalf("owner of pr/1 = %+v, %v", owner, err)
	}
	// A later event on the key routes to the Work.
	b.routes["s1"] = []kernel.Route{{ID: "q", MatchType: "ci.*", Effect: kernel.EffectQueue}}
	later, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "ci.rerun", CorrelationKey: "pr/1"})
	if err != nil || later.Decision.Work != w.ID {
		t.Fatalf("a later event on the attached key = %+v, %v", later.Decision, err)
	}
	if again, err := b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Event: ev.Event.ID, Key: "pr/1", DeliveryID: "a1"}); err != nil || !again.Replayed || again.Event.ID != res.Event.ID {
		t.Fatalf("replayed attach = %+v, %v", again, err)
	}
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Event: ev.Event.ID})
	mustCode(t, err, "already_input")
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Event: foreign.Event.ID})
	mustCode(t, err, "invalid_work")
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Event: "evt_nope"})
	mustCode(t, err, "event_not_found")
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Key: "pr/2"})
	mustCode(t, err, "key_taken")
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Key: "pr/1"})
	mustCode(t, err, "invalid_work")
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Key: other.ID})
	mustCode(t, err, "invalid_work")
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID})
	mustCode(t, err, "invalid_work")
	// A refused attach is one transaction: the key of a request whose
	// event is refused is not taken.
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Key: "pr/3", Event: foreign.Event.ID})
	mustCode(t, err, "invalid_work")
	if _, err := b.store.GetKeyOwner(ctx, "s1", "pr/3"); err == nil {
		t.Fatal("a refused attach took its key")
	}
	b.finish(t, other.ID, storage.WorkSucceeded)
	if _, err := b.ctl.Attach(operator, kernel.AttachRequest{Target: w.ID, Key: "pr/2"}); err != nil {
		t.Fatalf("a key a finished Work released: %v", err)
	}
	_, err = b.ctl.Attach(operator, kernel.AttachRequest{Target: other.ID, Key: "pr/9"})
	mustCode(t, err, "work_state")
}

func TestManualWorkIdentity(t *testing.T) {
	b := setup(t)
	req := kernel.CreateWorkRequest{ID: "work_derived", Scope: "s1", Binding: "b1", Keys: []string{"pr/1"}, Grants: []string{"deploy"},
		Input: &kernel.InputSpec{Type: "manual.input", Data: json.RawMessage(`{"a":1,"b":2}`)}}
	first, err := b.ctl.CreateWork(operator, req)
	if err != nil {
		t.Fatal(err)
	}
	// The same request, its data's members in another order: the same Work.
	same := req
	same.Input = &kernel.InputSpec{Type: "manual.input", Data: json.RawMessage(`{"b":2, "a":1}`)}
	again, err := b.ctl.CreateWork(operator, same)
	if err != nil || !again.Replayed || again.Work.ID != first.Work.ID || again.Input.ID != first.Input.ID {
		t.Fatalf("replayed create = %+v, %v", again, err)
	}
	for name, change := range map[string]func(r *kernel.CreateWorkRequest){
		"input data": func(r *kernel.CreateWorkRequest) {
			r.Input = &kernel.InputSpec{Type: "manual.input", Data: json.RawMessage(`{"a":2}`)}
		},
		"input type": func(r *kernel.CreateWorkRequest) {
			r.Input = &kernel.InputSpec{Type: "manual.other", Data: req.Input.Data}
		},
		"no input":    func(r *kernel.CreateWorkRequest) { r.Input = nil },
		"grants":      func(r *kernel.CreateWorkRequest) { r.Grants = nil },
		"key":         func(r *kernel.CreateWorkRequest) { r.Keys = []string{"pr/2"} },
		"no key":      func(r *kernel.CreateWorkRequest) { r.Keys = nil },
		"other scope": func(r *kernel.CreateWorkRequest) { r.Scope, r.Grants = "s2", nil },
	} {
		r := req
		change(&r)
		_, err := b.ctl.CreateWork(operator, r)
		if kernel.CodeOf(err) != "work_conflict" {
			t.Errorf("%s: a retry with another request = %v, want work_conflict", name, err)
		}
	}
	// A Work created without input conflicts with a retry that has one.
	bare := kernel.CreateWorkRequest{ID: "work_bare", Scope: "s1", Binding: "b1"}
	if _, err := b.ctl.CreateWork(operator, bare); err != nil {
		t.Fatal(err)
	}
	if res, err := b.ctl.CreateWork(operator, bare); err != nil || !res.Replayed {
		t.Fatalf("replayed bare create = %+v, %v", res, err)
	}
	bare.Input = &kernel.InputSpec{Type: "manual.input", Data: json.RawMessage(`{}`)}
	_, err = b.ctl.CreateWork(operator, bare)
	mustCode(t, err, "work_conflict")
}
