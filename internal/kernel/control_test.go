package kernel_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func TestEmit(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = []kernel.Route{{ID: "r", MatchType: "deploy.requested", Binding: "deployer", Effect: kernel.EffectStart}}
	res, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.requested", Data: []byte(`{"env":"prod"}`), DeliveryID: "idem-1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Source != kernel.SourceManual || res.Event.Actor != "operator:ann" || res.Decision.Started == "" {
		t.Fatalf("emit = %+v", res)
	}
	again, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.requested", DeliveryID: "idem-1"})
	if err != nil || again.Event.ID != res.Event.ID || again.Decision.Started != "" {
		t.Fatalf("replayed emit = %+v, %v", again, err)
	}
	// The route's start pinned the root with the runtime's limits; an
	// unrouted root is pinned by the operator's derived event instead.
	if pin, err := b.store.GetCausalRoot(context.Background(), res.Event.ID); err != nil || pin.MaxDepth != kernel.DefaultCausalLimits.MaxDepth {
		t.Fatalf("the route start did not pin the root: %+v, %v", pin, err)
	}
	root, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note"})
	if err != nil || root.Decision.Effect != kernel.EffectUnmatched {
		t.Fatalf("unrouted emit = %+v, %v", root, err)
	}
	derived, err := b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "deploy.note", Parent: root.Event.ID})
	if err != nil || derived.Event.Depth != 1 || derived.Event.Root != root.Event.ID {
		t.Fatalf("derived emit = %+v, %v", derived, err)
	}
	if pin, err := b.store.GetCausalRoot(context.Background(), root.Event.ID); err != nil || pin.MaxDepth != 8 {
		t.Fatalf("the operator's derived event did not pin the configured limits: %+v, %v", pin, err)
	}
	_, err = b.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "core.work.finished"})
	mustCode(t, err, "core_type_reserved")
	_, err = b.ctl.Emit(context.Background(), kernel.EmitRequest{Scope: "s1", Type: "a.b"})
	mustCode(t, err, "actor_required")
}

func TestCancelWorkFencesTheLiveAttempt(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/1"}})
	exe := b.run(t, w.ID)
	res, err := b.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID, Reason: "wrong repo", DeliveryID: "idem-c"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Type != kernel.TypeWorkCancelled || res.Event.Actor != "operator:ann" || res.Work.State != storage.WorkCancelled {
		t.Fatalf("cancel = %+v", res)
	}
	b.reopen(t)
	got, _ := b.store.GetExecution(ctx, exe.ID)
	if got.State != storage.ExecutionStopping || got.Epoch != exe.Epoch {
		t.Fatalf("the live attempt was not fenced: %+v", got)
	}
	if _, err := b.rt.LeaseGuard(ctx, b.store, exe.ID, exe.Epoch, "me"); kernel.CodeOf(err) != "not_running" {
		t.Fatalf("lease guard of the fenced attempt: %v", err)
	}
	if _, err := b.store.GetKeyOwner(ctx, "s1", "pr/1"); err == nil {
		t.Fatal("a cancelled Work still owns its key")
	}
	finished, _ := b.store.ListEvents(ctx, &storage.ListEventsParams{Type: kernel.TypeWorkFinished, Work: w.ID})
	if len(finished) != 1 || finished[0].Parent != res.Event.ID {
		t.Fatalf("core.work.finished = %+v", finished)
	}
	// The retried request reports the same cancel; a new one is refused.
	again, err := b.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID, DeliveryID: "idem-c"})
	if err != nil || !again.Replayed || again.Event.ID != res.Event.ID {
		t.Fatalf("replayed cancel = %+v, %v", again, err)
	}
	_, err = b.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID})
	mustCode(t, err, "work_state")
	if got.ExitCode != nil {
		t.Fatalf("a stopping attempt has exit code %d", *got.ExitCode)
	}
	code := 143
	if _, err := b.ctl.ConfirmStopped(ctx, exe.ID, exe.Epoch, "process group gone", &code); err != nil {
		t.Fatal(err)
	}
	got, _ = b.store.GetExecution(ctx, exe.ID)
	if got.State != storage.ExecutionFinished || got.Result != storage.ResultCancelled || got.ExitCode == nil || *got.ExitCode != 143 {
		t.Fatalf("after ConfirmStopped: %+v", got)
	}
	// The record keeps why it was stopped, then how it ended.
	if got.Message != "cancelled with its Work by operator:ann; process group gone" {
		t.Fatalf("message = %q", got.Message)
	}
	_, err = b.ctl.ConfirmStopped(ctx, exe.ID, exe.Epoch, "", nil)
	mustCode(t, err, "execution_state")
}

func TestCancelExecutionHoldsUntilRetry(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	exe := b.run(t, w.ID)
	res, err := b.ctl.CancelExecution(operator, kernel.ControlRequest{Target: exe.ID, DeliveryID: "idem-x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Execution.State != storage.ExecutionStopping || res.Work.BlockedReason != kernel.HoldOperatorCancelled || res.Work.State != storage.WorkReady {
		t.Fatalf("execution cancel = %+v", res)
	}
	again, err := b.ctl.CancelExecution(operator, kernel.ControlRequest{Target: exe.ID, DeliveryID: "idem-x"})
	if err != nil || !again.Replayed || again.Execution.State != storage.ExecutionStopping {
		t.Fatalf("replayed execution cancel = %+v, %v", again, err)
	}
	_, err = b.ctl.CancelExecution(operator, kernel.ControlRequest{Target: exe.ID})
	mustCode(t, err, "execution_state")
	if claimable, _ := b.store.ListClaimable(ctx, 10); len(claimable) != 0 {
		t.Fatalf("a held Work is claimable: %+v", claimable)
	}
	b.reopen(t)
	r, err := b.ctl.Retry(operator, kernel.ControlRequest{Target: w.ID})
	if err != nil || r.Work.Held() || r.Event.Type != kernel.TypeManualRetry {
		t.Fatalf("retry = %+v, %v", r, err)
	}
	// Still not claimable: the cancelled attempt has not stopped.
	if claimable, _ := b.store.ListClaimable(ctx, 10); len(claimable) != 0 {
		t.Fatalf("claimable while the old attempt is stopping: %+v", claimable)
	}
	stopped, err := b.ctl.ConfirmStopped(ctx, exe.ID, exe.Epoch, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// No exit code was observed: none is recorded (not 0).
	if stopped.ExitCode != nil || stopped.Message != "cancelled by operator:ann; stopped" {
		t.Fatalf("stopped without an observed exit: %+v", stopped)
	}
	if claimable, _ := b.store.ListClaimable(ctx, 10); len(claimable) != 1 {
		t.Fatalf("claimable after the stop = %+v", claimable)
	}
	ins := inputsOf(t, b.store, w.ID)
	if ins[len(ins)-1] != r.Event.ID {
		t.Fatalf("the retry event is not the Work's latest input: %v", ins)
	}
}

func TestRetryPolicy(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	finish := func(id string, st storage.WorkState) {
		t.Helper()
		if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
			_, _, err := b.rt.FinishWorkInTx(ctx, tx, id, kernel.Finish{State: st, Message: "x"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	failed := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"k/1"}})
	finish(failed.ID, storage.WorkFailed)
	r, err := b.ctl.Retry(operator, kernel.ControlRequest{Target: failed.ID})
	if err != nil || r.Work.State != storage.WorkReady || r.Work.OutcomeMessage != "" {
		t.Fatalf("retry of a failed Work = %+v, %v", r.Work, err)
	}
	if owner, err := b.store.GetKeyOwner(ctx, "s1", "k/1"); err != nil || owner.ID != failed.ID {
		t.Fatalf("the retried Work did not take its key back: %+v, %v", owner, err)
	}

	taken := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"k/2"}})
	finish(taken.ID, storage.WorkCancelled)
	b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"k/2"}})
	_, err = b.ctl.Retry(operator, kernel.ControlRequest{Target: taken.ID})
	mustCode(t, err, "key_taken")
	if w, _ := b.store.GetWork(ctx, taken.ID); w.State != storage.WorkCancelled {
		t.Fatalf("a refused retry changed the Work: %s", w.State)
	}

	ok := b.createWork(t, kernel.CreateWorkRequest{})
	finish(ok.ID, storage.WorkSucceeded)
	_, err = b.ctl.Retry(operator, kernel.ControlRequest{Target: ok.ID})
	mustCode(t, err, "work_state")
	ready := b.createWork(t, kernel.CreateWorkRequest{})
	_, err = b.ctl.Retry(operator, kernel.ControlRequest{Target: ready.ID})
	mustCode(t, err, "work_state")
	_, err = b.ctl.Retry(operator, kernel.ControlRequest{Target: "wrk_missing"})
	mustCode(t, err, "work_not_found")

	held := b.createWork(t, kernel.CreateWorkRequest{})
	if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := b.rt.HoldInTx(ctx, tx, held.ID, kernel.HoldSecretUnavailable, "secret api_key could not be resolved")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r, err = b.ctl.Retry(operator, kernel.ControlRequest{Target: held.ID})
	if err != nil || r.Work.Held() || r.Work.State != storage.WorkReady {
		t.Fatalf("retry of a held Work = %+v, %v", r.Work, err)
	}
}
