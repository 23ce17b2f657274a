package storagetest

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The toolbelt's request records: one per (execution, request id), claimed
// before a handler runs and finished with its result, so that a repeat
// replays it; a sensitive operation's record is withheld (no result, no
// refusal, only what detects a changed body).

func replayCases() []Case {
	return []Case{
		{Name: "replay_claim_once", Run: plain(replayClaimOnce), Control: swallowsDuplicateClaims},
		{Name: "replay_finish_once", Run: plain(replayFinishOnce), Control: refinishesDoneReplays},
		{Name: "replay_delete_claimed_only", Run: plain(replayDeleteClaimedOnly), Control: pretendsToDeleteDoneReplays},
		{Name: "replay_withheld", Run: plain(replayWithheld), Control: storesWithheldResults},
		{Name: "replay_sweep", Run: plain(replaySweep), Control: replaySweepExclusive},
		{Name: "replay_survives_reopen", Run: replaySurvivesReopen, Control: forgetsReplaysOnReopen},
	}
}

func claim(exe, req string, sec int) *storage.Replay {
	return &storage.Replay{Execution: exe, RequestID: req, Operation: "acme.echo", InputHash: "hash-" + req, State: storage.ReplayClaimed, CreatedAt: at(sec), UpdatedAt: at(sec)}
}

func write(ctx context.Context, s storage.Store, fn func(tx storage.Tx) error) error {
	return s.WithTx(ctx, fn)
}

func replayClaimOnce(ctx context.Context, s storage.Store) error {
	if err := write(ctx, s, func(tx storage.Tx) error { return tx.InsertReplay(ctx, claim("exe_1", "r1", 1)) }); err != nil {
		return err
	}
	changed := claim("exe_1", "r1", 2)
	changed.InputHash, changed.Operation = "another hash", "acme.other"
	again := write(ctx, s, func(tx storage.Tx) error { return tx.InsertReplay(ctx, changed) })
	otherExe := write(ctx, s, func(tx storage.Tx) error { return tx.InsertReplay(ctx, claim("exe_2", "r1", 3)) })
	r, err := s.GetReplay(ctx, "exe_1", "r1")
	if err != nil {
		return err
	}
	_, missing := s.GetReplay(ctx, "exe_1", "r2")
	_, missingExe := s.GetReplay(ctx, "exe_3", "r1")
	return first(
		wantErr(again, storage.ErrDuplicate, "a second claim of a recorded request"),
		want(otherExe == nil, "the same request id of another execution was refused: %v", otherExe),
		want(r.Execution == "exe_1" && r.RequestID == "r1" && r.Operation == "acme.echo" && r.InputHash == "hash-r1" && r.State == storage.ReplayClaimed &&
			len(r.Result) == 0 && r.ErrorCode == "" && !r.Withheld && r.CreatedAt.Equal(at(1)) && r.UpdatedAt.Equal(at(1)), "claimed record = %+v", r),
		wantErr(missing, storage.ErrNotFound, "a request never claimed"),
		wantErr(missingExe, storage.ErrNotFound, "the request of another execution"),
	)
}

func replayFinishOnce(ctx context.Context, s storage.Store) error {
	err := write(ctx, s, func(tx storage.Tx) error {
		if err := tx.InsertReplay(ctx, claim("exe_1", "r1", 1)); err != nil {
			return err
		}
		return tx.InsertReplay(ctx, claim("exe_1", "r2", 1))
	})
	if err != nil {
		return err
	}
	if err := write(ctx, s, func(tx storage.Tx) error {
		if err := tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Result: []byte(`{"n":1}`), UpdatedAt: at(5)}); err != nil {
			return err
		}
		return tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r2", ErrorCode: "invalid", ErrorMessage: "no such thing", UpdatedAt: at(6)})
	}); err != nil {
		return err
	}
	twice := write(ctx, s, func(tx storage.Tx) error {
		return tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Result: []byte(`{"n":2}`), UpdatedAt: at(7)})
	})
	unknown := write(ctx, s, func(tx storage.Tx) error {
		return tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r9", Result: []byte(`{}`), UpdatedAt: at(7)})
	})
	r1, err := s.GetReplay(ctx, "exe_1", "r1")
	if err != nil {
		return err
	}
	r2, err := s.GetReplay(ctx, "exe_1", "r2")
	if err != nil {
		return err
	}
	return first(
		wantErr(twice, storage.ErrFenced, "finishing a request that is done"),
		wantErr(unknown, storage.ErrFenced, "finishing a request never claimed"),
		want(r1.State == storage.ReplayDone && sameJSON(r1.Result, []byte(`{"n":1}`)) && r1.ErrorCode == "" && r1.Operation == "acme.echo" &&
			r1.InputHash == "hash-r1" && r1.CreatedAt.Equal(at(1)) && r1.UpdatedAt.Equal(at(5)), "done record = %+v (result %s)", r1, r1.Result),
		want(r2.State == storage.ReplayDone && len(r2.Result) == 0 && r2.ErrorCode == "invalid" && r2.ErrorMessage == "no such thing", "refused record = %+v", r2),
	)
}

// replayDeleteClaimedOnly: a claim whose handler never ran (a gate refused
// it) may be dropped, so a retry can claim again; a done record stays.
func replayDeleteClaimedOnly(ctx context.Context, s storage.Store) error {
	err := write(ctx, s, func(tx storage.Tx) error {
		if err := tx.InsertReplay(ctx, claim("exe_1", "r1", 1)); err != nil {
			return err
		}
		done := claim("exe_1", "r2", 1)
		done.State, done.Result = storage.ReplayDone, []byte(`{"ok":true}`)
		return tx.InsertReplay(ctx, done)
	})
	if err != nil {
		return err
	}
	if err := write(ctx, s, func(tx storage.Tx) error { return tx.DeleteReplay(ctx, "exe_1", "r1") }); err != nil {
		return err
	}
	_, gone := s.GetReplay(ctx, "exe_1", "r1")
	reclaim := write(ctx, s, func(tx storage.Tx) error { return tx.InsertReplay(ctx, claim("exe_1", "r1", 2)) })
	doneErr := write(ctx, s, func(tx storage.Tx) error { return tx.DeleteReplay(ctx, "exe_1", "r2") })
	missing := write(ctx, s, func(tx storage.Tx) error { return tx.DeleteReplay(ctx, "exe_1", "r9") })
	kept, err := s.GetReplay(ctx, "exe_1", "r2")
	return first(err,
		wantErr(gone, storage.ErrNotFound, "a deleted claim"),
		want(reclaim == nil, "claiming a deleted request again: %v", reclaim),
		wantErr(doneErr, storage.ErrFenced, "deleting a done record"),
		wantErr(missing, storage.ErrFenced, "deleting a request never claimed"),
		want(kept.State == storage.ReplayDone && sameJSON(kept.Result, []byte(`{"ok":true}`)), "the done record after a refused delete = %+v", kept),
	)
}

// replayWithheld: a sensitive operation's record is finished withheld: it
// reads back done and withheld, with its operation and input hash and no
// result; the store refuses a withheld record carrying a result or a
// refusal, and leaves the claim as it was.
func replayWithheld(ctx context.Context, s storage.Store) error {
	if err := write(ctx, s, func(tx storage.Tx) error { return tx.InsertReplay(ctx, claim("exe_1", "r1", 1)) }); err != nil {
		return err
	}
	refusals := map[string]*storage.Replay{
		"a withheld finish with a result":  {Execution: "exe_1", RequestID: "r1", Withheld: true, Result: []byte(`{"password":"p"}`), UpdatedAt: at(2)},
		"a withheld finish with a code":    {Execution: "exe_1", RequestID: "r1", Withheld: true, ErrorCode: "no", UpdatedAt: at(2)},
		"a withheld finish with a message": {Execution: "exe_1", RequestID: "r1", Withheld: true, ErrorMessage: "secret p", UpdatedAt: at(2)},
	}
	for what, r := range refusals {
		if err := wantSomeErr(write(ctx, s, func(tx storage.Tx) error { return tx.FinishReplay(ctx, r) }), what); err != nil {
			return err
		}
		if got, err := s.GetReplay(ctx, "exe_1", "r1"); err != nil || got.State != storage.ReplayClaimed || len(got.Result) != 0 || got.ErrorMessage != "" {
			return fmt.Errorf("after %s was refused the record is %+v, %v", what, got, err)
		}
	}
	if err := write(ctx, s, func(tx storage.Tx) error {
		return tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Withheld: true, UpdatedAt: at(3)})
	}); err != nil {
		return err
	}
	carrying := claim("exe_1", "r2", 4)
	carrying.State, carrying.Withheld, carrying.Result = storage.ReplayDone, true, []byte(`{"token":"t"}`)
	insertCarrying := write(ctx, s, func(tx storage.Tx) error { return tx.InsertReplay(ctx, carrying) })
	bare := claim("exe_1", "r3", 5)
	bare.State, bare.Withheld = storage.ReplayDone, true
	plainRec := claim("exe_1", "r4", 6)
	plainRec.State, plainRec.Result = storage.ReplayDone, []byte(`{"ok":true}`)
	if err := write(ctx, s, func(tx storage.Tx) error {
		if err := tx.InsertReplay(ctx, bare); err != nil {
			return err
		}
		return tx.InsertReplay(ctx, plainRec)
	}); err != nil {
		return err
	}
	r1, err := s.GetReplay(ctx, "exe_1", "r1")
	if err != nil {
		return err
	}
	_, r2 := s.GetReplay(ctx, "exe_1", "r2")
	r3, err := s.GetReplay(ctx, "exe_1", "r3")
	if err != nil {
		return err
	}
	r4, err := s.GetReplay(ctx, "exe_1", "r4")
	return first(err,
		want(r1.State == storage.ReplayDone && r1.Withheld && len(r1.Result) == 0 && r1.ErrorCode == "" && r1.ErrorMessage == "" &&
			r1.Operation == "acme.echo" && r1.InputHash == "hash-r1" && r1.UpdatedAt.Equal(at(3)), "withheld record = %+v (result %s)", r1, r1.Result),
		wantSomeErr(insertCarrying, "a withheld record inserted with a result"),
		wantErr(r2, storage.ErrNotFound, "the refused withheld record"),
		want(r3.Withheld && r3.State == storage.ReplayDone && len(r3.Result) == 0, "withheld record inserted done = %+v", r3),
		want(!r4.Withheld && sameJSON(r4.Result, []byte(`{"ok":true}`)), "plain record = %+v", r4),
	)
}

// replaySweep: records written at or before ReplaysBefore go once their
// execution finished; a live execution's records stay, and so do those of
// an execution the store does not know (it did not finish).
func replaySweep(ctx context.Context, s storage.Store) error {
	if _, err := SeedExecution(ctx, s, "wrk_done", "exe_done"); err != nil {
		return err
	}
	if _, err := SeedExecution(ctx, s, "wrk_live", "exe_live"); err != nil {
		return err
	}
	if err := finish(ctx, s, "exe_done", 1); err != nil {
		return err
	}
	if err := write(ctx, s, func(tx storage.Tx) error {
		for _, r := range []*storage.Replay{claim("exe_done", "r_old", 10), claim("exe_done", "r_new", 50), claim("exe_live", "r_live", 10), claim("exe_unknown", "r_unknown", 10)} {
			if err := tx.InsertReplay(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	sweep := func(cut int) (storage.SweepToolbeltResult, error) {
		var res storage.SweepToolbeltResult
		err := write(ctx, s, func(tx storage.Tx) error {
			var err error
			res, err = tx.SweepToolbelt(ctx, &storage.SweepToolbeltParams{ReplaysBefore: at(cut)})
			return err
		})
		return res, err
	}
	present := func() string {
		var out []string
		for _, k := range [][2]string{{"exe_done", "r_old"}, {"exe_done", "r_new"}, {"exe_live", "r_live"}, {"exe_unknown", "r_unknown"}} {
			if _, err := s.GetReplay(ctx, k[0], k[1]); err == nil {
				out = append(out, k[1])
			}
		}
		return fmt.Sprint(out)
	}
	res1, err := sweep(20)
	if err != nil {
		return err
	}
	after1 := present()
	res2, err := sweep(50)
	if err != nil {
		return err
	}
	after2 := present()
	return first(
		want(res1.Replays == 1 && after1 == "[r_new r_live r_unknown]", "sweep at 20s deleted %d, left %s; want 1 and [r_new r_live r_unknown]", res1.Replays, after1),
		want(res2.Replays == 1 && after2 == "[r_live r_unknown]", "sweep at 50s deleted %d, left %s; want 1 (written at the cut) and [r_live r_unknown]", res2.Replays, after2),
	)
}

func replaySurvivesReopen(ctx context.Context, env *Env) error {
	if err := write(ctx, env.Store, func(tx storage.Tx) error {
		if err := tx.InsertReplay(ctx, claim("exe_1", "r1", 1)); err != nil {
			return err
		}
		if err := tx.InsertReplay(ctx, claim("exe_1", "r2", 1)); err != nil {
			return err
		}
		if err := tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Result: []byte(`{"n":7}`), UpdatedAt: at(2)}); err != nil {
			return err
		}
		return tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r2", Withheld: true, UpdatedAt: at(2)})
	}); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	r1, err := env.Store.GetReplay(ctx, "exe_1", "r1")
	if err != nil {
		return fmt.Errorf("a done record after a reopen: %w", err)
	}
	r2, err := env.Store.GetReplay(ctx, "exe_1", "r2")
	if err != nil {
		return err
	}
	again := write(ctx, env.Store, func(tx storage.Tx) error { return tx.InsertReplay(ctx, claim("exe_1", "r1", 3)) })
	return first(
		want(r1.State == storage.ReplayDone && sameJSON(r1.Result, []byte(`{"n":7}`)), "done record after a reopen = %+v", r1),
		want(r2.Withheld && r2.State == storage.ReplayDone && len(r2.Result) == 0 && r2.InputHash == "hash-r2", "withheld record after a reopen = %+v", r2),
		wantErr(again, storage.ErrDuplicate, "claiming a request recorded before the reopen"),
	)
}
