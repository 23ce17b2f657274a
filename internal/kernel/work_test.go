package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

var operator = kernel.WithActor(context.Background(), "operator:ann")

func (b *bundle) createWork(t *testing.T, req kernel.CreateWorkRequest) storage.Work {
	t.Helper()
	if req.Scope == "" {
		req.Scope = "s1"
	}
	if req.Binding == "" {
		req.Binding = "b1"
	}
	res, err := b.ctl.CreateWork(operator, req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Work
}

// run claims the Work by hand: a running execution at epoch 1 owned by
// "me", leased for a minute.
func (b *bundle) run(t *testing.T, work string) storage.Execution {
	t.Helper()
	ctx := context.Background()
	var exe storage.Execution
	err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		w, err := tx.GetWork(ctx, work)
		if err != nil {
			return err
		}
		running := storage.WorkRunning
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: work, FromStates: []storage.WorkState{storage.WorkReady}, State: &running, InputWatermark: &w.InputCount, AddAttempts: 1, Now: b.clock.Now()}); err != nil {
			return err
		}
		exe, err = tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: b.ids.New("exe"), Work: work, Scope: w.Scope, Binding: w.Binding, Executor: "x",
			Generation: 1, Owner: "me", LeaseExpiresAt: b.clock.Now().Add(time.Minute), Deadline: b.clock.Now().Add(time.Hour), InputWatermark: w.InputCount, CreatedAt: b.clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// waitOn puts a running Work into waiting with spec registered.
func (b *bundle) waitOn(t *testing.T, exe storage.Execution, spec kernel.WaitSpec, watermark int64) storage.Wait {
	t.Helper()
	ctx := context.Background()
	var wt storage.Wait
	err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		waiting, finished, ok := storage.WorkWaiting, storage.ExecutionFinished, storage.ResultSucceeded
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, State: &finished, Result: &ok, Now: b.clock.Now()}); err != nil {
			return err
		}
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: exe.Work, FromStates: []storage.WorkState{storage.WorkRunning}, State: &waiting, Now: b.clock.Now()}); err != nil {
			return err
		}
		var err error
		wt, err = b.rt.RegisterWaitInTx(ctx, tx, kernel.RegisterWait{Work: exe.Work, Execution: exe.ID, Epoch: exe.Epoch, Spec: spec, DefaultWatermark: watermark})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return wt
}

func TestCreateWork(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	res, err := b.ctl.CreateWork(operator, kernel.CreateWorkRequest{ID: "wrk_derived1", Scope: "s1", Binding: "b1", Keys: []string{"ticket/7"}, Grants: []string{"deploy"},
		Input: &kernel.InputSpec{Type: "ticket.assigned", Data: []byte(`{"n":7}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Work.State != storage.WorkReady || res.Created.Type != kernel.TypeWorkCreated || res.Created.Actor != "operator:ann" || res.Created.Depth != 0 {
		t.Fatalf("created %+v with %+v", res.Work, res.Created)
	}
	if res.Input.Parent != res.Created.ID || res.Input.Type != "ticket.assigned" || res.Work.InputCount != 1 {
		t.Fatalf("input %+v, work %+v", res.Input, res.Work)
	}
	// The retry finds the Work its first transaction assumed new: what
	// that transaction wrote (a second core.work.created) is undone.
	seq, _ := b.store.LastSeq(ctx)
	again, err := b.ctl.CreateWork(operator, kernel.CreateWorkRequest{ID: "wrk_derived1", Scope: "s1", Binding: "b1", Keys: []string{"ticket/7"}, Grants: []string{"deploy"},
		Input: &kernel.InputSpec{Type: "ticket.assigned", Data: []byte(`{"n":7}`)}})
	if err != nil || !again.Replayed || again.Work.ID != res.Work.ID || again.Input.ID != res.Input.ID || again.Created.ID != res.Created.ID {
		t.Fatalf("retried create = %+v, %v", again, err)
	}
	if after, _ := b.store.LastSeq(ctx); after != seq {
		t.Fatalf("a retried create accepted events: last seq %d, was %d", after, seq)
	}
	// The same ID asked for another Work is still a conflict.
	_, err = b.ctl.CreateWork(operator, kernel.CreateWorkRequest{ID: "wrk_derived1", Scope: "s1", Binding: "b1"})
	mustCode(t, err, "work_conflict")
	b.reopen(t)
	keys, _ := b.store.ListWorkKeys(ctx, "wrk_derived1")
	w, _ := b.store.GetWork(ctx, "wrk_derived1")
	if fmt.Sprint(keys) != "[ticket/7 wrk_derived1]" || fmt.Sprint(w.Grants) != "[deploy]" || fmt.Sprint(inputsOf(t, b.store, w.ID)) != fmt.Sprint([]string{res.Input.ID}) {
		t.Fatalf("after reopen: keys %v, work %+v", keys, w)
	}
	// A key owned by an unfinished Work is refused, and the refusal
	// leaves nothing behind.
	before, _ := b.store.LastSeq(ctx)
	_, err = b.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: "b1", Keys: []string{"ticket/7"}})
	mustCode(t, err, "key_taken")
	if after, _ := b.store.LastSeq(ctx); after != before {
		t.Fatal("a refused create left events behind")
	}
	// No operator, no Work.
	_, err = b.ctl.CreateWork(context.Background(), kernel.CreateWorkRequest{Scope: "s1", Binding: "b1"})
	mustCode(t, err, "actor_required")
	_, err = b.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: "b1", Input: &kernel.InputSpec{Type: "core.work.finished"}})
	mustCode(t, err, "core_type_reserved")
}

func TestWaitWakesOnOwnedKey(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/3"}})
	exe := b.run(t, w.ID)
	last, _ := b.store.LastSeq(ctx)
	wt := b.waitOn(t, exe, kernel.WaitSpec{Types: []string{"review.done"}, Timeout: time.Hour}, last)
	if wt.State != storage.WaitActive || !wt.OnWorkKeys || wt.Timer == "" || !wt.TimeoutAt.Equal(b.clock.Now().Add(time.Hour)) {
		t.Fatalf("wait = %+v", wt)
	}
	b.routes["s1"] = []kernel.Route{{ID: "all", MatchType: "review.*", Binding: "b1", Effect: kernel.EffectStart}}

	d, err := b.ctl.Trace(ctx, storage.Event{Type: "review.done", Scope: "s1", CorrelationKey: "pr/3"})
	if err != nil || d.Effect != kernel.EffectWake || d.Wait != wt.ID || verdicts(d) != "all=bypassed " {
		t.Fatalf("trace of the waking event = %+v, %v", d, err)
	}
	other, d := b.acceptRoute(t, storage.Event{Type: "review.comment", Source: "x", Scope: "s1", CorrelationKey: "pr/3"})
	if d.Effect != kernel.EffectQueue || d.Work != w.ID {
		t.Fatalf("a non-matching event for a waiting Work = %+v", d)
	}
	b.reopen(t)
	res, err := b.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: "pr/3", Type: "review.done", DeliveryID: "wake-1"})
	if err != nil || !res.Matched || res.Decision.Effect != kernel.EffectWake {
		t.Fatalf("wake = %+v, %v", res, err)
	}
	again, err := b.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: "pr/3", Type: "review.done", DeliveryID: "wake-1"})
	if err != nil || !again.Matched || again.Event.ID != res.Event.ID {
		t.Fatalf("replayed wake = %+v, %v", again, err)
	}
	b.reopen(t)
	got, _ := b.store.GetWait(ctx, wt.ID)
	work, _ := b.store.GetWork(ctx, w.ID)
	ins := inputsOf(t, b.store, w.ID)
	if got.State != storage.WaitSatisfied || got.SatisfiedBy != res.Event.ID || work.State != storage.WorkReady || ins[len(ins)-1] != res.Event.ID || ins[len(ins)-2] != other.ID {
		t.Fatalf("after wake: wait %+v, work %+v, inputs %v", got, work, ins)
	}
	// A second wake matches nothing: the Work is not waiting any more.
	res2, err := b.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: "pr/3", Type: "review.done"})
	if err != nil || res2.Matched {
		t.Fatalf("wake of a ready Work = %+v, %v", res2, err)
	}
}

func TestWaitBackscanFindsEventsSinceWatermark(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/4"}})
	exe := b.run(t, w.ID)
	mark, _ := b.store.LastSeq(ctx)
	// Arrives after the attempt's input, before the wait is registered.
	early, _ := b.acceptRoute(t, storage.Event{Type: "review.done", Source: "x", Scope: "s1", CorrelationKey: "pr/4"})
	// Events about the waiting Work itself never wake it.
	b.acceptRoute(t, storage.Event{Type: "review.done", Source: kernel.SourceExecution, Scope: "s1", Work: w.ID, CorrelationKey: "pr/4"})
	wt := b.waitOn(t, exe, kernel.WaitSpec{Types: []string{"review.done"}}, mark)
	if wt.State != storage.WaitSatisfied || wt.SatisfiedBy != early.ID {
		t.Fatalf("backscanned wait = %+v, want satisfied by %s", wt, early.ID)
	}
	if got, _ := b.store.GetWork(ctx, w.ID); got.State != storage.WorkReady {
		t.Fatalf("work after an immediate wake = %s", got.State)
	}
	// With the watermark past the event, nothing wakes it.
	w2 := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/5"}})
	exe2 := b.run(t, w2.ID)
	b.acceptRoute(t, storage.Event{Type: "review.done", Source: "x", Scope: "s1", CorrelationKey: "pr/5"})
	mark, _ = b.store.LastSeq(ctx)
	if wt := b.waitOn(t, exe2, kernel.WaitSpec{Types: []string{"review.done"}}, mark); wt.State != storage.WaitActive {
		t.Fatalf("a wait woke on an event before its watermark: %+v", wt)
	}
}

func TestParentWaitsOnChildFinished(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	parent := b.createWork(t, kernel.CreateWorkRequest{})
	pexe := b.run(t, parent.ID)
	child := b.createWork(t, kernel.CreateWorkRequest{Parent: parent.ID})
	other := b.createWork(t, kernel.CreateWorkRequest{})
	mark, _ := b.store.LastSeq(ctx)
	wt := b.waitOn(t, pexe, kernel.WaitSpec{Types: []string{kernel.TypeWorkFinished}}, mark)
	var fin storage.Event
	err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		// Another Work finishing does not wake the parent.
		if _, _, err := b.rt.FinishWorkInTx(ctx, tx, other.ID, kernel.Finish{State: storage.WorkFailed, Message: "x"}); err != nil {
			return err
		}
		var err error
		_, fin, err = b.rt.FinishWorkInTx(ctx, tx, child.ID, kernel.Finish{State: storage.WorkSucceeded, Message: "done", Data: []byte(`{"pr":9}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	b.reopen(t)
	got, _ := b.store.GetWait(ctx, wt.ID)
	p, _ := b.store.GetWork(ctx, parent.ID)
	c, _ := b.store.GetWork(ctx, child.ID)
	keys, _ := b.store.ListWorkKeys(ctx, child.ID)
	if got.SatisfiedBy != fin.ID || p.State != storage.WorkReady || c.State != storage.WorkSucceeded || c.OutcomeMessage != "done" || len(keys) != 0 {
		t.Fatalf("wait %+v, parent %s, child %+v, child keys %v", got, p.State, c, keys)
	}
	if fin.CorrelationKey != child.ID || fin.Type != kernel.TypeWorkFinished || string(fin.Data) != fmt.Sprintf(`{"data":{"pr":9},"message":"done","parent_work":"%s","state":"succeeded","work_id":"%s"}`, parent.ID, child.ID) {
		t.Fatalf("core.work.finished = %+v %s", fin, fin.Data)
	}
	err = b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, _, err := b.rt.FinishWorkInTx(ctx, tx, child.ID, kernel.Finish{State: storage.WorkFailed})
		return err
	})
	mustCode(t, err, "work_state")
}

func TestWaitOnExplicitKeyAndTimeout(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	a := b.createWork(t, kernel.CreateWorkRequest{})
	aexe := b.run(t, a.ID)
	mark, _ := b.store.LastSeq(ctx)
	wa := b.waitOn(t, aexe, kernel.WaitSpec{Keys: []string{"deploy/1"}, Timeout: time.Minute}, mark)
	// An event on the key, which nobody owns, is an "other wake".
	d, err := b.ctl.Trace(ctx, storage.Event{Type: "deploy.done", Scope: "s1", CorrelationKey: "deploy/1"})
	if err != nil || d.Effect != kernel.EffectUnmatched || len(d.OtherWakes) != 1 || d.OtherWakes[0].Wait != wa.ID {
		t.Fatalf("trace = %+v, %v", d, err)
	}
	// Timeouts: a second Work times out instead.
	c := b.createWork(t, kernel.CreateWorkRequest{})
	cexe := b.run(t, c.ID)
	wc := b.waitOn(t, cexe, kernel.WaitSpec{Types: []string{"never.comes"}, Timeout: time.Minute}, mark)
	_, d = b.acceptRoute(t, storage.Event{Type: "deploy.done", Source: "x", Scope: "s1", CorrelationKey: "deploy/1"})
	if !d.Woke() {
		t.Fatalf("route did not wake: %+v", d)
	}
	b.clock.Advance(2 * time.Minute)
	due, _ := b.store.ListDueTimers(ctx, b.clock.Now(), 10)
	if len(due) != 2 {
		t.Fatalf("due timers = %+v", due)
	}
	fired := map[string]bool{}
	for _, tm := range due {
		err := b.store.WithTx(ctx, func(tx storage.Tx) error {
			if err := tx.FireTimer(ctx, tm.ID, b.clock.Now()); err != nil {
				return err
			}
			var err error
			fired[tm.Target], err = b.rt.TimeoutWaitInTx(ctx, tx, tm.Target)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if fired[wa.ID] || !fired[wc.ID] {
		t.Fatalf("timeouts fired = %v: a satisfied wait timed out or an active one did not", fired)
	}
	b.reopen(t)
	got, _ := b.store.GetWait(ctx, wc.ID)
	work, _ := b.store.GetWork(ctx, c.ID)
	ins := inputsOf(t, b.store, c.ID)
	last, _ := b.store.GetEvent(ctx, ins[len(ins)-1])
	if got.State != storage.WaitTimedOut || work.State != storage.WorkReady || last.Type != kernel.TypeWaitTimedOut || last.ID != got.SatisfiedBy {
		t.Fatalf("timed out: wait %+v, work %s, last input %+v", got, work.State, last)
	}
}

// LeaseGuardCall answers what its one read found: the execution, its
// running Work and the latest configuration generation (what a toolbelt
// call's ceiling is checked as of), inside a transaction too; and it
// refuses a missing execution, and a Work that stopped running, as
// LeaseGuard does.
func TestLeaseGuardCallAnswersWhatItRead(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	exe := b.run(t, w.ID)
	for n := int64(0); n <= 2; n++ {
		if n > 0 {
			g := &storage.Generation{Number: n, Hash: fmt.Sprint("hash-", n), Normalized: []byte(`{"version":1}`), Actor: "operator:ann", CreatedAt: b.clock.Now()}
			if err := b.store.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertGeneration(ctx, g) }); err != nil {
				t.Fatal(err)
			}
		}
		var inTx storage.CallGuard
		if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			inTx, err = b.rt.LeaseGuardCall(ctx, tx, exe.ID, 1, "me")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		read, err := b.rt.LeaseGuardCall(ctx, b.store, exe.ID, 1, "me")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []storage.CallGuard{read, inTx} {
			if g.Execution.ID != exe.ID || g.Work.ID != w.ID || g.Work.State != storage.WorkRunning || g.Declared || g.LatestGeneration != n {
				t.Fatalf("after %d generations the guard read %+v", n, g)
			}
		}
	}
	_, err := b.rt.LeaseGuardCall(ctx, b.store, "exe_none", 1, "me")
	mustCode(t, err, "execution_not_found")
	if !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("%v is not forbidden", err)
	}
	held := storage.WorkWaiting
	if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, State: &held, Now: b.clock.Now()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	g, err := b.rt.LeaseGuardCall(ctx, b.store, exe.ID, 1, "me")
	mustCode(t, err, "not_running")
	if g.Work.State != storage.WorkWaiting {
		t.Fatalf("a refused guard holds the Work %+v, want the one it read", g.Work)
	}
}

func TestLeaseGuardAndDeclare(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	w := b.createWork(t, kernel.CreateWorkRequest{})
	exe := b.run(t, w.ID)
	guard := func(epoch int64, owner string) error {
		_, err := b.rt.LeaseGuard(ctx, b.store, exe.ID, epoch, owner)
		return err
	}
	if err := guard(1, "me"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		epoch int64
		owner string
		code  string
	}{{2, "me", "stale_epoch"}, {0, "me", "stale_epoch"}, {1, "other", "stale_epoch"}} {
		err := guard(c.epoch, c.owner)
		mustCode(t, err, c.code)
		if !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) {
			t.Fatalf("%v is not a bare forbidden", err)
		}
	}
	// The holder stops trusting the lease the margin before it expires.
	b.clock.Advance(time.Minute - kernel.DefaultLeaseMargin)
	mustCode(t, guard(1, "me"), "lease_expired")
	b.clock.Advance(-time.Minute + kernel.DefaultLeaseMargin + time.Second)

	declare := func(epoch int64, d kernel.Declaration) error {
		return b.store.WithTx(ctx, func(tx storage.Tx) error { return b.rt.Declare(ctx, tx, exe.ID, epoch, d) })
	}
	mustCode(t, declare(1, kernel.Declaration{}), "invalid_declaration")
	mustCode(t, declare(1, kernel.Declaration{Outcome: &kernel.OutcomeSpec{Outcome: "cancelled"}}), "invalid_declaration")
	mustCode(t, declare(2, kernel.Declaration{Wait: &kernel.WaitSpec{}}), "stale_epoch")
	if err := declare(1, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}, Timeout: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	b.reopen(t)
	err := guard(1, "me")
	mustCode(t, err, "authority_released")
	if !errors.Is(err, extension.ErrAuthorityReleased) || !errors.Is(err, extension.ErrUnauthorized) {
		t.Fatalf("%v does not unwrap to ErrAuthorityReleased and ErrUnauthorized", err)
	}
	err = declare(1, kernel.Declaration{Outcome: &kernel.OutcomeSpec{Outcome: storage.WorkSucceeded}})
	mustCode(t, err, "authority_released")
	// Even once its lease ran out, the segment learns first that its
	// declaration landed.
	b.clock.Advance(2 * time.Minute)
	mustCode(t, guard(1, "me"), "authority_released")
	mustCode(t, guard(2, "me"), "stale_epoch")
	d, err := b.store.GetPendingDeclaration(ctx, exe.ID)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := kernel.ParseDeclaration(d)
	if err != nil || parsed.Wait == nil || parsed.Wait.Timeout != time.Hour || parsed.Wait.Types[0] != "review.done" {
		t.Fatalf("stored declaration = %+v, %v", parsed, err)
	}
}

// readsTx counts a transaction's reads of Work by id.
type readsTx struct {
	storage.Tx
	reads *[]string
}

func (t readsTx) GetWork(ctx context.Context, id string) (storage.Work, error) {
	*t.reads = append(*t.reads, id)
	return t.Tx.GetWork(ctx, id)
}

// readsStore is a Store whose transactions count their Work reads.
type readsStore struct {
	storage.Store
	reads []string
}

func (s *readsStore) WithTx(ctx context.Context, fn func(storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(readsTx{Tx: tx, reads: &s.reads}) })
}

// A first creation under a derived ID reads no Work: it assumes the
// Work new, and the insert says otherwise only on a retry, which then
// reads it.
func TestCreateWorkAssumesADerivedIDNew(t *testing.T) {
	b := setup(t)
	rs := &readsStore{Store: b.store}
	ctl := kernel.NewControl(kernel.ControlOptions{Runtime: b.rt, Store: rs, Scopes: scopes})
	req := kernel.CreateWorkRequest{ID: "wrk_assumed1", Scope: "s1", Binding: "b1"}
	res, err := ctl.CreateWork(operator, req)
	if err != nil || res.Replayed || res.Work.ID != "wrk_assumed1" {
		t.Fatalf("create = %+v, %v", res, err)
	}
	if len(rs.reads) != 0 {
		t.Fatalf("a first creation read Work %v", rs.reads)
	}
	again, err := ctl.CreateWork(operator, req)
	if err != nil || !again.Replayed || again.Created.ID != res.Created.ID {
		t.Fatalf("retried create = %+v, %v", again, err)
	}
	if fmt.Sprint(rs.reads) != "[wrk_assumed1]" {
		t.Fatalf("a retried creation read Work %v, want its own once", rs.reads)
	}
}
