// Package storagetest is the conformance suite every storage.Store engine
// must pass, written once and run against each implementation, and the
// deliberately wrong wrappers its negative controls run it against.
//
// Cases are functions returning an error rather than test functions, so a
// negative control can run them against a broken store and assert that they
// fail. It must never be imported by production code: EpochBlind exists to
// prove the suite (and the scheduler's property test) can fail.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Case is one conformance case. Run gets a fresh, empty store.
type Case struct {
	Name string
	Run  func(ctx context.Context, s storage.Store) error
}

// Exercise runs every case against a fresh store from open.
func Exercise(t *testing.T, open func(t *testing.T) storage.Store) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			s := open(t)
			if err := c.Run(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Failures runs every case against a fresh store from open and returns the
// names of the cases that failed, with their errors.
func Failures(t *testing.T, open func(t *testing.T) storage.Store) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, c := range Cases() {
		s := open(t)
		if err := c.Run(context.Background(), s); err != nil {
			out[c.Name] = err
		}
	}
	return out
}

// Cases lists the conformance cases.
func Cases() []Case {
	return []Case{
		{"event_seq_gap_free", eventSeqGapFree},
		{"event_round_trip", eventRoundTrip},
		{"event_identity_unique", eventIdentityUnique},
		{"event_list_keyset", eventListKeyset},
		{"event_find", eventFind},
		{"causal_root_pinned_once", causalRootPinnedOnce},
		{"tx_rollback", txRollback},
		{"work_update_fenced", workUpdateFenced},
		{"work_keys_exclusive", workKeysExclusive},
		{"work_list_keyset", workListKeyset},
		{"work_claimable", workClaimable},
		{"inputs_queue_once", inputsQueueOnce},
		{"execution_update_fenced", executionUpdateFenced},
		{"execution_advance_epoch_fenced", executionAdvanceEpochFenced},
		{"execution_lease_renew_fenced", executionLeaseRenewFenced},
		{"execution_one_live_per_work", executionOneLivePerWork},
		{"execution_list_filters", executionListFilters},
		{"declaration_one_pending", declarationOnePending},
		{"wait_lifecycle", waitLifecycle},
		{"timer_fires_once", timerFiresOnce},
		{"artifact_metadata", artifactMetadata},
	}
}

// T0 is the suite's epoch: every timestamp is derived from it.
var T0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec int) time.Time { return T0.Add(time.Duration(sec) * time.Second) }

func want(cond bool, format string, args ...any) error {
	if !cond {
		return fmt.Errorf(format, args...)
	}
	return nil
}

func wantErr(err, target error, what string) error {
	if !errors.Is(err, target) {
		return fmt.Errorf("%s: got error %v, want %v", what, err, target)
	}
	return nil
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func insertEvent(ctx context.Context, tx storage.Tx, id string, mod func(p *storage.InsertEventParams)) (storage.Event, error) {
	p := &storage.InsertEventParams{ID: id, Type: "test.happened", Source: "test", Scope: "s1", Root: id, Data: []byte(`{}`), AcceptedAt: T0}
	if mod != nil {
		mod(p)
	}
	return tx.InsertEvent(ctx, p)
}

// SeedWork inserts a ready Work in scope s1 with binding b1, its
// core.work.created event and its own id as a key.
func SeedWork(ctx context.Context, s storage.Store, workID string) (storage.Work, error) {
	var w storage.Work
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		ev, err := insertEvent(ctx, tx, "evt_created_"+workID, func(p *storage.InsertEventParams) {
			p.Type, p.Source, p.Work, p.CorrelationKey = "core.work.created", "core.host", workID, workID
		})
		if err != nil {
			return err
		}
		w, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: workID, Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: ev.ID, CreatedAt: T0})
		if err != nil {
			return err
		}
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: workID, Work: workID, At: T0})
	})
	return w, err
}

// SeedExecution seeds a Work and a running execution of it at epoch 1,
// owned by owner-a with a lease until 30s after T0.
func SeedExecution(ctx context.Context, s storage.Store, workID, exeID string) (storage.Execution, error) {
	if _, err := SeedWork(ctx, s, workID); err != nil {
		return storage.Execution{}, err
	}
	var e storage.Execution
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		e, err = tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: exeID, Work: workID, Scope: "s1", Binding: "b1", Executor: "x",
			Generation: 1, Owner: "owner-a", LeaseExpiresAt: at(30), Deadline: at(600), CreatedAt: T0})
		return err
	})
	return e, err
}

func eventSeqGapFree(ctx context.Context, s storage.Store) error {
	n := 0
	for round := range 5 {
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			for i := range 3 {
				if _, err := insertEvent(ctx, tx, fmt.Sprintf("evt_%d_%d", round, i), nil); err != nil {
					return err
				}
			}
			if round%2 == 1 {
				return errors.New("roll back")
			}
			return nil
		})
		if round%2 == 1 {
			if err == nil {
				return errors.New("a failing transaction committed")
			}
			continue
		}
		if err != nil {
			return err
		}
		n += 3
	}
	evs, err := s.ListEvents(ctx, &storage.ListEventsParams{Limit: 100})
	if err != nil {
		return err
	}
	if len(evs) != n {
		return fmt.Errorf("listed %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			return fmt.Errorf("event %d has seq %d: the sequence has a gap or does not start at 1", i, e.Seq)
		}
	}
	last, err := s.LastSeq(ctx)
	if err != nil {
		return err
	}
	return want(last == int64(n), "LastSeq = %d, want %d", last, n)
}

func eventRoundTrip(ctx context.Context, s storage.Store) error {
	var in storage.Event
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		root, err := insertEvent(ctx, tx, "evt_root", nil)
		if err != nil {
			return err
		}
		in, err = insertEvent(ctx, tx, "evt_child", func(p *storage.InsertEventParams) {
			p.Type, p.Source, p.Scope, p.Work, p.Execution = "a.b", "execution", "s2", "wrk_1", "exe_1"
			p.CorrelationKey, p.Data, p.Parent, p.Root, p.Depth = "pr/1", []byte(`{"k":[1,2]}`), root.ID, root.ID, 1
			p.Actor, p.DeliveryID, p.AcceptedAt = "operator:ann", "d-1", at(7)
		})
		return err
	})
	if err != nil {
		return err
	}
	got, err := s.GetEvent(ctx, "evt_child")
	if err != nil {
		return err
	}
	if got.Seq != 2 || got.Type != "a.b" || got.Source != "execution" || got.Scope != "s2" || got.Work != "wrk_1" ||
		got.Execution != "exe_1" || got.CorrelationKey != "pr/1" || string(got.Data) != `{"k":[1,2]}` || got.Parent != "evt_root" ||
		got.Root != "evt_root" || got.Depth != 1 || got.Actor != "operator:ann" || got.DeliveryID != "d-1" || !got.AcceptedAt.Equal(at(7)) {
		return fmt.Errorf("event did not round-trip: got %+v, inserted %+v", got, in)
	}
	bySeq, err := s.GetEventBySeq(ctx, 2)
	if err != nil {
		return err
	}
	byDelivery, err := s.GetEventByDelivery(ctx, "execution", "d-1")
	if err != nil {
		return err
	}
	_, missing := s.GetEvent(ctx, "evt_none")
	return first(
		want(bySeq.ID == "evt_child", "GetEventBySeq(2) = %s", bySeq.ID),
		want(byDelivery.ID == "evt_child", "GetEventByDelivery = %s", byDelivery.ID),
		wantErr(missing, storage.ErrNotFound, "GetEvent of a missing id"),
	)
}

func eventIdentityUnique(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := insertEvent(ctx, tx, "evt_1", func(p *storage.InsertEventParams) { p.DeliveryID = "d-1" })
		return err
	})
	if err != nil {
		return err
	}
	var dupID, dupDelivery, otherSource error
	_ = s.WithTx(ctx, func(tx storage.Tx) error {
		_, dupID = insertEvent(ctx, tx, "evt_1", nil)
		_, dupDelivery = insertEvent(ctx, tx, "evt_2", func(p *storage.InsertEventParams) { p.DeliveryID = "d-1" })
		_, otherSource = insertEvent(ctx, tx, "evt_3", func(p *storage.InsertEventParams) { p.DeliveryID, p.Source = "d-1", "other" })
		return nil
	})
	return first(
		wantErr(dupID, storage.ErrDuplicate, "a second event with the same id"),
		wantErr(dupDelivery, storage.ErrDuplicate, "a second event with the same source and delivery id"),
		want(otherSource == nil, "the same delivery id from another source was refused: %v", otherSource),
	)
}

func eventListKeyset(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 10 {
			scope := "s1"
			if i%2 == 1 {
				scope = "s2"
			}
			if _, err := insertEvent(ctx, tx, fmt.Sprintf("evt_%02d", i), func(p *storage.InsertEventParams) { p.Scope = scope }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	seqs := func(evs []storage.Event) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	page1, err := s.ListEvents(ctx, &storage.ListEventsParams{Scope: "s1", Limit: 2})
	if err != nil {
		return err
	}
	page2, err := s.ListEvents(ctx, &storage.ListEventsParams{Scope: "s1", Limit: 2, AfterSeq: page1[len(page1)-1].Seq, UntilSeq: 7})
	if err != nil {
		return err
	}
	page3, err := s.ListEvents(ctx, &storage.ListEventsParams{Scope: "s1", Limit: 2, AfterSeq: 5, UntilSeq: 7})
	if err != nil {
		return err
	}
	desc, err := s.ListEvents(ctx, &storage.ListEventsParams{Limit: 3, Desc: true, AfterSeq: 9})
	if err != nil {
		return err
	}
	return first(
		want(fmt.Sprint(seqs(page1)) == "[1 3]", "first page = %v, want [1 3]", seqs(page1)),
		want(fmt.Sprint(seqs(page2)) == "[5 7]", "second page = %v, want [5 7]", seqs(page2)),
		want(fmt.Sprint(seqs(page3)) == "[7]", "bounded page = %v, want [7]", seqs(page3)),
		want(fmt.Sprint(seqs(desc)) == "[8 7 6]", "descending page = %v, want [8 7 6]", seqs(desc)),
	)
}

func eventFind(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i, spec := range []struct{ typ, key string }{{"a.x", "k1"}, {"a.y", "k2"}, {"a.x", "k2"}, {"a.y", "k1"}} {
			if _, err := insertEvent(ctx, tx, fmt.Sprintf("evt_%d", i), func(p *storage.InsertEventParams) {
				p.Type, p.CorrelationKey = spec.typ, spec.key
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	e1, err := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s1", Keys: []string{"k2"}})
	if err != nil {
		return err
	}
	e2, err := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s1", AfterSeq: 2, Keys: []string{"k1", "k2"}, Types: []string{"a.y"}})
	if err != nil {
		return err
	}
	_, none := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s1", AfterSeq: 4, Keys: []string{"k1"}})
	return first(
		want(e1.Seq == 2, "first event with key k2 has seq %d, want 2", e1.Seq),
		want(e2.Seq == 4, "first a.y event after 2 has seq %d, want 4", e2.Seq),
		wantErr(none, storage.ErrNotFound, "FindEvent past the last event"),
	)
}

func causalRootPinnedOnce(ctx context.Context, s storage.Store) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		root, err := insertEvent(ctx, tx, "evt_root", nil)
		if err != nil {
			return err
		}
		r := &storage.CausalRoot{Root: root.ID, MaxDepth: 4, PerMinute: 10, WindowStart: T0, WindowCount: 1, PinnedAt: T0}
		if err := tx.InsertCausalRoot(ctx, r); err != nil {
			return err
		}
		again := tx.InsertCausalRoot(ctx, &storage.CausalRoot{Root: root.ID, MaxDepth: 99, PerMinute: 99, PinnedAt: at(1)})
		if err := wantErr(again, storage.ErrDuplicate, "pinning a root twice"); err != nil {
			return err
		}
		stale := tx.UpdateCausalWindow(ctx, &storage.UpdateCausalWindowParams{Root: root.ID, FromWindowStart: T0, FromWindowCount: 0, WindowStart: T0, WindowCount: 1})
		if err := wantErr(stale, storage.ErrFenced, "moving a window the caller did not read"); err != nil {
			return err
		}
		if err := tx.UpdateCausalWindow(ctx, &storage.UpdateCausalWindowParams{Root: root.ID, FromWindowStart: T0, FromWindowCount: 1, WindowStart: T0, WindowCount: 2}); err != nil {
			return err
		}
		got, err := tx.GetCausalRoot(ctx, root.ID)
		if err != nil {
			return err
		}
		return want(got.MaxDepth == 4 && got.PerMinute == 10 && got.WindowCount == 2 && got.WindowStart.Equal(T0),
			"causal root = %+v, want the first pinned limits and count 2", got)
	})
}

func txRollback(ctx context.Context, s storage.Store) error {
	boom := errors.New("boom")
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_a", nil); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		return fmt.Errorf("WithTx returned %v, want the function's error", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = s.WithTx(ctx, func(tx storage.Tx) error {
			_, _ = insertEvent(ctx, tx, "evt_b", nil)
			panic("panic inside a transaction")
		})
	}()
	cctx, cancel := context.WithCancel(ctx)
	err = s.WithTx(cctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_c", nil); err != nil {
			return err
		}
		cancel()
		return cctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("WithTx with a cancelled context returned %v", err)
	}
	// The store still works and holds none of the three.
	if err := s.WithTx(ctx, func(tx storage.Tx) error { _, err := insertEvent(ctx, tx, "evt_d", nil); return err }); err != nil {
		return fmt.Errorf("the store does not work after rollbacks: %w", err)
	}
	evs, err := s.ListEvents(ctx, &storage.ListEventsParams{})
	if err != nil {
		return err
	}
	return want(len(evs) == 1 && evs[0].ID == "evt_d" && evs[0].Seq == 1, "after rollbacks the record holds %+v, want only evt_d at seq 1", evs)
}

func workUpdateFenced(ctx context.Context, s storage.Store) error {
	w, err := SeedWork(ctx, s, "wrk_1")
	if err != nil {
		return err
	}
	running, ready := storage.WorkRunning, storage.WorkReady
	var stale, wrongState, missing, okErr error
	var got storage.Work
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		got, okErr = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{ready}, Revision: w.Revision, State: &running, AddAttempts: 1, Now: at(1)})
		_, stale = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, Revision: w.Revision, State: &ready, Now: at(2)})
		_, wrongState = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{ready}, State: &ready, Now: at(2)})
		_, missing = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_none", State: &ready, Now: at(2)})
		return nil
	})
	if err != nil {
		return err
	}
	if okErr != nil {
		return okErr
	}
	reread, err := s.GetWork(ctx, w.ID)
	if err != nil {
		return err
	}
	return first(
		want(got.State == running && got.Attempts == 1 && got.Revision == w.Revision+1 && got.UpdatedAt.Equal(at(1)), "updated work = %+v", got),
		wantErr(stale, storage.ErrFenced, "update at a stale revision"),
		wantErr(wrongState, storage.ErrFenced, "update from a state the work is not in"),
		wantErr(missing, storage.ErrNotFound, "update of a missing work"),
		want(reread.State == running && reread.Revision == got.Revision, "the refused updates changed the work: %+v", reread),
	)
}

func workKeysExclusive(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_a"); err != nil {
		return err
	}
	if _, err := SeedWork(ctx, s, "wrk_b"); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "pr/1", Work: "wrk_a", At: T0}); err != nil {
			return err
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "pr/1", Work: "wrk_a", At: T0}); err != nil {
			return fmt.Errorf("acquiring a key the work owns: %w", err)
		}
		taken := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "pr/1", Work: "wrk_b", At: T0})
		if err := wantErr(taken, storage.ErrDuplicate, "acquiring another work's key"); err != nil {
			return err
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s2", Key: "pr/1", Work: "wrk_b", At: T0}); err != nil {
			return fmt.Errorf("the same key in another scope: %w", err)
		}
		owner, err := tx.GetKeyOwner(ctx, "s1", "pr/1")
		if err != nil || owner.ID != "wrk_a" {
			return fmt.Errorf("owner of pr/1 = %s, %v; want wrk_a", owner.ID, err)
		}
		keys, err := tx.ListWorkKeys(ctx, "wrk_a")
		if err != nil || fmt.Sprint(keys) != "[pr/1 wrk_a]" {
			return fmt.Errorf("keys of wrk_a = %v, %v", keys, err)
		}
		if err := tx.ReleaseKeys(ctx, "wrk_a", at(1)); err != nil {
			return err
		}
		if _, err := tx.GetKeyOwner(ctx, "s1", "pr/1"); !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("a released key still has an owner: %v", err)
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "pr/1", Work: "wrk_b", At: at(2)}); err != nil {
			return fmt.Errorf("acquiring a released key: %w", err)
		}
		keys, err = tx.ListWorkKeys(ctx, "wrk_a")
		if err != nil || len(keys) != 0 {
			return fmt.Errorf("released work still lists keys %v, %v", keys, err)
		}
		ever, err := tx.ListKeysEverOwned(ctx, "wrk_a")
		return first(err, want(fmt.Sprint(ever) == "[pr/1 wrk_a]", "keys wrk_a ever owned = %v", ever))
	})
}

func workListKeyset(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 6 {
			id := fmt.Sprintf("wrk_%d", i)
			// Two Work per second, so the id breaks ties.
			if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: id, Scope: "s1", Binding: "b", State: storage.WorkReady, CreatedAt: at(i / 2)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ids := func(ws []storage.Work) string {
		var out []string
		for _, w := range ws {
			out = append(out, w.ID)
		}
		return fmt.Sprint(out)
	}
	p1, err := s.ListWork(ctx, &storage.ListWorkParams{Page: storage.Page{Limit: 3}})
	if err != nil {
		return err
	}
	last := p1[len(p1)-1]
	until := &storage.Position{CreatedAt: at(2), ID: "wrk_4"}
	p2, err := s.ListWork(ctx, &storage.ListWorkParams{Page: storage.Page{Limit: 3, After: &storage.Position{CreatedAt: last.CreatedAt, ID: last.ID}, Until: until}})
	if err != nil {
		return err
	}
	desc, err := s.ListWork(ctx, &storage.ListWorkParams{Page: storage.Page{Limit: 2, Desc: true, After: &storage.Position{CreatedAt: at(2), ID: "wrk_4"}}})
	if err != nil {
		return err
	}
	return first(
		want(ids(p1) == "[wrk_0 wrk_1 wrk_2]", "first page %s", ids(p1)),
		want(ids(p2) == "[wrk_3 wrk_4]", "bounded second page %s", ids(p2)),
		want(ids(desc) == "[wrk_3 wrk_2]", "descending page %s", ids(desc)),
	)
}

func workClaimable(ctx context.Context, s storage.Store) error {
	for _, id := range []string{"wrk_a", "wrk_b", "wrk_c", "wrk_d"} {
		if _, err := SeedWork(ctx, s, id); err != nil {
			return err
		}
	}
	held, running := "operator_cancelled", storage.WorkRunning
	stopping := storage.ExecutionStopping
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_b", BlockedReason: &held, Now: T0}); err != nil {
			return err
		}
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_c", State: &running, Now: T0}); err != nil {
			return err
		}
		// wrk_d is ready again, but its cancelled attempt has not stopped.
		if _, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: "exe_d", Work: "wrk_d", Scope: "s1", Binding: "b1", Executor: "x", Owner: "o", LeaseExpiresAt: at(30), Deadline: at(60), CreatedAt: T0}); err != nil {
			return err
		}
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_d", Epoch: 1, State: &stopping, Now: T0})
		return err
	})
	if err != nil {
		return err
	}
	ws, err := s.ListClaimable(ctx, 10)
	if err != nil {
		return err
	}
	return want(len(ws) == 1 && ws[0].ID == "wrk_a", "claimable = %+v, want only wrk_a", ws)
}

func inputsQueueOnce(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_1"); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx storage.Tx) error {
		var ins []storage.Input
		for _, id := range []string{"evt_a", "evt_b", "evt_a"} {
			if _, err := tx.GetEvent(ctx, id); errors.Is(err, storage.ErrNotFound) {
				if _, err := insertEvent(ctx, tx, id, nil); err != nil {
					return err
				}
			}
			in, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_1", Event: id, At: T0})
			if err != nil {
				return err
			}
			ins = append(ins, in)
		}
		if ins[0].Position != 1 || ins[1].Position != 2 || ins[2].Position != 1 {
			return fmt.Errorf("positions = %d %d %d, want 1 2 1", ins[0].Position, ins[1].Position, ins[2].Position)
		}
		w, err := tx.GetWork(ctx, "wrk_1")
		if err != nil {
			return err
		}
		if w.InputCount != 2 {
			return fmt.Errorf("input count = %d, want 2", w.InputCount)
		}
		list, err := tx.ListInputs(ctx, &storage.ListInputsParams{Work: "wrk_1", AfterPosition: 1})
		if err != nil {
			return err
		}
		return want(len(list) == 1 && list[0].Event == "evt_b", "inputs after 1 = %+v", list)
	})
}

func executionUpdateFenced(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if e.Epoch != 1 || e.State != storage.ExecutionRunning || e.Owner != "owner-a" {
		return fmt.Errorf("new execution = %+v, want running at epoch 1", e)
	}
	finished, failed := storage.ExecutionFinished, storage.ResultFailed
	running := []storage.ExecutionState{storage.ExecutionRunning}
	var advanced storage.Execution
	var staleEpoch, wrongOwner, wrongState error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		advanced, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, Owner: "owner-b", LeaseExpiresAt: at(90), Now: at(31)})
		if err != nil {
			return err
		}
		_, staleEpoch = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, Owner: "owner-a", FromStates: running, State: &finished, Result: &failed, Now: at(32)})
		_, wrongOwner = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 2, Owner: "owner-a", FromStates: running, State: &finished, Now: at(32)})
		_, wrongState = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 2, FromStates: []storage.ExecutionState{storage.ExecutionParked}, State: &finished, Now: at(32)})
		return nil
	})
	if err != nil {
		return err
	}
	got, err := s.GetExecution(ctx, e.ID)
	if err != nil {
		return err
	}
	return first(
		want(advanced.Epoch == 2 && advanced.Owner == "owner-b", "advanced = %+v", advanced),
		wantErr(staleEpoch, storage.ErrFenced, "an update at the superseded epoch"),
		wantErr(wrongOwner, storage.ErrFenced, "an update by the wrong owner"),
		wantErr(wrongState, storage.ErrFenced, "an update from the wrong state"),
		want(got.State == storage.ExecutionRunning && got.Epoch == 2 && got.Result == "", "a refused update changed the execution: %+v", got),
	)
}

func executionAdvanceEpochFenced(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	running := []storage.ExecutionState{storage.ExecutionRunning}
	var early, stale error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		_, early = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, ExpiredBy: at(29), Owner: "b", LeaseExpiresAt: at(90), Now: at(29)})
		if _, err := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, ExpiredBy: at(30), Owner: "b", LeaseExpiresAt: at(90), Now: at(30)}); err != nil {
			return err
		}
		_, stale = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, Owner: "c", LeaseExpiresAt: at(90), Now: at(31)})
		return nil
	})
	if err != nil {
		return err
	}
	got, err := s.GetExecution(ctx, e.ID)
	if err != nil {
		return err
	}
	return first(
		wantErr(early, storage.ErrFenced, "recovering a lease that has not expired"),
		wantErr(stale, storage.ErrFenced, "advancing from a superseded epoch"),
		want(got.Epoch == 2 && got.Owner == "b", "execution = %+v, want epoch 2 owned by b", got),
	)
}

func executionLeaseRenewFenced(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	var renewed storage.Execution
	var expired, wrongEpoch error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		renewed, err = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(10), LeaseExpiresAt: at(40)})
		if err != nil {
			return err
		}
		_, expired = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(40), LeaseExpiresAt: at(70)})
		_, wrongEpoch = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 2, Owner: "owner-a", ValidAt: at(20), LeaseExpiresAt: at(70)})
		return nil
	})
	if err != nil {
		return err
	}
	return first(
		want(renewed.LeaseExpiresAt.Equal(at(40)), "renewed lease expires %v, want %v", renewed.LeaseExpiresAt, at(40)),
		wantErr(expired, storage.ErrFenced, "renewing an expired lease"),
		wantErr(wrongEpoch, storage.ErrFenced, "renewing at another epoch"),
	)
}

func executionOneLivePerWork(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	insert := func(id string) error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: id, Work: "wrk_1", Scope: "s1", Binding: "b1", Executor: "x", Owner: "o", LeaseExpiresAt: at(30), Deadline: at(60), CreatedAt: at(1)})
			return err
		})
	}
	if err := wantErr(insert("exe_2"), storage.ErrDuplicate, "a second live execution of one Work"); err != nil {
		return err
	}
	finished := storage.ExecutionFinished
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, State: &finished, Now: at(1)})
		return err
	}); err != nil {
		return err
	}
	if err := insert("exe_2"); err != nil {
		return fmt.Errorf("a new execution after the first finished: %w", err)
	}
	live, err := s.GetLiveExecution(ctx, "wrk_1")
	return first(err, want(live.ID == "exe_2", "live execution = %s, want exe_2", live.ID))
}

func declarationOnePending(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	decl := func(epoch int64) error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			return tx.InsertDeclaration(ctx, &storage.Declaration{Execution: e.ID, Epoch: epoch, Kind: storage.DeclaredWait, Payload: []byte(`{"types":["a.b"]}`), DeclaredAt: at(int(epoch))})
		})
	}
	if err := decl(1); err != nil {
		return err
	}
	if err := wantErr(decl(1), storage.ErrDuplicate, "a second declaration in one epoch"); err != nil {
		return err
	}
	if err := wantErr(decl(2), storage.ErrDuplicate, "a declaration while one is pending"); err != nil {
		return err
	}
	pending, err := s.GetPendingDeclaration(ctx, e.ID)
	if err != nil || pending.Epoch != 1 || !pending.Pending() || string(pending.Payload) != `{"types":["a.b"]}` {
		return fmt.Errorf("pending declaration = %+v, %v", pending, err)
	}
	mark := func() error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			return tx.MarkDeclarationApplied(ctx, &storage.MarkDeclarationAppliedParams{Execution: e.ID, Epoch: 1, Disposition: "applied", At: at(5)})
		})
	}
	if err := mark(); err != nil {
		return err
	}
	if err := wantErr(mark(), storage.ErrFenced, "applying a declaration twice"); err != nil {
		return err
	}
	if err := decl(2); err != nil {
		return fmt.Errorf("a declaration in the next epoch after the first was applied: %w", err)
	}
	d1, err := s.GetDeclaration(ctx, e.ID, 1)
	return first(err, want(!d1.Pending() && d1.Disposition == "applied" && d1.AppliedAt.Equal(at(5)), "applied declaration = %+v", d1))
}

func waitLifecycle(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	var w storage.Wait
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.InsertTimer(ctx, &storage.Timer{ID: "tmr_1", Kind: storage.TimerWaitTimeout, Target: "wat_1", DueAt: at(60), CreatedAt: T0}); err != nil {
			return err
		}
		var err error
		w, err = tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_1", Work: "wrk_1", Scope: "s1", Execution: e.ID, Epoch: 1,
			Types: []string{"a.b"}, Keys: []string{"k1", "k2"}, Watermark: 1, Timer: "tmr_1", TimeoutAt: at(60), CreatedAt: T0})
		if err != nil {
			return err
		}
		_, dup := tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_2", Work: "wrk_1", Scope: "s1", Watermark: 1, OnWorkKeys: true, CreatedAt: T0})
		return wantErr(dup, storage.ErrDuplicate, "a second active wait of one Work")
	})
	if err != nil {
		return err
	}
	if fmt.Sprint(w.Types) != "[a.b]" || fmt.Sprint(w.Keys) != "[k1 k2]" || w.State != storage.WaitActive || w.Timer != "tmr_1" || !w.TimeoutAt.Equal(at(60)) {
		return fmt.Errorf("wait = %+v", w)
	}
	byKey, err := s.ListActiveWaitsByKey(ctx, "s1", "k2")
	if err != nil || len(byKey) != 1 || byKey[0].ID != "wat_1" {
		return fmt.Errorf("active waits by key k2 = %+v, %v", byKey, err)
	}
	other, err := s.ListActiveWaitsByKey(ctx, "s2", "k2")
	if err != nil || len(other) != 0 {
		return fmt.Errorf("active waits by key in another scope = %+v, %v", other, err)
	}
	var again error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_wake", nil); err != nil {
			return err
		}
		got, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_1", State: storage.WaitSatisfied, SatisfiedBy: "evt_wake", Now: at(3)})
		if err != nil {
			return err
		}
		if got.State != storage.WaitSatisfied || got.SatisfiedBy != "evt_wake" {
			return fmt.Errorf("satisfied wait = %+v", got)
		}
		_, again = tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_1", State: storage.WaitTimedOut, Now: at(4)})
		return nil
	})
	if err != nil {
		return err
	}
	_, active := s.GetActiveWait(ctx, "wrk_1")
	byKey, _ = s.ListActiveWaitsByKey(ctx, "s1", "k2")
	return first(
		wantErr(again, storage.ErrFenced, "moving a wait that is no longer active"),
		wantErr(active, storage.ErrNotFound, "the active wait after it was satisfied"),
		want(len(byKey) == 0, "a satisfied wait is still listed by key"),
	)
}

func timerFiresOnce(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i, due := range []int{30, 10, 20} {
			if err := tx.InsertTimer(ctx, &storage.Timer{ID: fmt.Sprintf("tmr_%d", i), Kind: storage.TimerWaitTimeout, Target: "x", DueAt: at(due), CreatedAt: T0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	due, err := s.ListDueTimers(ctx, at(20), 10)
	if err != nil {
		return err
	}
	if len(due) != 2 || due[0].ID != "tmr_1" || due[1].ID != "tmr_2" {
		return fmt.Errorf("due at 20s = %+v, want tmr_1 then tmr_2", due)
	}
	var twice error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.FireTimer(ctx, "tmr_1", at(21)); err != nil {
			return err
		}
		twice = tx.FireTimer(ctx, "tmr_1", at(22))
		return nil
	})
	if err != nil {
		return err
	}
	due, err = s.ListDueTimers(ctx, at(20), 10)
	if err != nil {
		return err
	}
	t1, err := s.GetTimer(ctx, "tmr_1")
	return first(err,
		wantErr(twice, storage.ErrFenced, "firing a timer twice"),
		want(len(due) == 1 && due[0].ID == "tmr_2", "due after firing = %+v", due),
		want(t1.FiredAt.Equal(at(21)), "fired_at = %v", t1.FiredAt),
	)
}

func artifactMetadata(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 3 {
			a := &storage.Artifact{ID: fmt.Sprintf("art_%d", i), Execution: e.ID, Work: "wrk_1", Name: "log", MediaType: "text/plain", Size: int64(i), SHA256: "00", CreatedAt: at(i)}
			if err := tx.InsertArtifact(ctx, a); err != nil {
				return err
			}
		}
		return wantErr(tx.InsertArtifact(ctx, &storage.Artifact{ID: "art_0", Execution: e.ID, Work: "wrk_1", Name: "x", MediaType: "x", CreatedAt: T0}),
			storage.ErrDuplicate, "a second artifact with the same id")
	})
	if err != nil {
		return err
	}
	list, err := s.ListArtifacts(ctx, &storage.ListArtifactsParams{Execution: e.ID, Page: storage.Page{After: &storage.Position{CreatedAt: at(0), ID: "art_0"}}})
	if err != nil {
		return err
	}
	a, err := s.GetArtifact(ctx, "art_2")
	return first(err,
		want(len(list) == 2 && list[0].ID == "art_1", "artifacts after art_0 = %+v", list),
		want(a.Size == 2 && a.Name == "log" && a.CreatedAt.Equal(at(2)), "artifact = %+v", a),
	)
}

func executionListFilters(ctx context.Context, s storage.Store) error {
	for i, owner := range []string{"a", "b", "a"} {
		w, e := fmt.Sprintf("wrk_%d", i), fmt.Sprintf("exe_%d", i)
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
		if err := s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: e, Work: w, Scope: "s1", Binding: "b1", Executor: "x",
				Owner: owner, LeaseExpiresAt: at(10 * (i + 1)), Deadline: at(600), CreatedAt: at(i)})
			return err
		}); err != nil {
			return err
		}
	}
	parked := storage.ExecutionParked
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_2", Epoch: 1, State: &parked, Now: at(3)})
		return err
	}); err != nil {
		return err
	}
	ids := func(p *storage.ListExecutionsParams) (string, error) {
		es, err := s.ListExecutions(ctx, p)
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return fmt.Sprint(out), err
	}
	running := []storage.ExecutionState{storage.ExecutionRunning}
	expired, err1 := ids(&storage.ListExecutionsParams{States: running, LeaseExpiredBy: at(20)})
	notA, err2 := ids(&storage.ListExecutionsParams{NotOwner: "a"})
	ownA, err3 := ids(&storage.ListExecutionsParams{Owner: "a", States: running})
	n, err4 := s.CountLeased(ctx, "a")
	return first(err1, err2, err3, err4,
		want(expired == "[exe_0 exe_1]", "running and expired by 20s: %s", expired),
		want(notA == "[exe_1]", "not owned by a: %s", notA),
		want(ownA == "[exe_0]", "running, owned by a: %s", ownA),
		want(n == 1, "leases held by a: %d, want 1 (a parked execution holds none)", n),
	)
}
