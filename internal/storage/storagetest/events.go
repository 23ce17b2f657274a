package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

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

// eventFresh: a Fresh event (one whose id its caller just made) is
// numbered and read back in its transaction like any other, and commits
// with the next number; one whose identity is taken all the same fails
// its transaction, wherever the engine reports it, so that nothing else
// of the transaction commits.
func eventFresh(ctx context.Context, s storage.Store) error {
	fresh := func(p *storage.InsertEventParams) { p.Fresh = true }
	var inTx []storage.Event
	var last int64
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_first", nil); err != nil {
			return err
		}
		if _, err := insertEvent(ctx, tx, "evt_fresh", fresh); err != nil {
			return err
		}
		var err error
		if inTx, err = tx.ListEvents(ctx, &storage.ListEventsParams{Limit: 10}); err != nil {
			return err
		}
		last, err = tx.LastSeq(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if len(inTx) != 2 || inTx[1].ID != "evt_fresh" || inTx[1].Seq != 2 || last != 2 {
		return fmt.Errorf("in its transaction a fresh event listed as %v with last seq %d, want evt_fresh at seq 2 of 2", inTx, last)
	}
	got, err := s.GetEvent(ctx, "evt_fresh")
	if err != nil {
		return err
	}
	if got.Seq != 2 {
		return fmt.Errorf("the fresh event committed with seq %d, want 2", got.Seq)
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		// A read first: an engine may send a fresh insert later only
		// once its transaction has begun.
		if _, err := tx.LastSeq(ctx); err != nil {
			return err
		}
		if _, err := insertEvent(ctx, tx, "evt_fresh", func(p *storage.InsertEventParams) { p.Fresh, p.Type = true, "other.type" }); err != nil {
			return err
		}
		_, err := insertEvent(ctx, tx, "evt_after", nil)
		return err
	})
	if err == nil {
		return errors.New("a transaction whose fresh event's id was taken committed")
	}
	_, after := s.GetEvent(ctx, "evt_after")
	kept, kerr := s.GetEvent(ctx, "evt_fresh")
	last, lerr := s.LastSeq(ctx)
	return first(kerr, lerr,
		wantErr(after, storage.ErrNotFound, "the event written after a taken fresh id"),
		want(kept.Type == "test.happened" && kept.Seq == 2, "the fresh event is now %s at seq %d, want test.happened at 2", kept.Type, kept.Seq),
		want(last == 2, "LastSeq = %d after the failed transaction, want 2", last))
}

func eventIdentityUnique(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := insertEvent(ctx, tx, "evt_1", func(p *storage.InsertEventParams) { p.DeliveryID = "d-1" })
		return err
	})
	if err != nil {
		return err
	}
	var dupID, dupDelivery, otherSource, noDelivery1, noDelivery2 error
	_ = s.WithTx(ctx, func(tx storage.Tx) error {
		_, dupID = insertEvent(ctx, tx, "evt_1", func(p *storage.InsertEventParams) { p.Type = "other.type" })
		_, dupDelivery = insertEvent(ctx, tx, "evt_2", func(p *storage.InsertEventParams) { p.DeliveryID = "d-1" })
		_, otherSource = insertEvent(ctx, tx, "evt_3", func(p *storage.InsertEventParams) { p.DeliveryID, p.Source = "d-1", "other" })
		// No delivery id is no identity: any number of them per source.
		_, noDelivery1 = insertEvent(ctx, tx, "evt_4", nil)
		_, noDelivery2 = insertEvent(ctx, tx, "evt_5", nil)
		return nil
	})
	kept, err := s.GetEvent(ctx, "evt_1")
	if err != nil {
		return err
	}
	byDelivery, err := s.GetEventByDelivery(ctx, "other", "d-1")
	if err != nil {
		return err
	}
	_, empty := s.GetEventByDelivery(ctx, "test", "")
	_, missing := s.GetEvent(ctx, "evt_2")
	return first(
		wantErr(dupID, storage.ErrDuplicate, "a second event with the same id"),
		wantErr(dupDelivery, storage.ErrDuplicate, "a second event with the same source and delivery id"),
		want(otherSource == nil, "the same delivery id from another source was refused: %v", otherSource),
		want(noDelivery1 == nil && noDelivery2 == nil, "events without a delivery id were refused: %v, %v", noDelivery1, noDelivery2),
		want(kept.Type == "test.happened" && kept.Seq == 1, "the refused duplicate changed the first event: %+v", kept),
		want(byDelivery.ID == "evt_3", "the delivery of the other source is %s, want evt_3", byDelivery.ID),
		wantErr(empty, storage.ErrNotFound, "looking up the empty delivery id"),
		wantErr(missing, storage.ErrNotFound, "the event refused for its delivery id"),
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
	e3, err := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s1", Keys: []string{"k1"}, Types: []string{"a.y", "a.z"}})
	if err != nil {
		return err
	}
	_, none := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s1", AfterSeq: 4, Keys: []string{"k1"}})
	_, otherScope := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s2", Keys: []string{"k1", "k2"}})
	_, otherKey := s.FindEvent(ctx, &storage.FindEventParams{Scope: "s1", Keys: []string{"k3"}})
	return first(
		want(e1.Seq == 2, "first event with key k2 has seq %d, want 2", e1.Seq),
		want(e2.Seq == 4, "first a.y event after 2 has seq %d, want 4", e2.Seq),
		want(e3.Seq == 4, "first a.y or a.z event with key k1 has seq %d, want 4", e3.Seq),
		wantErr(none, storage.ErrNotFound, "FindEvent past the last event"),
		wantErr(otherScope, storage.ErrNotFound, "FindEvent in another scope"),
		wantErr(otherKey, storage.ErrNotFound, "FindEvent of a key no event has"),
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
		_, missing := tx.GetCausalRoot(ctx, "evt_none")
		return first(
			want(got.MaxDepth == 4 && got.PerMinute == 10 && got.WindowCount == 2 && got.WindowStart.Equal(T0) && got.PinnedAt.Equal(T0),
				"causal root = %+v, want the first pinned limits and count 2", got),
			wantErr(missing, storage.ErrNotFound, "an unpinned root"))
	})
}

// causalCountedInOne: CountCausal counts within the limits, restarts the
// window after a minute or when the clock went back, and refuses, writing
// nothing, an unpinned root, a depth over max_depth and a count at
// per_minute.
func causalCountedInOne(ctx context.Context, s storage.Store) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		root, err := insertEvent(ctx, tx, "evt_root", nil)
		if err != nil {
			return err
		}
		count := func(depth int, now time.Time) (storage.CausalRoot, error) {
			return tx.CountCausal(ctx, &storage.CountCausalParams{Root: root.ID, Depth: depth, Now: now})
		}
		if _, err := count(1, T0); !errors.Is(err, storage.ErrFenced) {
			return fmt.Errorf("counting against an unpinned root returned %v, want ErrFenced", err)
		}
		if err := tx.InsertCausalRoot(ctx, &storage.CausalRoot{Root: root.ID, MaxDepth: 3, PerMinute: 2, WindowStart: T0, PinnedAt: T0}); err != nil {
			return err
		}
		steps := []struct {
			depth     int
			now       time.Time
			fenced    bool
			start     time.Time
			wantCount int
			what      string
		}{
			{3, at(10), false, T0, 1, "an event at the depth limit"},
			{4, at(11), true, T0, 1, "an event deeper than max_depth"},
			{1, at(20), false, T0, 2, "the second event of the minute"},
			{1, at(59), true, T0, 2, "an event over per_minute"},
			{1, at(60), false, at(60), 1, "the first event a minute later"},
			{1, at(30), false, at(30), 1, "an event after the clock went back"},
		}
		for _, st := range steps {
			got, err := count(st.depth, st.now)
			if st.fenced {
				if !errors.Is(err, storage.ErrFenced) {
					return fmt.Errorf("counting %s returned %+v, %v; want ErrFenced", st.what, got, err)
				}
			} else if err != nil {
				return fmt.Errorf("counting %s: %w", st.what, err)
			} else if got.WindowCount != st.wantCount || !got.WindowStart.Equal(st.start) || got.MaxDepth != 3 || got.PerMinute != 2 {
				return fmt.Errorf("counting %s returned %+v, want count %d in the window from %s", st.what, got, st.wantCount, st.start)
			}
			cur, err := tx.GetCausalRoot(ctx, root.ID)
			if err != nil {
				return err
			}
			if cur.WindowCount != st.wantCount || !cur.WindowStart.Equal(st.start) {
				return fmt.Errorf("after counting %s the root holds %+v, want count %d in the window from %s", st.what, cur, st.wantCount, st.start)
			}
		}
		return nil
	})
}

func txRollback(ctx context.Context, s storage.Store) error {
	boom := errors.New("boom")
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_a", nil); err != nil {
			return err
		}
		// Read back inside: a store that keeps what it read must
		// not keep this past the rollback.
		if _, err := tx.GetEvent(ctx, "evt_a"); err != nil {
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
	for _, id := range []string{"evt_a", "evt_b", "evt_c"} {
		if _, err := s.GetEvent(ctx, id); !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("after its transaction rolled back, GetEvent(%s) returned %v, want ErrNotFound", id, err)
		}
	}
	evs, err := s.ListEvents(ctx, &storage.ListEventsParams{})
	if err != nil {
		return err
	}
	return want(len(evs) == 1 && evs[0].ID == "evt_d" && evs[0].Seq == 1, "after rollbacks the record holds %+v, want only evt_d at seq 1", evs)
}

func eventCases() []Case {
	return []Case{
		{Name: "event_seq_gap_free", Run: plain(eventSeqGapFree), Control: burnsRolledBackSeqs},
		{Name: "event_round_trip", Run: plain(eventRoundTrip), Control: dropsEventActor},
		{Name: "event_identity_unique", Run: plain(eventIdentityUnique), Control: swallowsDuplicateEvents},
		{Name: "event_fresh", Run: plain(eventFresh), Control: dropsTakenFreshEvents},
		{Name: "event_list_keyset", Run: plain(eventListKeyset), Control: eventsIgnoreUntilSeq},
		{Name: "event_list_filters", Run: plain(eventListFilters), Control: eventsIgnoreCorrelationFilter},
		{Name: "event_find", Run: plain(eventFind), Control: findIgnoresTypes},
		{Name: "causal_root_pinned_once", Run: plain(causalRootPinnedOnce), Control: unfencedCausalWindow},
		{Name: "causal_counted_in_one", Run: plain(causalCountedInOne), Control: countsPastLimits},
		{Name: "tx_rollback", Run: plain(txRollback), Control: commitsFailedTx},
		{Name: "tx_reads_own_writes", Run: plain(txReadsOwnWrites), Control: txReadsCommitted},
		{Name: "tx_rereads_after_write", Run: plain(txRereadsAfterWrite), Control: txKeepsFirstRead},
		{Name: "tx_usable_after_refusal", Run: plain(txUsableAfterRefusal), Control: txPoisonedByRefusal},
		{Name: "tx_serialised", Run: plain(txSerialised), Control: busyWhenContended},
		{Name: "events_survive_reopen", Run: eventsSurviveReopen, Control: forgetsEventsOnReopen},
	}
}

func eventListFilters(ctx context.Context, s storage.Store) error {
	specs := []func(p *storage.InsertEventParams){
		func(p *storage.InsertEventParams) { p.Work, p.CorrelationKey = "wrk_1", "k1" },
		func(p *storage.InsertEventParams) { p.Work, p.Execution, p.Type = "wrk_1", "exe_1", "a.b" },
		func(p *storage.InsertEventParams) { p.Scope, p.CorrelationKey, p.Type = "s2", "k1", "a.b" },
		func(p *storage.InsertEventParams) {
			p.Root, p.Parent, p.Depth, p.CorrelationKey = "evt_0", "evt_0", 1, "k1"
		},
		func(p *storage.InsertEventParams) { p.Execution, p.CorrelationKey = "exe_2", "k2" },
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i, mod := range specs {
			if _, err := insertEvent(ctx, tx, fmt.Sprintf("evt_%d", i), mod); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ids := func(p *storage.ListEventsParams) (string, error) {
		evs, err := s.ListEvents(ctx, p)
		return list(evs, func(e storage.Event) string { return e.ID }), err
	}
	checks := []struct {
		p    storage.ListEventsParams
		want string
	}{
		{storage.ListEventsParams{}, "[evt_0 evt_1 evt_2 evt_3 evt_4]"},
		{storage.ListEventsParams{Scope: "s1"}, "[evt_0 evt_1 evt_3 evt_4]"},
		{storage.ListEventsParams{Work: "wrk_1"}, "[evt_0 evt_1]"},
		{storage.ListEventsParams{Execution: "exe_1"}, "[evt_1]"},
		{storage.ListEventsParams{Type: "a.b"}, "[evt_1 evt_2]"},
		{storage.ListEventsParams{Root: "evt_0"}, "[evt_0 evt_3]"},
		{storage.ListEventsParams{CorrelationKey: "k1"}, "[evt_0 evt_2 evt_3]"},
		{storage.ListEventsParams{Scope: "s1", CorrelationKey: "k1"}, "[evt_0 evt_3]"},
		{storage.ListEventsParams{Scope: "s1", Type: "a.b", Work: "wrk_1"}, "[evt_1]"},
		{storage.ListEventsParams{Scope: "s3"}, "[]"},
	}
	for _, c := range checks {
		got, err := ids(&c.p)
		if err != nil {
			return err
		}
		if got != c.want {
			return fmt.Errorf("ListEvents(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	return nil
}

// txReadsOwnWrites: a transaction's reads see its own writes; the store's
// readers see only what committed.
func txReadsOwnWrites(ctx context.Context, s storage.Store) error {
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_1", nil); err != nil {
			return err
		}
		if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_1", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: "evt_1", CreatedAt: T0}); err != nil {
			return err
		}
		ev, err := tx.GetEvent(ctx, "evt_1")
		if err != nil {
			return fmt.Errorf("the transaction does not see the event it inserted: %w", err)
		}
		last, err := tx.LastSeq(ctx)
		if err != nil {
			return err
		}
		w, err := tx.GetWork(ctx, "wrk_1")
		if err != nil {
			return fmt.Errorf("the transaction does not see the Work it inserted: %w", err)
		}
		_, outside := s.GetEvent(ctx, "evt_1")
		_, outsideWork := s.GetWork(ctx, "wrk_1")
		return first(
			want(ev.Seq == 1 && last == 1, "inside the transaction: seq %d, LastSeq %d, want 1 and 1", ev.Seq, last),
			want(w.CreatedEvent == "evt_1", "inside the transaction the Work reads %+v", w),
			wantErr(outside, storage.ErrNotFound, "the store's reader during the transaction"),
			wantErr(outsideWork, storage.ErrNotFound, "the store's reader of the Work during the transaction"),
		)
	})
	if err != nil {
		return err
	}
	_, err1 := s.GetEvent(ctx, "evt_1")
	_, err2 := s.GetWork(ctx, "wrk_1")
	return first(err1, err2)
}

// txRereadsAfterWrite: a row the transaction read again after one of its
// own writes changed it, through a method that does not return the row,
// is the changed row (a store may keep what a transaction read, but not
// across the transaction's writes).
func txRereadsAfterWrite(ctx context.Context, s storage.Store) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_1", nil); err != nil {
			return err
		}
		if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_1", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: "evt_1", CreatedAt: T0}); err != nil {
			return err
		}
		before, err := tx.GetWork(ctx, "wrk_1")
		if err != nil {
			return err
		}
		again, err := tx.GetWork(ctx, "wrk_1")
		if err != nil {
			return err
		}
		if _, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_1", Event: "evt_1", At: T0}); err != nil {
			return err
		}
		after, err := tx.GetWork(ctx, "wrk_1")
		if err != nil {
			return err
		}
		return first(
			want(again.Revision == before.Revision && again.InputCount == before.InputCount, "two reads with no write between differ: %+v then %+v", before, again),
			want(after.InputCount == before.InputCount+1, "after queueing an input the transaction reads input count %d, want %d", after.InputCount, before.InputCount+1),
			want(after.Revision > before.Revision, "after queueing an input the transaction reads revision %d, want more than %d", after.Revision, before.Revision),
		)
	})
}

// txUsableAfterRefusal: a method that refuses (ErrDuplicate, ErrFenced,
// ErrNotFound) leaves the transaction usable, and what it wrote before and
// after commits. The kernel relies on it (a key taken, then its owner
// read, in one transaction).
func txUsableAfterRefusal(ctx context.Context, s storage.Store) error {
	w, err := SeedWork(ctx, s, "wrk_a")
	if err != nil {
		return err
	}
	running := storage.WorkRunning
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_1", nil); err != nil {
			return err
		}
		if _, err := insertEvent(ctx, tx, "evt_1", nil); !errors.Is(err, storage.ErrDuplicate) {
			return fmt.Errorf("a duplicate event: %v", err)
		}
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, Revision: w.Revision + 5, State: &running, Now: at(1)}); !errors.Is(err, storage.ErrFenced) {
			return fmt.Errorf("a stale update: %v", err)
		}
		if _, err := tx.GetWork(ctx, "wrk_none"); !errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("a missing Work: %v", err)
		}
		if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_b", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedAt: at(1)}); err != nil {
			return fmt.Errorf("a write after refusals: %w", err)
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "wrk_a", Work: "wrk_b", At: at(1)}); !errors.Is(err, storage.ErrDuplicate) {
			return fmt.Errorf("a taken key: %v", err)
		}
		owner, err := tx.GetKeyOwner(ctx, "s1", "wrk_a")
		if err != nil || owner.ID != "wrk_a" {
			return fmt.Errorf("the owner of a taken key, read after the refusal: %+v, %v", owner, err)
		}
		_, err = insertEvent(ctx, tx, "evt_2", nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("a transaction with refusals in it: %w", err)
	}
	evs, err := s.ListEvents(ctx, &storage.ListEventsParams{Scope: "s1"})
	if err != nil {
		return err
	}
	_, errB := s.GetWork(ctx, "wrk_b")
	return first(errB,
		want(list(evs, func(e storage.Event) string { return e.ID }) == "[evt_created_wrk_a evt_1 evt_2]", "committed events %v", list(evs, func(e storage.Event) string { return e.ID })))
}

// txSerialised: writes are serialised. A transaction started while another
// runs waits for it (it sees its commit) instead of failing, and
// concurrent writers all commit with a gap-free sequence.
func txSerialised(ctx context.Context, s storage.Store) error {
	second := make(chan error, 1)
	started := make(chan struct{})
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_first", nil); err != nil {
			return err
		}
		go func() {
			close(started)
			second <- s.WithTx(ctx, func(tx storage.Tx) error {
				if _, err := tx.GetEvent(ctx, "evt_first"); err != nil {
					return fmt.Errorf("the second transaction ran before the first committed: %w", err)
				}
				_, err := insertEvent(ctx, tx, "evt_second", nil)
				return err
			})
		}()
		<-started
		// The second transaction must wait for this one: it cannot end
		// while this one is open.
		select {
		case err := <-second:
			return fmt.Errorf("a transaction started while another ran ended before it (%v): writes are not serialised", err)
		case <-time.After(200 * time.Millisecond):
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := <-second; err != nil {
		return fmt.Errorf("a transaction started while another ran: %w", err)
	}
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.WithTx(ctx, func(tx storage.Tx) error {
				_, err := insertEvent(ctx, tx, fmt.Sprintf("evt_c%d", i), nil)
				return err
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("a concurrent writer: %w", err)
		}
	}
	evs, err := s.ListEvents(ctx, &storage.ListEventsParams{})
	if err != nil {
		return err
	}
	if len(evs) != n+2 || evs[1].ID != "evt_second" {
		return fmt.Errorf("after concurrent writers the record holds %v", list(evs, func(e storage.Event) string { return e.ID }))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			return fmt.Errorf("event %s has seq %d, want %d", e.ID, e.Seq, i+1)
		}
	}
	return nil
}

// eventsSurviveReopen: what committed is there after a reopen, what rolled
// back is not, the sequence continues without a gap and delivery
// identities are remembered.
func eventsSurviveReopen(ctx context.Context, env *Env) error {
	s := env.Store
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := insertEvent(ctx, tx, "evt_1", func(p *storage.InsertEventParams) { p.DeliveryID, p.Data = "d-1", []byte(`{"n":1}`) })
		return err
	}); err != nil {
		return err
	}
	_ = s.WithTx(ctx, func(tx storage.Tx) error {
		_, _ = insertEvent(ctx, tx, "evt_lost", nil)
		return errors.New("roll back")
	})
	if err := env.Reopen(); err != nil {
		return err
	}
	s = env.Store
	e, err := s.GetEvent(ctx, "evt_1")
	if err != nil {
		return fmt.Errorf("a committed event after a reopen: %w", err)
	}
	if e.Seq != 1 || !sameJSON(e.Data, []byte(`{"n":1}`)) {
		return fmt.Errorf("evt_1 after a reopen = %+v", e)
	}
	if _, err := s.GetEvent(ctx, "evt_lost"); !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("a rolled-back event after a reopen: %v", err)
	}
	dup := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := insertEvent(ctx, tx, "evt_again", func(p *storage.InsertEventParams) { p.DeliveryID = "d-1" })
		return err
	})
	if err := wantErr(dup, storage.ErrDuplicate, "a delivery accepted before the reopen, again"); err != nil {
		return err
	}
	var e2 storage.Event
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		e2, err = insertEvent(ctx, tx, "evt_2", nil)
		return err
	}); err != nil {
		return err
	}
	last, err := s.LastSeq(ctx)
	return first(err, want(e2.Seq == 2 && last == 2, "after a reopen the next event has seq %d and LastSeq is %d, want 2 and 2", e2.Seq, last))
}
