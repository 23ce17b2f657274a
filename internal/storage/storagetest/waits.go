package storagetest

import (
	"context"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

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
	missing := s.WithTx(ctx, func(tx storage.Tx) error { return tx.FireTimer(ctx, "tmr_none", at(22)) })
	return first(err,
		wantErr(twice, storage.ErrFenced, "firing a timer twice"),
		wantErr(missing, storage.ErrNotFound, "firing a missing timer"),
		want(len(due) == 1 && due[0].ID == "tmr_2", "due after firing = %+v", due),
		want(t1.FiredAt.Equal(at(21)), "fired_at = %v", t1.FiredAt),
	)
}

func waitCases() []Case {
	return []Case{
		{Name: "wait_lifecycle", Run: plain(waitLifecycle), Control: activeWaitIgnoresState},
		{Name: "wait_round_trip", Run: plain(waitRoundTrip), Control: dropsWaitRegistration},
		{Name: "wait_by_key", Run: plain(waitsByKey), Control: waitsByKeyRepeat},
		{Name: "wait_list_filters", Run: plain(waitListFilters), Control: waitListIgnoresState},
		{Name: "timer_fires_once", Run: plain(timerFiresOnce), Control: timerRefires},
		{Name: "timer_due", Run: plain(timerDue), Control: dueTimersExcludeNow},
	}
}

// waitRoundTrip: a wait registered on behalf of a registration (no
// execution), on the Work's keys, with no timeout.
func waitRoundTrip(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_1"); err != nil {
		return err
	}
	var w storage.Wait
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		w, err = tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_1", Work: "wrk_1", Scope: "s1", Registration: "reg_1", OnWorkKeys: true, Watermark: 5, CreatedAt: at(2)})
		return err
	})
	if err != nil {
		return err
	}
	if w.ID != "wat_1" || w.Work != "wrk_1" || w.Scope != "s1" || w.Execution != "" || w.Epoch != 0 || w.Registration != "reg_1" || len(w.Types) != 0 ||
		len(w.Keys) != 0 || !w.OnWorkKeys || w.Watermark != 5 || w.Timer != "" || !w.TimeoutAt.IsZero() || w.State != storage.WaitActive ||
		w.SatisfiedBy != "" || !w.CreatedAt.Equal(at(2)) {
		return fmt.Errorf("inserted wait = %+v", w)
	}
	if got, err := s.GetWait(ctx, "wat_1"); err != nil || !same(got, w) {
		return fmt.Errorf("wait read back = %+v, %v; inserted %+v", got, err, w)
	}
	if got, err := s.GetActiveWait(ctx, "wrk_1"); err != nil || got.ID != "wat_1" {
		return fmt.Errorf("active wait = %+v, %v", got, err)
	}
	var cancelled, next storage.Wait
	var missing error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		if cancelled, err = tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_1", State: storage.WaitCancelled, Now: at(3)}); err != nil {
			return err
		}
		_, missing = tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_none", State: storage.WaitCancelled, Now: at(3)})
		// The Work may wait again once its wait is over.
		next, err = tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_2", Work: "wrk_1", Scope: "s1", Types: []string{"a.b", "a.c"}, Keys: []string{"k1"}, Watermark: 6, CreatedAt: at(4)})
		return err
	})
	if err != nil {
		return err
	}
	_, gone := s.GetWait(ctx, "wat_none")
	return first(
		want(cancelled.State == storage.WaitCancelled && cancelled.SatisfiedBy == "" && cancelled.UpdatedAt.Equal(at(3)) && cancelled.Registration == "reg_1",
			"cancelled wait = %+v", cancelled),
		wantErr(missing, storage.ErrNotFound, "moving a missing wait"),
		wantErr(gone, storage.ErrNotFound, "a missing wait"),
		want(next.State == storage.WaitActive && fmt.Sprint(next.Types) == "[a.b a.c]" && fmt.Sprint(next.Keys) == "[k1]" && !next.OnWorkKeys,
			"the next wait = %+v", next),
	)
}

// waitsByKey: the active waits of a scope that name a key explicitly, each
// once, oldest first.
func waitsByKey(ctx context.Context, s storage.Store) error {
	for _, w := range []string{"wrk_a", "wrk_b", "wrk_c", "wrk_d"} {
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_s2", Scope: "s2", Binding: "b1", State: storage.WorkWaiting, CreatedAt: T0}); err != nil {
			return err
		}
		for _, p := range []storage.InsertWaitParams{
			{ID: "wat_a", Work: "wrk_a", Scope: "s1", Keys: []string{"k1", "k1", "k2"}, CreatedAt: at(2)},
			{ID: "wat_b", Work: "wrk_b", Scope: "s1", OnWorkKeys: true, CreatedAt: at(1)},
			{ID: "wat_c", Work: "wrk_c", Scope: "s1", Keys: []string{"k1"}, CreatedAt: at(1)},
			{ID: "wat_d", Work: "wrk_d", Scope: "s1", Keys: []string{"k3"}, CreatedAt: at(3)},
			{ID: "wat_s2", Work: "wrk_s2", Scope: "s2", Keys: []string{"k1"}, CreatedAt: at(1)},
		} {
			if _, err := tx.InsertWait(ctx, &p); err != nil {
				return err
			}
		}
		_, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_d", State: storage.WaitTimedOut, Now: at(4)})
		return err
	})
	if err != nil {
		return err
	}
	ids := func(scope, key string) (string, error) {
		ws, err := s.ListActiveWaitsByKey(ctx, scope, key)
		return list(ws, func(w storage.Wait) string { return w.ID }), err
	}
	k1, err1 := ids("s1", "k1")
	k2, err2 := ids("s1", "k2")
	k3, err3 := ids("s1", "k3")
	k1s2, err4 := ids("s2", "k1")
	workKey, err5 := ids("s1", "wrk_b")
	return first(err1, err2, err3, err4, err5,
		want(k1 == "[wat_c wat_a]", "active waits on k1 = %s, want [wat_c wat_a] (each once, oldest first)", k1),
		want(k2 == "[wat_a]", "active waits on k2 = %s", k2),
		want(k3 == "[]", "active waits on k3 = %s, want none: wat_d timed out", k3),
		want(k1s2 == "[wat_s2]", "active waits on k1 in s2 = %s", k1s2),
		want(workKey == "[]", "a wait on the Work's keys is listed by the key %s", workKey),
	)
}

func waitListFilters(ctx context.Context, s storage.Store) error {
	for _, w := range []string{"wrk_a", "wrk_b"} {
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_s2", Scope: "s2", Binding: "b1", State: storage.WorkWaiting, CreatedAt: T0}); err != nil {
			return err
		}
		for i, p := range []storage.InsertWaitParams{
			{ID: "wat_1", Work: "wrk_a", Scope: "s1"},
			{ID: "wat_2", Work: "wrk_a", Scope: "s1"},
			{ID: "wat_3", Work: "wrk_b", Scope: "s1"},
			{ID: "wat_4", Work: "wrk_s2", Scope: "s2"},
		} {
			p.CreatedAt = at(i)
			if _, err := tx.InsertWait(ctx, &p); err != nil {
				return err
			}
			if p.ID == "wat_1" {
				if _, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_1", State: storage.WaitSatisfied, Now: at(i)}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	checks := []struct {
		p    storage.ListWaitsParams
		want string
	}{
		{storage.ListWaitsParams{}, "[wat_1 wat_2 wat_3 wat_4]"},
		{storage.ListWaitsParams{Work: "wrk_a"}, "[wat_1 wat_2]"},
		{storage.ListWaitsParams{Scope: "s1", State: storage.WaitActive}, "[wat_2 wat_3]"},
		{storage.ListWaitsParams{State: storage.WaitSatisfied}, "[wat_1]"},
		{storage.ListWaitsParams{Scope: "s2"}, "[wat_4]"},
		{storage.ListWaitsParams{Page: storage.Page{Desc: true, Limit: 2}}, "[wat_4 wat_3]"},
		{storage.ListWaitsParams{Page: storage.Page{After: &storage.Position{CreatedAt: at(1), ID: "wat_2"}, Until: &storage.Position{CreatedAt: at(2), ID: "wat_3"}}}, "[wat_3]"},
	}
	for _, c := range checks {
		ws, err := s.ListWaits(ctx, &c.p)
		if err != nil {
			return err
		}
		if got := list(ws, func(w storage.Wait) string { return w.ID }); got != c.want {
			return fmt.Errorf("ListWaits(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	return nil
}

// timerDue: due timers are those not fired and due at or before now,
// ordered by due time then id, up to the limit.
func timerDue(ctx context.Context, s storage.Store) error {
	specs := []struct {
		id  string
		due int
	}{{"tmr_c", 30}, {"tmr_b", 20}, {"tmr_a", 20}, {"tmr_z", 10}}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for _, sp := range specs {
			if err := tx.InsertTimer(ctx, &storage.Timer{ID: sp.id, Kind: storage.TimerWaitTimeout, Target: "wat_" + sp.id, DueAt: at(sp.due), CreatedAt: at(1)}); err != nil {
				return err
			}
		}
		return wantErr(tx.InsertTimer(ctx, &storage.Timer{ID: "tmr_a", Kind: storage.TimerWaitTimeout, Target: "x", DueAt: at(5), CreatedAt: at(1)}),
			storage.ErrDuplicate, "a second timer with the same id")
	})
	if err != nil {
		return err
	}
	ids := func(now time.Time, limit int) (string, error) {
		ts, err := s.ListDueTimers(ctx, now, limit)
		return list(ts, func(t storage.Timer) string { return t.ID }), err
	}
	at20, err1 := ids(at(20), 10)
	two, err2 := ids(at(20), 2)
	early, err3 := ids(at(9), 10)
	tm, err4 := s.GetTimer(ctx, "tmr_a")
	_, missing := s.GetTimer(ctx, "tmr_none")
	return first(err1, err2, err3, err4,
		want(at20 == "[tmr_z tmr_a tmr_b]", "due at 20s = %s, want [tmr_z tmr_a tmr_b] (due at now included, then by id)", at20),
		want(two == "[tmr_z tmr_a]", "the first two due = %s", two),
		want(early == "[]", "due at 9s = %s", early),
		want(tm.Kind == storage.TimerWaitTimeout && tm.Target == "wat_tmr_a" && tm.DueAt.Equal(at(20)) && tm.CreatedAt.Equal(at(1)) && tm.FiredAt.IsZero(),
			"timer = %+v", tm),
		wantErr(missing, storage.ErrNotFound, "a missing timer"),
	)
}
