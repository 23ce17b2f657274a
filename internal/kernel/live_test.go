package kernel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// liveRoutes inject chat messages into the Work that owns their key and
// interrupt it on a stop request.
func liveRoutes() []kernel.Route {
	return []kernel.Route{
		{ID: "open", MatchType: "chat.opened", Binding: "b1", Effect: kernel.EffectStart},
		{ID: "say", MatchType: "chat.message", Effect: kernel.EffectInject},
		{ID: "stop", MatchType: "chat.redirect", Effect: kernel.EffectInterrupt},
	}
}

// TestRouteInject: an injected event becomes an input of the running
// attempt's Work without stopping the attempt; on a Work with no running
// attempt it is queued; without an owner it drops.
func TestRouteInject(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = liveRoutes()
	ctx := context.Background()
	_, d := b.acceptRoute(t, storage.Event{Type: "chat.opened", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	work := d.Started
	// Ready, not yet claimed: queued for its first attempt, behind the
	// input that starts it.
	_, d = b.acceptRoute(t, storage.Event{Type: "chat.message", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	if d.Effect != kernel.EffectQueue || d.Work != work || d.QueuedAhead != 1 || !strings.Contains(d.Detail, "another input wakes Work "+work+" first") {
		t.Fatalf("inject into a ready Work: %+v", d)
	}
	exe := b.run(t, work)
	msg, d := b.acceptRoute(t, storage.Event{Type: "chat.message", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	if d.Effect != kernel.EffectInject || d.Work != work || d.QueuedAhead != 0 || d.Interrupted != "" {
		t.Fatalf("inject into a running Work: %+v", d)
	}
	got, err := b.store.GetExecution(ctx, exe.ID)
	if err != nil || got.State != storage.ExecutionRunning || got.Epoch != exe.Epoch {
		t.Fatalf("the attempt after an inject: %+v, %v; want it running at its epoch", got, err)
	}
	w, _ := b.store.GetWork(ctx, work)
	if w.State != storage.WorkRunning || w.InputCount != w.InputWatermark+1 {
		t.Fatalf("the Work after an inject: %+v, want running with one pending input", w)
	}
	if ins := inputsOf(t, b.store, work); ins[len(ins)-1] != msg.ID {
		t.Fatalf("inputs = %v, want the injected event last", ins)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "chat.message", Source: "chat", Scope: "s1", CorrelationKey: "c/9"})
	if d.Effect != kernel.EffectDrop || !strings.Contains(d.Detail, "the route injects, but no unfinished Work owns key") {
		t.Fatalf("inject without an owner: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "chat.message", Source: "chat", Scope: "s1", Work: work, CorrelationKey: "c/1"})
	if d.Effect != kernel.EffectDrop || !strings.Contains(d.Detail, "not queued back to it") {
		t.Fatalf("the Work's own event injected back into it: %+v", d)
	}
}

// TestRouteInterrupt: an interrupt fences the running attempt (stopping
// at its epoch), queues the event and makes the Work ready, so that its
// next attempt starts with it; a held Work's attempt is left alone.
func TestRouteInterrupt(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = liveRoutes()
	ctx := context.Background()
	_, d := b.acceptRoute(t, storage.Event{Type: "chat.opened", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	work := d.Started
	exe := b.run(t, work)
	redirect, d := b.acceptRoute(t, storage.Event{Type: "chat.redirect", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	if d.Effect != kernel.EffectInterrupt || d.Work != work || d.Interrupted != exe.ID {
		t.Fatalf("interrupt of a running Work: %+v", d)
	}
	got, err := b.store.GetExecution(ctx, exe.ID)
	if err != nil || got.State != storage.ExecutionStopping || !strings.Contains(got.Message, "interrupted by event "+redirect.ID) {
		t.Fatalf("the attempt after an interrupt: %+v, %v; want it stopping", got, err)
	}
	w, _ := b.store.GetWork(ctx, work)
	if w.State != storage.WorkReady || w.Held() || w.InputCount != w.InputWatermark+1 {
		t.Fatalf("the Work after an interrupt: %+v, want ready, unheld, with the event pending", w)
	}
	// Its fenced epoch can no longer act.
	if _, err := b.rt.LeaseGuard(ctx, b.store, exe.ID, exe.Epoch, "me"); err == nil {
		t.Fatal("the interrupted epoch still passes the lease guard")
	}
	// Now ready with no running attempt: a second interrupt only queues.
	_, d = b.acceptRoute(t, storage.Event{Type: "chat.redirect", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	if d.Effect != kernel.EffectQueue || d.Interrupted != "" || d.QueuedAhead != 1 {
		t.Fatalf("interrupt of a ready Work: %+v", d)
	}

	// A held running Work: queued, the attempt left running.
	_, d = b.acceptRoute(t, storage.Event{Type: "chat.opened", Source: "chat", Scope: "s1", CorrelationKey: "c/2"})
	held := d.Started
	hexe := b.run(t, held)
	err = b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := b.rt.HoldInTx(ctx, tx, held, kernel.HoldAttemptLost, "test")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "chat.redirect", Source: "chat", Scope: "s1", CorrelationKey: "c/2"})
	if d.Effect != kernel.EffectQueue || !strings.Contains(d.Detail, "is held") {
		t.Fatalf("interrupt of a held Work: %+v", d)
	}
	if got, _ := b.store.GetExecution(ctx, hexe.ID); got.State != storage.ExecutionRunning {
		t.Fatalf("a held Work's attempt was fenced: %+v", got)
	}
}

// TestTraceOfLiveEffectsIsRoute: trace and route agree on inject,
// interrupt and another input waking the Work first: each probe is traced
// (writing nothing) and then routed against the same state.
func TestTraceOfLiveEffectsIsRoute(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = liveRoutes()
	ctx := context.Background()
	b.acceptRoute(t, storage.Event{Type: "chat.opened", Source: "chat", Scope: "s1", CorrelationKey: "c/ready"})
	_, d := b.acceptRoute(t, storage.Event{Type: "chat.opened", Source: "chat", Scope: "s1", CorrelationKey: "c/run"})
	b.run(t, d.Started)
	probes := []struct {
		ev   storage.Event
		want string
	}{
		{storage.Event{Type: "chat.message", Scope: "s1", CorrelationKey: "c/run"}, "inject/0"},
		{storage.Event{Type: "chat.message", Scope: "s1", CorrelationKey: "c/ready"}, "queue/1"},
		{storage.Event{Type: "chat.message", Scope: "s1", CorrelationKey: "c/none"}, "drop/0"},
		// The inject above left an input pending on the running Work.
		{storage.Event{Type: "chat.redirect", Scope: "s1", CorrelationKey: "c/run"}, "interrupt/1"},
		{storage.Event{Type: "chat.message", Scope: "s1", CorrelationKey: "c/run"}, "queue/2"},
	}
	for i, p := range probes {
		before, _ := b.store.LastSeq(ctx)
		tr, err := b.ctl.Trace(ctx, p.ev)
		if err != nil {
			t.Fatal(err)
		}
		if after, _ := b.store.LastSeq(ctx); after != before {
			t.Fatalf("probe %d: trace wrote: seq %d -> %d", i, before, after)
		}
		p.ev.Source = kernel.SourceManual
		_, d := b.acceptRoute(t, p.ev)
		got := fmt.Sprintf("%s/%d", d.Effect, d.QueuedAhead)
		if got != p.want || d.Effect != tr.Effect || d.QueuedAhead != tr.QueuedAhead || d.Detail != tr.Detail || verdicts(d) != verdicts(tr) || d.Work != tr.Work {
			t.Errorf("probe %d: trace %+v, route %+v, want %s", i, tr, d, p.want)
		}
	}
}

// TestTraceOfAWaitingWorkCountsInputsAhead: an event queued for a waiting
// Work (it does not satisfy the Wait) reports the inputs already queued
// for it, in the trace as in the route.
func TestTraceOfAWaitingWorkCountsInputsAhead(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = liveRoutes()
	ctx := context.Background()
	_, d := b.acceptRoute(t, storage.Event{Type: "chat.opened", Source: "chat", Scope: "s1", CorrelationKey: "c/1"})
	exe := b.run(t, d.Started)
	seq, _ := b.store.LastSeq(ctx)
	b.waitOn(t, exe, kernel.WaitSpec{Types: []string{"chat.approved"}}, seq)
	for i, want := range []int64{0, 1} {
		ev := storage.Event{Type: "chat.message", Scope: "s1", CorrelationKey: "c/1"}
		tr, err := b.ctl.Trace(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		ev.Source = kernel.SourceManual
		_, d := b.acceptRoute(t, ev)
		if d.Effect != kernel.EffectQueue || d.QueuedAhead != want || tr.Effect != d.Effect || tr.QueuedAhead != d.QueuedAhead {
			t.Fatalf("message %d to a waiting Work: trace %+v, route %+v, want queue with %d ahead", i, tr, d, want)
		}
	}
}
