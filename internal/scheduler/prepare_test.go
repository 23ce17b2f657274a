package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// One binding's secret hangs (the resolver blocks until the test releases
// it): the round does not wait for it. Another binding's Work starts, a
// cancel's physical stop happens, the hanging claim keeps its lease, and a
// cancel of the hanging claim itself ends it without starting anything.
func TestASlowSecretDelaysNoOtherBinding(t *testing.T) {
	entered, release := make(chan string, 4), make(chan struct{})
	h := newHarness(t, func(o *scheduler.Options) {
		o.Secrets = func(ctx context.Context, req scheduler.SecretsRequest) (map[string]string, error) {
			if req.BindingID != "br" {
				return nil, nil
			}
			entered <- req.ExecutionID
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	defer close(release)
	ctx := context.Background()
	round := func() {
		t.Helper()
		if err := h.s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}

	running := h.create("b1")
	round()
	first := h.plain.Next(t)

	slow := h.create("br")
	h.create("br") // waits for its binding's turn, not beside it
	round()
	slowExe := <-entered

	// Another binding's Work starts while the secret hangs.
	other := h.create("b1")
	round()
	if seg := h.plain.Next(t); seg.Req.WorkID != other.ID {
		t.Fatalf("started %s, want the other binding's Work %s", seg.Req.WorkID, other.ID)
	}
	// A cancel's stop happens while it hangs.
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: first.Req.ExecutionID}); err != nil {
		t.Fatal(err)
	}
	round()
	h.settle(first)
	round()
	if exe := h.execution(first.Req.ExecutionID); exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled {
		t.Fatalf("the cancelled attempt of %s is %+v, want stopped", running.ID, exe)
	}
	select {
	case id := <-entered:
		t.Fatalf("a second claim of the hanging binding (%s) was prepared beside the first", id)
	default:
	}

	// The hanging claim's lease is renewed meanwhile.
	h.clock.Advance(20 * time.Second)
	if lost, err := h.s.Heartbeat(ctx); err != nil || lost != 0 {
		t.Fatalf("heartbeat lost %d, %v", lost, err)
	}
	if exe := h.execution(slowExe); !exe.LeaseExpiresAt.After(h.clock.Now().Add(20 * time.Second)) {
		t.Fatalf("the lease of the claim being prepared was not renewed: %+v", exe)
	}

	// Cancelling the hanging claim cuts its preparation short: nothing
	// starts and its stop is confirmed at once.
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: slowExe}); err != nil {
		t.Fatal(err)
	}
	round()
	h.s.WaitPrepared(context.Background())
	if exe := h.execution(slowExe); exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled {
		t.Fatalf("the cancelled claim being prepared is %+v, want finished cancelled", exe)
	}
	if seg := h.resumer.TryNext(); seg != nil {
		t.Fatalf("the cancelled claim started a segment: %+v", seg.Req)
	}
	if got := h.work(slow.ID); got.BlockedReason != kernel.HoldOperatorCancelled {
		t.Fatalf("work = %+v", got)
	}
	// Its binding's turn passes to the Work that waited.
	round()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Work of the binding was never prepared")
	}
}
