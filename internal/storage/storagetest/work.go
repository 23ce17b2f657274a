package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/internal/storage"
)

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
		if other, err := tx.GetKeyOwner(ctx, "s2", "pr/1"); err != nil || other.ID != "wrk_b" {
			return fmt.Errorf("after wrk_a released its keys, the owner of pr/1 in s2 = %s, %v; want wrk_b", other.ID, err)
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "pr/1", Work: "wrk_b", At: at(2)}); err != nil {
			return fmt.Errorf("acquiring a released key: %w", err)
		}
		if owner, err := tx.GetKeyOwner(ctx, "s1", "pr/1"); err != nil || owner.ID != "wrk_b" {
			return fmt.Errorf("owner of pr/1 acquired again after its release = %s, %v; want wrk_b", owner.ID, err)
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
	// The oldest comes first, whatever its id.
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_z", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedAt: at(-5)})
		return err
	}); err != nil {
		return err
	}
	ws, err := s.ListClaimable(ctx, 10)
	if err != nil {
		return err
	}
	one, err := s.ListClaimable(ctx, 1)
	if err != nil {
		return err
	}
	ids := list(ws, func(w storage.Work) string { return w.ID })
	return first(
		want(ids == "[wrk_z wrk_a]", "claimable = %s, want [wrk_z wrk_a]: not the held one, the running one or the one whose attempt is stopping", ids),
		want(len(one) == 1 && one[0].ID == "wrk_z", "the first claimable = %+v, want wrk_z", one),
	)
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
				return fmt.Errorf("queuing %s: %w", id, err)
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
		if err := want(len(list) == 1 && list[0].Event == "evt_b", "inputs after 1 = %+v", list); err != nil {
			return err
		}
		// A Work the transaction created itself numbers its inputs and
		// counts them the same way.
		made, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_made", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: "evt_a", CreatedAt: T0})
		if err != nil {
			return err
		}
		var pos []int64
		for _, id := range []string{"evt_a", "evt_b", "evt_a"} {
			in, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_made", Event: id, At: at(1)})
			if err != nil {
				return fmt.Errorf("queuing %s on a Work of the same transaction: %w", id, err)
			}
			pos = append(pos, in.Position)
		}
		got, err := tx.GetWork(ctx, "wrk_made")
		if err != nil {
			return err
		}
		return want(fmt.Sprint(pos) == "[1 2 1]" && got.InputCount == 2 && got.Revision == made.Revision+2,
			"on a Work of the same transaction: positions %v, input count %d, revision %d (created at %d); want [1 2 1], 2, two more",
			pos, got.InputCount, got.Revision, made.Revision)
	})
}

// workInsertedOwningItsKey: a Work inserted with OwnKey owns its own id
// as a key, inside the transaction (before any AcquireKey) and after it,
// and acquiring that key again is fine; one whose id another Work owns as a key is inserted
// without it, and acquiring it reports the owner; a Work inserted without
// OwnKey owns nothing, and a refused insert (the id taken) acquires
// nothing.
func workInsertedOwningItsKey(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_taken"); err != nil {
		return err
	}
	if _, err := SeedWork(ctx, s, "wrk_other"); err != nil {
		return err
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "wrk_shadowed", Work: "wrk_other", At: T0})
	})
	if err != nil {
		return err
	}
	owner := func(tx storage.Tx, key string) string {
		w, err := tx.GetKeyOwner(ctx, "s1", key)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return "-"
		case err != nil:
			return err.Error()
		}
		return w.ID
	}
	var inTx []string
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_in", nil); err != nil {
			return err
		}
		insert := func(p storage.InsertWorkParams) error {
			p.Scope, p.Binding, p.State, p.CreatedAt = "s1", "b1", storage.WorkReady, at(1)
			_, err := tx.InsertWork(ctx, &p)
			return err
		}
		err := insert(storage.InsertWorkParams{ID: "wrk_taken", OwnKey: true})
		if err := wantErr(err, storage.ErrDuplicate, "a Work inserted with its key under a taken id"); err != nil {
			return err
		}
		for _, p := range []storage.InsertWorkParams{{ID: "wrk_own", Input: "evt_in", OwnKey: true}, {ID: "wrk_plain", OwnKey: true}, {ID: "wrk_bare"}, {ID: "wrk_shadowed", OwnKey: true}} {
			if err := insert(p); err != nil {
				return fmt.Errorf("insert %s: %w", p.ID, err)
			}
		}
		// Right after its insert, with nothing between that could tell
		// the transaction who owns the key.
		shadowed := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "wrk_shadowed", Work: "wrk_shadowed", At: at(1)})
		if err := wantErr(shadowed, storage.ErrDuplicate, "acquiring the own id another Work owns as a key"); err != nil {
			return err
		}
		for _, key := range []string{"wrk_own", "wrk_plain", "wrk_shadowed", "wrk_bare", "wrk_taken"} {
			inTx = append(inTx, owner(tx, key))
		}
		if err := insert(storage.InsertWorkParams{ID: "wrk_last", OwnKey: true}); err != nil {
			return err
		}
		for _, id := range []string{"wrk_last", "wrk_own", "wrk_plain"} {
			if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: id, Work: id, At: at(1)}); err != nil {
				return fmt.Errorf("acquiring the key %s acquired with its Work: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var after []string
	var keys []string
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		for _, key := range []string{"wrk_own", "wrk_plain", "wrk_shadowed", "wrk_bare", "wrk_taken"} {
			after = append(after, owner(tx, key))
		}
		var err error
		keys, err = tx.ListWorkKeys(ctx, "wrk_own")
		return err
	})
	if err != nil {
		return err
	}
	wantOwners := fmt.Sprint([]string{"wrk_own", "wrk_plain", "wrk_other", "-", "wrk_taken"})
	return first(
		want(fmt.Sprint(inTx) == wantOwners, "owners of the keys in the inserting transaction = %v; want %s (- = no owner)", inTx, wantOwners),
		want(fmt.Sprint(after) == wantOwners, "owners of the keys after it = %v; want %s (- = no owner)", after, wantOwners),
		want(fmt.Sprint(keys) == "[wrk_own]", "keys of wrk_own = %v", keys),
	)
}

// workInsertedAssumedNew: a Work inserted on its caller's assumption
// that it is new (InsertWorkParams.Assumed) is the row a plain insert
// leaves, with its input and own key, inside the transaction and after
// it. A wrong assumption (the id taken, or the own key owned by another
// Work) fails the transaction with ErrDuplicate wherever the engine finds
// out, after a later statement of the caller too, and leaves nothing of
// it: not its events, not the Work.
func workInsertedAssumedNew(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_exists"); err != nil {
		return err
	}
	keyOwner, err := SeedWork(ctx, s, "wrk_keyowner")
	if err != nil {
		return err
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "wrk_shadow", Work: keyOwner.ID, At: T0})
	})
	if err != nil {
		return err
	}
	var w, bare, inTx storage.Work
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_assumed", nil); err != nil {
			return err
		}
		var err error
		w, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_new", Scope: "s1", Binding: "b1", State: storage.WorkReady, Parent: "wrk_exists",
			CreatedEvent: "evt_assumed", Grants: []string{"g1", "g2"}, CreatedAt: at(1), Input: "evt_assumed", OwnKey: true, Assumed: true})
		if err != nil {
			return err
		}
		if bare, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_bare", Scope: "s1", Binding: "b2", State: storage.WorkReady, CreatedAt: at(2), Assumed: true}); err != nil {
			return err
		}
		if inTx, err = tx.GetWork(ctx, "wrk_new"); err != nil {
			return err
		}
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "wrk_new", Work: "wrk_new", At: at(1)})
	})
	if err != nil {
		return fmt.Errorf("inserting Work assumed new: %w", err)
	}
	got, err := s.GetWork(ctx, "wrk_new")
	if err != nil {
		return err
	}
	gotBare, err := s.GetWork(ctx, "wrk_bare")
	if err != nil {
		return err
	}
	owner, err := s.GetKeyOwner(ctx, "s1", "wrk_new")
	if err != nil {
		return err
	}
	bareKeys, err := s.ListWorkKeys(ctx, "wrk_bare")
	if err != nil {
		return err
	}
	if err := first(
		want(w.ID == "wrk_new" && w.Parent == "wrk_exists" && w.State == storage.WorkReady && fmt.Sprint(w.Grants) == "[g1 g2]" && w.InputCount == 1 &&
			w.CreatedAt.Equal(at(1)) && w.UpdatedAt.Equal(at(1)), "the Work assumed new, as inserted = %+v", w),
		want(same(got, w), "wrk_new read back = %+v; inserted %+v", got, w),
		want(same(inTx, w), "wrk_new read in its transaction = %+v; inserted %+v", inTx, w),
		want(same(gotBare, bare) && len(bare.Grants) == 0 && bare.InputCount == 0, "wrk_bare read back = %+v; inserted %+v", gotBare, bare),
		want(owner.ID == "wrk_new", "the own key of wrk_new is owned by %s", owner.ID),
		want(len(bareKeys) == 0, "wrk_bare, inserted without OwnKey, owns %v", bareKeys),
		want(fmt.Sprint(inputsOfWork(ctx, s, "wrk_new")) == "[evt_assumed]", "inputs of wrk_new = %v", inputsOfWork(ctx, s, "wrk_new")),
	); err != nil {
		return err
	}
	// Wrong: the id is taken. The insert or a later statement may say
	// so, or the end of the transaction.
	seq, err := s.LastSeq(ctx)
	if err != nil {
		return err
	}
	wrong := []struct {
		id, event string
		then      func(tx storage.Tx) error
	}{
		{"wrk_exists", "evt_wrong1", func(tx storage.Tx) error { return nil }},
		{"wrk_exists", "evt_wrong2", func(tx storage.Tx) error {
			_, err := tx.ListInputs(ctx, &storage.ListInputsParams{Work: "wrk_exists", Limit: 1})
			return err
		}},
		// Wrong: the id is free but another Work owns it as a key.
		{"wrk_shadow", "", func(tx storage.Tx) error {
			return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "wrk_shadow", Work: "wrk_shadow", At: at(3)})
		}},
	}
	for _, c := range wrong {
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			if c.event != "" {
				if _, err := insertEvent(ctx, tx, c.event, nil); err != nil {
					return err
				}
			}
			if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: c.id, Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: c.event,
				CreatedAt: at(3), OwnKey: true, Assumed: true}); err != nil {
				return err
			}
			return c.then(tx)
		})
		if err := wantErr(err, storage.ErrDuplicate, "a transaction that assumed "+c.id+" new"); err != nil {
			return err
		}
		if c.event != "" {
			if _, err := s.GetEvent(ctx, c.event); !errors.Is(err, storage.ErrNotFound) {
				return fmt.Errorf("the event of a transaction that assumed %s new is readable after it failed (%v)", c.id, err)
			}
		}
	}
	after, err := s.LastSeq(ctx)
	if err != nil {
		return err
	}
	exists, err := s.GetWork(ctx, "wrk_exists")
	if err != nil {
		return err
	}
	_, shadowErr := s.GetWork(ctx, "wrk_shadow")
	shadowOwner, err := s.GetKeyOwner(ctx, "s1", "wrk_shadow")
	if err != nil {
		return err
	}
	return first(
		want(after == seq, "the failed transactions moved the event sequence from %d to %d", seq, after),
		want(exists.CreatedEvent == "evt_created_wrk_exists" && exists.Revision == 1, "wrk_exists after the failed inserts = %+v", exists),
		want(errors.Is(shadowErr, storage.ErrNotFound), "wrk_shadow, whose key was owned, was inserted (%v)", shadowErr),
		want(shadowOwner.ID == keyOwner.ID, "the key wrk_shadow is owned by %s after the failed insert; want %s", shadowOwner.ID, keyOwner.ID),
	)
}

// inputsOfWork lists the events queued on a Work, in order ("error: …"
// when they cannot be read).
func inputsOfWork(ctx context.Context, s storage.Store, work string) []string {
	var out []string
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		ins, err := tx.ListInputs(ctx, &storage.ListInputsParams{Work: work, Limit: 100})
		for _, in := range ins {
			out = append(out, in.Event)
		}
		return err
	})
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return out
}

// workInsertedWithInput: a Work inserted with its first input has it at
// position 1 and counts it, inside the transaction and after it; later
// inputs follow at 2, the same event again is not queued twice, and a
// refused insert (the id taken) queues nothing.
func workInsertedWithInput(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_taken"); err != nil {
		return err
	}
	var made, inTx storage.Work
	var again []storage.Input
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for _, id := range []string{"evt_first", "evt_second"} {
			if _, err := insertEvent(ctx, tx, id, nil); err != nil {
				return err
			}
		}
		var err error
		made, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_in", Scope: "s1", Binding: "b1", State: storage.WorkReady,
			CreatedEvent: "evt_first", CreatedAt: at(1), Input: "evt_first"})
		if err != nil {
			return err
		}
		if inTx, err = tx.GetWork(ctx, "wrk_in"); err != nil {
			return err
		}
		for _, id := range []string{"evt_second", "evt_first"} {
			in, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_in", Event: id, At: at(2)})
			if err != nil {
				return err
			}
			again = append(again, in)
		}
		_, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_taken", Scope: "s1", Binding: "b1", State: storage.WorkReady,
			CreatedEvent: "evt_second", CreatedAt: at(1), Input: "evt_second"})
		return wantErr(err, storage.ErrDuplicate, "a Work inserted with an input under a taken id")
	})
	if err != nil {
		return err
	}
	ins, err := s.ListInputs(ctx, &storage.ListInputsParams{Work: "wrk_in"})
	if err != nil {
		return err
	}
	taken, err := s.ListInputs(ctx, &storage.ListInputsParams{Work: "wrk_taken"})
	if err != nil {
		return err
	}
	after, err := s.GetWork(ctx, "wrk_in")
	if err != nil {
		return err
	}
	return first(
		want(made.InputCount == 1 && inTx.InputCount == 1, "a Work inserted with an input counts %d (read in its transaction: %d), want 1", made.InputCount, inTx.InputCount),
		want(len(ins) == 2 && ins[0].Position == 1 && ins[0].Event == "evt_first" && ins[0].QueuedAt.Equal(at(1)) && ins[1].Position == 2 && ins[1].Event == "evt_second",
			"inputs %+v, want evt_first at 1 (queued at its creation) and evt_second at 2", ins),
		want(len(again) == 2 && again[0].Position == 2 && again[1].Position == 1, "queued after the insert: %+v, want evt_second at 2 and evt_first found at 1", again),
		want(after.InputCount == 2, "input count after the transaction = %d, want 2", after.InputCount),
		want(len(taken) == 0, "a refused insert queued %+v", taken),
	)
}

// workClaimedTogether: ClaimWork moves, in one call, each Work still
// ready, unheld and at its listed revision to running (watermark at its
// input count, one more attempt, revision bumped), returns those, leaves
// the others as they were (a revision that moved, a held Work, one
// running, an unknown id), and the transaction reads what it moved.
func workClaimedTogether(ctx context.Context, s storage.Store) error {
	ids := []string{"wrk_go", "wrk_moved", "wrk_held", "wrk_running", "wrk_also"}
	seeded := map[string]storage.Work{}
	for _, id := range ids {
		w, err := SeedWork(ctx, s, id)
		if err != nil {
			return err
		}
		seeded[id] = w
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_in", nil); err != nil {
			return err
		}
		if _, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_go", Event: "evt_in", At: at(1)}); err != nil {
			return err
		}
		held, running := "held_by_test", storage.WorkRunning
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_held", BlockedReason: &held, Now: at(1)}); err != nil {
			return err
		}
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_running", State: &running, Now: at(1)})
		return err
	})
	if err != nil {
		return err
	}
	listed := map[string]storage.Work{}
	for _, id := range ids {
		if listed[id], err = s.GetWork(ctx, id); err != nil {
			return err
		}
	}
	// wrk_moved changes after it was listed.
	if err := updateWork(ctx, s, "wrk_moved", storage.WorkReady, 2); err != nil {
		return err
	}
	before := map[string]storage.Work{}
	for _, id := range ids {
		if before[id], err = s.GetWork(ctx, id); err != nil {
			return err
		}
	}
	var claimed, none []storage.Work
	var inTx storage.Work
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.GetWork(ctx, "wrk_go"); err != nil {
			return err
		}
		var err error
		if none, err = tx.ClaimWork(ctx, &storage.ClaimWorkParams{Now: at(3)}); err != nil {
			return err
		}
		var list []storage.WorkRevision
		for _, id := range ids {
			list = append(list, storage.WorkRevision{ID: id, Revision: listed[id].Revision})
		}
		list = append(list, storage.WorkRevision{ID: "wrk_unknown", Revision: 1})
		if claimed, err = tx.ClaimWork(ctx, &storage.ClaimWorkParams{Work: list, Now: at(3)}); err != nil {
			return err
		}
		inTx, err = tx.GetWork(ctx, "wrk_go")
		return err
	})
	if err != nil {
		return err
	}
	var got []string
	for _, w := range claimed {
		got = append(got, w.ID)
	}
	slices.Sort(got)
	errs := []error{
		want(len(none) == 0, "an empty claim moved %v", none),
		want(slices.Equal(got, []string{"wrk_also", "wrk_go"}), "claimed %v, want wrk_also and wrk_go", got),
		want(inTx.State == storage.WorkRunning, "the claiming transaction reads wrk_go %s, want running", inTx.State),
	}
	for _, id := range ids {
		w, err := s.GetWork(ctx, id)
		if err != nil {
			return err
		}
		was := before[id]
		if id == "wrk_go" || id == "wrk_also" {
			errs = append(errs, want(w.State == storage.WorkRunning && w.Attempts == was.Attempts+1 && w.InputWatermark == was.InputCount &&
				w.Revision == was.Revision+1 && w.UpdatedAt.Equal(at(3)), "%s after its claim = %+v; before %+v", id, w, was))
			continue
		}
		errs = append(errs, want(same(w, was), "%s, not to be claimed, reads %+v; before %+v", id, w, was))
	}
	return first(errs...)
}

// workClaimedWhole: a claim of listed rows (ClaimWorkParams.Listed) is
// all or none. With one of three Work changed since it was listed, the
// claim's transaction fails with ErrFenced, whether a statement follows
// the claim or the claim is its last write, and claims none of them (nor
// keeps the statement after it); a listing that holds a held Work is
// refused too. From a new listing all three move, and the rows the claim
// returns are the rows read inside its transaction and after it.
func workClaimedWhole(ctx context.Context, s storage.Store) error {
	ids := []string{"wrk_a", "wrk_b", "wrk_c"}
	for _, id := range ids {
		if _, err := SeedWork(ctx, s, id); err != nil {
			return err
		}
	}
	list := func() ([]storage.Work, error) {
		var ws []storage.Work
		for _, id := range ids {
			w, err := s.GetWork(ctx, id)
			if err != nil {
				return nil, err
			}
			ws = append(ws, w)
		}
		return ws, nil
	}
	listed, err := list()
	if err != nil {
		return err
	}
	// wrk_b takes an input after it was listed.
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := insertEvent(ctx, tx, "evt_in", nil); err != nil {
			return err
		}
		_, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_b", Event: "evt_in", At: at(1)})
		return err
	})
	if err != nil {
		return err
	}
	before, err := list()
	if err != nil {
		return err
	}
	claim := func(ws []storage.Work, then func(tx storage.Tx) error) ([]storage.Work, error) {
		var out []storage.Work
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			if out, err = tx.ClaimWork(ctx, &storage.ClaimWorkParams{Listed: ws, Now: at(3)}); err != nil {
				return err
			}
			if then != nil {
				return then(tx)
			}
			return nil
		})
		return out, err
	}
	_, staleThen := claim(listed, func(tx storage.Tx) error {
		_, err := insertEvent(ctx, tx, "evt_after_claim", nil)
		return err
	})
	_, staleLast := claim(listed, nil)
	hold := func(reason string) error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_c", BlockedReason: &reason, Now: at(2)})
			return err
		})
	}
	if err := hold("held_by_test"); err != nil {
		return err
	}
	withHeld, err := list()
	if err != nil {
		return err
	}
	_, heldErr := claim(withHeld, nil)
	errs := []error{
		wantErr(staleThen, storage.ErrFenced, "a whole claim of a Work changed since it was listed, a statement after it"),
		wantErr(staleLast, storage.ErrFenced, "a whole claim of a Work changed since it was listed, as the last write"),
		wantErr(heldErr, storage.ErrFenced, "a whole claim listing a held Work"),
	}
	if _, err := s.GetEvent(ctx, "evt_after_claim"); !errors.Is(err, storage.ErrNotFound) {
		errs = append(errs, fmt.Errorf("the event inserted after a refused claim reads %v, want it never committed", err))
	}
	for i, id := range ids[:2] {
		w, err := s.GetWork(ctx, id)
		if err != nil {
			return err
		}
		errs = append(errs, want(same(w, before[i]), "%s after refused whole claims reads %+v; before %+v", id, w, before[i]))
	}
	if err := hold(""); err != nil {
		return err
	}
	fresh, err := list()
	if err != nil {
		return err
	}
	inTx := map[string]storage.Work{}
	claimed, err := claim(fresh, func(tx storage.Tx) error {
		for _, id := range ids {
			w, err := tx.GetWork(ctx, id)
			if err != nil {
				return err
			}
			inTx[id] = w
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("a whole claim of Work as listed: %w", err)
	}
	errs = append(errs, want(len(claimed) == len(ids), "a whole claim of %d Work returned %d rows", len(ids), len(claimed)))
	for _, c := range claimed {
		var was storage.Work
		for _, f := range fresh {
			if f.ID == c.ID {
				was = f
			}
		}
		w, err := s.GetWork(ctx, c.ID)
		if err != nil {
			return err
		}
		errs = append(errs,
			want(c.State == storage.WorkRunning && c.Attempts == was.Attempts+1 && c.InputWatermark == was.InputCount &&
				c.Revision == was.Revision+1 && c.UpdatedAt.Equal(at(3)), "%s as its whole claim returned it = %+v; listed %+v", c.ID, c, was),
			want(same(c, w), "%s as its whole claim returned it = %+v; the store then reads %+v", c.ID, c, w),
			want(same(c, inTx[c.ID]), "%s as its whole claim returned it = %+v; its transaction then read %+v", c.ID, c, inTx[c.ID]))
	}
	return first(errs...)
}

func workCases() []Case {
	return []Case{
		{Name: "work_round_trip", Run: plain(workRoundTrip), Control: updateWorkZeroesNilFields},
		{Name: "work_update_fenced", Run: plain(workUpdateFenced), Control: workRevisionBlind},
		{Name: "work_keys_exclusive", Run: plain(workKeysExclusive), Control: swallowsKeyConflicts},
		{Name: "work_list_keyset", Run: plain(workListKeyset), Control: workListIgnoresUntil},
		{Name: "work_list_filters", Run: plain(workListFilters), Control: workListIgnoresParent},
		{Name: "work_claimable", Run: plain(workClaimable), Control: claimableIgnoresHolds},
		{Name: "work_count", Run: plain(workCount), Control: countWorkIgnoresStates},
		{Name: "inputs_queue_once", Run: plain(inputsQueueOnce), Control: refusesRepeatedInput},
		{Name: "work_inserted_with_input", Run: plain(workInsertedWithInput), Control: insertDropsInput},
		{Name: "work_inserted_owning_its_key", Run: plain(workInsertedOwningItsKey), Control: insertForgetsOwnKey},
		{Name: "work_inserted_assumed_new", Run: plain(workInsertedAssumedNew), Control: assumedInsertSkipsTakenID},
		{Name: "work_claimed_together", Run: plain(workClaimedTogether), Control: claimsPastRevision},
		{Name: "work_claimed_whole", Run: plain(workClaimedWhole), Control: wholeClaimInPart},
		{Name: "inputs_list_window", Run: plain(inputsListWindow), Control: inputsIgnoreUntil},
		{Name: "work_survives_reopen", Run: workSurvivesReopen, Control: forgetsKeysOnReopen},
	}
}

func workRoundTrip(ctx context.Context, s storage.Store) error {
	var parent, w storage.Work
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		ev, err := insertEvent(ctx, tx, "evt_created", nil)
		if err != nil {
			return err
		}
		if parent, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_parent", Scope: "s1", Binding: "b1", State: storage.WorkRunning, CreatedAt: T0}); err != nil {
			return err
		}
		w, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_1", Scope: "s1", Binding: "b2", State: storage.WorkReady, Parent: parent.ID,
			CreatedEvent: ev.ID, Grants: []string{"g1", "g2"}, CreatedAt: at(1)})
		return err
	})
	if err != nil {
		return err
	}
	if w.ID != "wrk_1" || w.Scope != "s1" || w.Binding != "b2" || w.State != storage.WorkReady || w.Parent != "wrk_parent" || w.CreatedEvent != "evt_created" ||
		fmt.Sprint(w.Grants) != "[g1 g2]" || w.Held() || w.InputWatermark != 0 || w.InputCount != 0 || w.Attempts != 0 || !w.CreatedAt.Equal(at(1)) ||
		w.OutcomeMessage != "" || len(w.OutcomeData) != 0 {
		return fmt.Errorf("inserted work = %+v", w)
	}
	if got, err := s.GetWork(ctx, "wrk_1"); err != nil || !same(got, w) {
		return fmt.Errorf("work read back = %+v, %v; inserted %+v", got, err, w)
	}
	if parent.Parent != "" || len(parent.Grants) != 0 {
		return fmt.Errorf("a Work without parent and grants = %+v", parent)
	}
	dup := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_1", Scope: "s2", Binding: "b1", State: storage.WorkReady, CreatedAt: at(2)})
		return err
	})
	if err := wantErr(dup, storage.ErrDuplicate, "a second Work with the same id"); err != nil {
		return err
	}
	held, detail, msg, wm, why := "operator_hold", "held by ann", "done so far", int64(3), "start gate g: a person approves it"
	data := json.RawMessage(`{"x":1}`)
	var updated, stateOnly, cleared, moved storage.Work
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		updated, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_1", BlockedReason: &held, BlockedDetail: &detail, OutcomeMessage: &msg,
			WaitReason: &why, OutcomeData: &data, InputWatermark: &wm, AddAttempts: 2, Now: at(5)})
		if err != nil {
			return err
		}
		running := storage.WorkRunning
		// Nil fields are left as they are.
		if stateOnly, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_1", State: &running, AddAttempts: 1, Now: at(6)}); err != nil {
			return err
		}
		none := ""
		if cleared, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_1", BlockedReason: &none, Now: at(7)}); err != nil {
			return err
		}
		// A rebind moves the Work to another binding with other grants.
		b3, g3 := "b3", []string{"g3"}
		moved, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_1", Binding: &b3, Grants: &g3, Now: at(8)})
		return err
	})
	if err != nil {
		return err
	}
	reread, err := s.GetWork(ctx, "wrk_1")
	if err != nil {
		return err
	}
	return first(
		want(updated.BlockedReason == held && updated.BlockedDetail == detail && updated.Held() && updated.OutcomeMessage == msg && sameJSON(updated.OutcomeData, data) &&
			updated.WaitReason == why && updated.InputWatermark == 3 && updated.Attempts == 2 && updated.State == storage.WorkReady && updated.Revision > w.Revision && updated.UpdatedAt.Equal(at(5)) &&
			fmt.Sprint(updated.Grants) == "[g1 g2]" && updated.Parent == "wrk_parent" && updated.CreatedAt.Equal(at(1)), "updated work = %+v", updated),
		want(stateOnly.State == storage.WorkRunning && stateOnly.BlockedReason == held && stateOnly.BlockedDetail == detail && stateOnly.OutcomeMessage == msg && stateOnly.WaitReason == why &&
			sameJSON(stateOnly.OutcomeData, data) && stateOnly.InputWatermark == 3 && stateOnly.Attempts == 3 && stateOnly.Revision > updated.Revision,
			"an update of the state alone changed other fields: %+v", stateOnly),
		want(!cleared.Held() && cleared.BlockedDetail == detail && cleared.State == storage.WorkRunning, "clearing the hold = %+v", cleared),
		want(cleared.Binding == "b2" && fmt.Sprint(cleared.Grants) == "[g1 g2]", "an update without a binding or grants moved the Work: %+v", cleared),
		want(moved.Binding == "b3" && fmt.Sprint(moved.Grants) == "[g3]" && !moved.Held() && moved.State == storage.WorkRunning && moved.Scope == "s1",
			"the rebound work = %+v", moved),
		want(same(reread, moved), "work read back after the updates = %+v, want %+v", reread, moved),
	)
}

func workListFilters(ctx context.Context, s storage.Store) error {
	specs := []storage.InsertWorkParams{
		{ID: "wrk_0", Scope: "s1", Binding: "b1", State: storage.WorkReady},
		{ID: "wrk_1", Scope: "s1", Binding: "b2", State: storage.WorkRunning, Parent: "wrk_0"},
		{ID: "wrk_2", Scope: "s2", Binding: "b1", State: storage.WorkReady, Parent: "wrk_0"},
		{ID: "wrk_3", Scope: "s1", Binding: "b1", State: storage.WorkSucceeded, Parent: "wrk_1"},
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range specs {
			specs[i].CreatedAt = at(i)
			if _, err := tx.InsertWork(ctx, &specs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	checks := []struct {
		p    storage.ListWorkParams
		want string
	}{
		{storage.ListWorkParams{}, "[wrk_0 wrk_1 wrk_2 wrk_3]"},
		{storage.ListWorkParams{Scope: "s1"}, "[wrk_0 wrk_1 wrk_3]"},
		{storage.ListWorkParams{State: storage.WorkReady}, "[wrk_0 wrk_2]"},
		{storage.ListWorkParams{Parent: "wrk_0"}, "[wrk_1 wrk_2]"},
		{storage.ListWorkParams{Binding: "b1"}, "[wrk_0 wrk_2 wrk_3]"},
		{storage.ListWorkParams{Scope: "s1", Binding: "b1", State: storage.WorkSucceeded, Parent: "wrk_1"}, "[wrk_3]"},
		{storage.ListWorkParams{Parent: "wrk_3"}, "[]"},
		{storage.ListWorkParams{Scope: "s1", Page: storage.Page{Desc: true, Limit: 2}}, "[wrk_3 wrk_1]"},
	}
	for _, c := range checks {
		ws, err := s.ListWork(ctx, &c.p)
		if err != nil {
			return err
		}
		if got := list(ws, func(w storage.Work) string { return w.ID }); got != c.want {
			return fmt.Errorf("ListWork(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	return nil
}

func workCount(ctx context.Context, s storage.Store) error {
	states := []storage.WorkState{storage.WorkReady, storage.WorkRunning, storage.WorkWaiting, storage.WorkSucceeded, storage.WorkFailed, storage.WorkCancelled, storage.WorkReady}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i, st := range states {
			if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: fmt.Sprintf("wrk_%d", i), Scope: "s1", Binding: "b1", State: st, CreatedAt: at(i)}); err != nil {
				return err
			}
		}
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_other", Scope: "s2", Binding: "b1", State: storage.WorkReady, CreatedAt: T0})
		return err
	})
	if err != nil {
		return err
	}
	live, err1 := s.CountWork(ctx, "s1", storage.NonterminalWorkStates)
	ended, err2 := s.CountWork(ctx, "s1", []storage.WorkState{storage.WorkSucceeded, storage.WorkFailed})
	other, err3 := s.CountWork(ctx, "s2", storage.NonterminalWorkStates)
	none, err4 := s.CountWork(ctx, "s3", storage.NonterminalWorkStates)
	return first(err1, err2, err3, err4,
		want(live == 4, "nonterminal Work in s1 = %d, want 4", live),
		want(ended == 2, "succeeded or failed Work in s1 = %d, want 2", ended),
		want(other == 1, "nonterminal Work in s2 = %d, want 1", other),
		want(none == 0, "Work in an empty scope = %d, want 0", none),
	)
}

func inputsListWindow(ctx context.Context, s storage.Store) error {
	if _, err := SeedWork(ctx, s, "wrk_1"); err != nil {
		return err
	}
	if _, err := SeedWork(ctx, s, "wrk_2"); err != nil {
		return err
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 5 {
			id := fmt.Sprintf("evt_in%d", i)
			if _, err := insertEvent(ctx, tx, id, nil); err != nil {
				return err
			}
			if _, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_1", Event: id, At: at(i)}); err != nil {
				return err
			}
		}
		_, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: "wrk_2", Event: "evt_in0", At: at(9)})
		return err
	})
	if err != nil {
		return err
	}
	pos := func(p storage.ListInputsParams) (string, error) {
		ins, err := s.ListInputs(ctx, &p)
		return list(ins, func(in storage.Input) string { return fmt.Sprintf("%d:%s", in.Position, in.Event) }), err
	}
	all, err1 := pos(storage.ListInputsParams{Work: "wrk_1"})
	window, err2 := pos(storage.ListInputsParams{Work: "wrk_1", AfterPosition: 1, UntilPosition: 4, Limit: 2})
	rest, err3 := pos(storage.ListInputsParams{Work: "wrk_1", AfterPosition: 3, UntilPosition: 4})
	one, err4 := pos(storage.ListInputsParams{Work: "wrk_1", AfterPosition: 4, UntilPosition: 5, Limit: 1})
	other, err5 := pos(storage.ListInputsParams{Work: "wrk_2"})
	ins, err6 := s.ListInputs(ctx, &storage.ListInputsParams{Work: "wrk_1", AfterPosition: 2, Limit: 1})
	return first(err1, err2, err3, err4, err5, err6,
		want(all == "[1:evt_in0 2:evt_in1 3:evt_in2 4:evt_in3 5:evt_in4]", "inputs = %s", all),
		want(window == "[2:evt_in1 3:evt_in2]", "inputs after 1 up to 4, two = %s", window),
		want(rest == "[4:evt_in3]", "inputs after 3 up to 4 = %s", rest),
		want(one == "[5:evt_in4]", "the input at 5 = %s", one),
		want(other == "[1:evt_in0]", "the other Work's inputs = %s, want its own position 1", other),
		want(len(ins) == 1 && ins[0].Work == "wrk_1" && ins[0].QueuedAt.Equal(at(2)), "input 3 = %+v", ins),
	)
}

// workSurvivesReopen: a Work's state, revision and keys persist, and so
// does its fence.
func workSurvivesReopen(ctx context.Context, env *Env) error {
	s := env.Store
	w, err := SeedWork(ctx, s, "wrk_1")
	if err != nil {
		return err
	}
	waiting := storage.WorkWaiting
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "pr/7", Work: "wrk_1", At: at(1)}); err != nil {
			return err
		}
		w, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_1", Revision: w.Revision, State: &waiting, AddAttempts: 1, Now: at(2)})
		return err
	})
	if err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	s = env.Store
	got, err := s.GetWork(ctx, "wrk_1")
	if err != nil {
		return fmt.Errorf("a Work after a reopen: %w", err)
	}
	if !same(got, w) {
		return fmt.Errorf("the Work after a reopen = %+v, want %+v", got, w)
	}
	owner, err := s.GetKeyOwner(ctx, "s1", "pr/7")
	if err != nil || owner.ID != "wrk_1" {
		return fmt.Errorf("the owner of pr/7 after a reopen = %+v, %v", owner, err)
	}
	keys, err := s.ListWorkKeys(ctx, "wrk_1")
	if err != nil || fmt.Sprint(keys) != "[pr/7 wrk_1]" {
		return fmt.Errorf("keys after a reopen = %v, %v", keys, err)
	}
	ready := storage.WorkReady
	stale := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_1", Revision: w.Revision - 1, State: &ready, Now: at(3)})
		return err
	})
	return wantErr(stale, storage.ErrFenced, "an update at a revision from before the reopen")
}
