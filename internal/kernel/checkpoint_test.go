package kernel_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// A control Event is a checkpoint, not an input: a cancel's
// core.work.cancelled (or core.execution.cancelled) is bound to its Work
// in its envelope, is never queued behind the Work's earlier inputs, and
// fences the live attempt in its own transaction however much runnable
// input is waiting. So nothing queued before it can delay the fence.
func TestControlEventsFenceAheadOfQueuedInput(t *testing.T) {
	ctx := context.Background()
	for name, cancel := range map[string]func(b *bundle, w storage.Work, exe storage.Execution) (kernel.ControlResult, error){
		"cancel work": func(b *bundle, w storage.Work, _ storage.Execution) (kernel.ControlResult, error) {
			return b.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID, Reason: "stop"})
		},
		"cancel execution": func(b *bundle, _ storage.Work, exe storage.Execution) (kernel.ControlResult, error) {
			return b.ctl.CancelExecution(operator, kernel.ControlRequest{Target: exe.ID, Reason: "stop"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			w := b.createWork(t, kernel.CreateWorkRequest{})
			exe := b.run(t, w.ID)
			// Runnable input the attempt has not acknowledged, accepted
			// and queued before the control.
			queued := inputsOf(t, b.store, w.ID)
			for range 3 {
				err := b.store.WithTx(ctx, func(tx storage.Tx) error {
					ev, err := b.rt.AcceptInTx(ctx, tx, storage.Event{Type: "note.added", Source: "x", Scope: w.Scope, CorrelationKey: w.ID})
					if err != nil {
						return err
					}
					queued = append(queued, ev.ID)
					_, err = b.rt.QueueInputInTx(ctx, tx, w.ID, ev.ID)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			before := inputsOf(t, b.store, w.ID)
			if len(before) != len(queued) {
				t.Fatalf("queued inputs %v, want %v", before, queued)
			}

			res, err := cancel(b, w, exe)
			if err != nil {
				t.Fatal(err)
			}
			b.reopen(t)

			// The control is bound to the Work in its envelope...
			ctl, err := b.store.GetEvent(ctx, res.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ctl.Work != w.ID || ctl.CorrelationKey != w.ID || ctl.Parent != w.CreatedEvent || ctl.Actor != "operator:ann" {
				t.Fatalf("control event %+v: want it bound to Work %s, caused by its creation, with the operator", ctl, w.ID)
			}
			// ...and never routed as an input: the queue is what it was.
			if after := inputsOf(t, b.store, w.ID); len(after) != len(before) {
				t.Fatalf("inputs after the control %v, want only the earlier %v", after, before)
			}
			// The live attempt was fenced in the control's transaction:
			// its epoch can no longer act.
			got, err := b.store.GetExecution(ctx, exe.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != storage.ExecutionStopping {
				t.Fatalf("execution after the control is %s, want stopping", got.State)
			}
			if _, err := b.rt.LeaseGuard(ctx, b.store, exe.ID, exe.Epoch, "me"); err == nil {
				t.Fatal("the fenced epoch still passes the lease guard")
			}
			// The queued input does not make the Work runnable again.
			wk, err := b.store.GetWork(ctx, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !wk.State.Terminal() && !wk.Held() {
				t.Fatalf("the Work is %s and not held after its control, want it ended or held", wk.State)
			}
		})
	}
}
