package humanport_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/human"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/daemon/humanport"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

var t0 = time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC)

// world is a real SQLite store with one Work of scope s1, parked before
// its first attempt on a wait for human.approval.decided correlated to
// it (as the human start gate parks it), an operator's core.action Event
// (the decision's cause), and the port over them.
type world struct {
	store  *sqlite.Store
	clock  *clock.Fake
	port   *humanport.Port
	work   storage.Work
	wait   storage.Wait
	action storage.Event
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{clock: clock.NewFake(t0)}
	s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "state.db"), Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w.store = s
	gen := ids.NewGenerator(w.clock, rand.NewChaCha8([32]byte{5}))
	rt, err := kernel.New(kernel.Options{Clock: w.clock, IDs: gen})
	if err != nil {
		t.Fatal(err)
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		res, err := rt.CreateWorkInTx(ctx, tx, kernel.NewWork{Scope: "s1", Binding: "b1"})
		if err != nil {
			return err
		}
		w.work = res.Work
		w.wait, err = rt.StartWaitInTx(ctx, tx, kernel.StartWait{
			Work: res.Work.ID, Revision: res.Work.Revision, Reason: "approval awaits an operator",
			Spec: kernel.WaitSpec{Types: []string{human.EventDecided}, Keys: []string{res.Work.ID}, Timeout: time.Hour, Registration: human.Name},
		})
		if err != nil {
			return err
		}
		w.action, err = rt.AcceptInTx(ctx, tx, storage.Event{Type: "core.action", Source: kernel.SourceAction, Scope: "s1", Actor: "operator:alice"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	w.port = &humanport.Port{Store: s, Runtime: rt, IDs: gen}
	return w
}

func (w *world) create(t *testing.T, kind, op, hash string) human.Approval {
	t.Helper()
	a, err := w.port.Create(context.Background(), human.Approval{
		Scope: "s1", Work: w.work.ID, Binding: "b1", Kind: kind, Operation: op, InputHash: hash,
		State: human.StatePending, CreatedAt: w.clock.Now(), ExpiresAt: w.clock.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (w *world) decidedEvents(t *testing.T) []storage.Event {
	t.Helper()
	evs, err := w.store.ListEvents(context.Background(), &storage.ListEventsParams{Type: human.EventDecided, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// An approval decided with Wake accepts human.approval.decided in the
// same transaction: caused by the action's Event, by the operator,
// correlated to the Work, with the decision's data; it satisfies the
// parked Work's wait. A second decision is a conflict and accepts nothing
// more.
func TestDecideAcceptsTheDecidedEventAndWakesTheWork(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.create(t, human.KindStart, "", "")
	if a.ID == "" || a.State != human.StatePending {
		t.Fatalf("created %+v, want a pending approval with an id", a)
	}
	if got, err := w.port.Open(ctx, human.Key{Work: w.work.ID, Kind: human.KindStart}); err != nil || got.ID != a.ID {
		t.Fatalf("open approval %+v (%v), want %s", got, err, a.ID)
	}
	w.clock.Advance(time.Minute)
	d, err := w.port.Decide(ctx, human.Decision{ID: a.ID, State: human.StateApproved, Actor: "operator:alice", Note: "ok", At: w.clock.Now(), Wake: true, Cause: w.action.ID})
	if err != nil {
		t.Fatal(err)
	}
	if d.State != human.StateApproved || d.Actor != "operator:alice" || d.Note != "ok" || !d.DecidedAt.Equal(w.clock.Now()) {
		t.Errorf("decided %+v", d)
	}
	evs := w.decidedEvents(t)
	if len(evs) != 1 {
		t.Fatalf("%d decided events, want 1", len(evs))
	}
	ev := evs[0]
	var data map[string]string
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if ev.Source != kernel.SourceAction || ev.Scope != "s1" || ev.CorrelationKey != w.work.ID || ev.Parent != w.action.ID || ev.Actor != "operator:alice" ||
		data["approval"] != a.ID || data["state"] != human.StateApproved || data["kind"] != human.KindStart || data["work"] != w.work.ID {
		t.Errorf("the decided event %+v (data %s)", ev, ev.Data)
	}
	wait, err := w.store.GetWait(ctx, w.wait.ID)
	if err != nil {
		t.Fatal(err)
	}
	if wait.State != storage.WaitSatisfied || wait.SatisfiedBy != ev.ID {
		t.Errorf("the parked Work's wait %+v, want satisfied by %s", wait, ev.ID)
	}
	if wk, err := w.store.GetWork(ctx, w.work.ID); err != nil || wk.State == storage.WorkWaiting {
		t.Errorf("the Work is %s (%v) after the decision, want it woken", wk.State, err)
	}

	_, err = w.port.Decide(ctx, human.Decision{ID: a.ID, State: human.StateDenied, Actor: "operator:bob", Note: "no", At: w.clock.Now(), Wake: true, Cause: w.action.ID})
	if !errors.Is(err, extension.ErrConflict) {
		t.Errorf("a second decision: %v, want ErrConflict", err)
	}
	if n := len(w.decidedEvents(t)); n != 1 {
		t.Errorf("%d decided events after a refused second decision, want 1", n)
	}
	if got, err := w.port.Get(ctx, a.ID); err != nil || got.State != human.StateApproved || got.Actor != "operator:alice" {
		t.Errorf("the approval after a refused second decision %+v (%v)", got, err)
	}
}

// When the Event cannot be accepted the decision is rolled back with it:
// the approval stays pending and the Work keeps waiting.
func TestDecideRollsBackWhenTheEventIsRefused(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.create(t, human.KindCall, "e2e.op", "abc")
	_, err := w.port.Decide(ctx, human.Decision{ID: a.ID, State: human.StateApproved, Actor: "operator:alice", At: w.clock.Now(), Wake: true, Cause: "evt_01nosuchevent0000000000000"})
	if err == nil {
		t.Fatal("a decision caused by an Event that does not exist was taken")
	}
	if got, err := w.port.Get(ctx, a.ID); err != nil || got.State != human.StatePending || got.Actor != "" {
		t.Errorf("the approval after the refused event %+v (%v), want still pending", got, err)
	}
	if n := len(w.decidedEvents(t)); n != 0 {
		t.Errorf("%d decided events, want none", n)
	}
	if wait, err := w.store.GetWait(ctx, w.wait.ID); err != nil || wait.State != storage.WaitActive {
		t.Errorf("the wait %+v (%v), want still active", wait, err)
	}
}

// Without Wake (an expiry the gate records) nothing is accepted.
func TestDecideWithoutWakeAcceptsNothing(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	a := w.create(t, human.KindCall, "e2e.op", "abc")
	if _, err := w.port.Decide(ctx, human.Decision{ID: a.ID, State: human.StateExpired, Actor: "host:timeout", At: w.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	if n := len(w.decidedEvents(t)); n != 0 {
		t.Errorf("%d decided events after an expiry, want none", n)
	}
}

// One open approval per key; consumption closes it, once; lookups of what
// does not exist are ErrNotFound; a list names its scope.
func TestOpenCreateConsumeAndList(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	key := human.Key{Work: w.work.ID, Kind: human.KindCall, Operation: "e2e.op", InputHash: "abc"}
	if _, err := w.port.Open(ctx, key); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("open with none: %v, want ErrNotFound", err)
	}
	a := w.create(t, human.KindCall, "e2e.op", "abc")
	_, err := w.port.Create(ctx, human.Approval{Scope: "s1", Work: w.work.ID, Kind: human.KindCall, Operation: "e2e.op", InputHash: "abc",
		State: human.StatePending, CreatedAt: w.clock.Now(), ExpiresAt: w.clock.Now().Add(time.Hour)})
	if !errors.Is(err, extension.ErrConflict) {
		t.Errorf("a second open approval of the key: %v, want ErrConflict", err)
	}
	other := w.create(t, human.KindCall, "e2e.op", "def") // another input is another call
	if _, err := w.port.Decide(ctx, human.Decision{ID: a.ID, State: human.StateApproved, Actor: "operator:alice", At: w.clock.Now(), Wake: true, Cause: w.action.ID}); err != nil {
		t.Fatal(err)
	}
	if c, err := w.port.Consume(ctx, a.ID, w.clock.Now()); err != nil || c.ConsumedAt.IsZero() {
		t.Fatalf("consume %+v (%v)", c, err)
	}
	if _, err := w.port.Consume(ctx, a.ID, w.clock.Now()); !errors.Is(err, extension.ErrConflict) {
		t.Errorf("a second consumption: %v, want ErrConflict", err)
	}
	if _, err := w.port.Open(ctx, key); !errors.Is(err, extension.ErrNotFound) {
		t.Errorf("open after consumption: %v, want ErrNotFound", err)
	}
	if _, err := w.port.Get(ctx, "apr_nosuch"); !errors.Is(err, extension.ErrNotFound) {
		t.Errorf("get of an unknown approval: %v, want ErrNotFound", err)
	}
	all, err := w.port.List(ctx, human.ListQuery{Scope: "s1"})
	if err != nil || len(all) != 2 || all[0].ID != a.ID || all[1].ID != other.ID {
		t.Errorf("list %+v (%v), want both, oldest first", all, err)
	}
	pending, err := w.port.List(ctx, human.ListQuery{Scope: "s1", State: human.StatePending})
	if err != nil || len(pending) != 1 || pending[0].ID != other.ID {
		t.Errorf("pending %+v (%v), want the other", pending, err)
	}
	if none, err := w.port.List(ctx, human.ListQuery{Scope: "s2"}); err != nil || len(none) != 0 {
		t.Errorf("another scope's list %+v (%v), want empty", none, err)
	}
	if _, err := w.port.List(ctx, human.ListQuery{}); err == nil {
		t.Error("a list without a scope was answered")
	}
}
