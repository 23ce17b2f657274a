package storagetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/open-conduit/open-conduit/internal/storage"
)

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
	var stale error
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		_, early := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, ExpiredBy: at(29), Owner: "b", LeaseExpiresAt: at(90), Now: at(29)})
		if err := wantErr(early, storage.ErrFenced, "recovering a lease that has not expired"); err != nil {
			return err
		}
		if _, err := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, ExpiredBy: at(30), Owner: "b", LeaseExpiresAt: at(90), Now: at(30)}); err != nil {
			return fmt.Errorf("recovering a lease that expired at the cut: %w", err)
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
	var wrongOwner, parked, stopping error
	var renewedStopping storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		_, wrongOwner = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-b", ValidAt: at(20), LeaseExpiresAt: at(70)})
		p, st := storage.ExecutionParked, storage.ExecutionStopping
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, State: &p, Now: at(21)}); err != nil {
			return err
		}
		// A parked execution holds no lease to renew.
		_, parked = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(22), LeaseExpiresAt: at(70)})
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, State: &st, Now: at(23)}); err != nil {
			return err
		}
		_, stopping = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(24), LeaseExpiresAt: at(70)})
		renewedStopping, err = tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(24), LeaseExpiresAt: at(80),
			States: []storage.ExecutionState{st}})
		return err
	})
	if err != nil {
		return err
	}
	return first(
		want(renewed.LeaseExpiresAt.Equal(at(40)), "renewed lease expires %v, want %v", renewed.LeaseExpiresAt, at(40)),
		wantErr(expired, storage.ErrFenced, "renewing an expired lease"),
		wantErr(wrongEpoch, storage.ErrFenced, "renewing at another epoch"),
		wantErr(wrongOwner, storage.ErrFenced, "renewing another owner's lease"),
		wantErr(parked, storage.ErrFenced, "renewing a parked execution's lease"),
		wantErr(stopping, storage.ErrFenced, "renewing a stopping execution's lease without naming the state"),
		want(renewedStopping.LeaseExpiresAt.Equal(at(80)), "renewed stopping lease expires %v, want %v", renewedStopping.LeaseExpiresAt, at(80)),
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
	if err := first(err, want(live.ID == "exe_2", "live execution = %s, want exe_2", live.ID)); err != nil {
		return err
	}
	// A parked execution is live too: it still holds the Work.
	parked := storage.ExecutionParked
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_2", Epoch: 1, State: &parked, Now: at(2)})
		return err
	}); err != nil {
		return err
	}
	if err := wantErr(insert("exe_3"), storage.ErrDuplicate, "a new execution while one is parked"); err != nil {
		return err
	}
	live, err = s.GetLiveExecution(ctx, "wrk_1")
	if err := first(err, want(live.ID == "exe_2" && live.State == parked, "live execution = %+v, want parked exe_2", live)); err != nil {
		return err
	}
	if err := finish(ctx, s, "exe_2", 1); err != nil {
		return err
	}
	_, none := s.GetLiveExecution(ctx, "wrk_1")
	return wantErr(none, storage.ErrNotFound, "the live execution of a Work whose executions all finished")
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
	byWork, err5 := ids(&storage.ListExecutionsParams{Work: "wrk_1"})
	newest, err6 := ids(&storage.ListExecutionsParams{Scope: "s1", Page: storage.Page{Desc: true, Limit: 2}})
	after, err7 := ids(&storage.ListExecutionsParams{Page: storage.Page{After: &storage.Position{CreatedAt: at(0), ID: "exe_0"}}})
	parkedOnly, err8 := ids(&storage.ListExecutionsParams{States: []storage.ExecutionState{storage.ExecutionParked}})
	return first(err1, err2, err3, err4, err5, err6, err7, err8,
		want(byWork == "[exe_1]", "executions of wrk_1: %s", byWork),
		want(newest == "[exe_2 exe_1]", "the newest two: %s", newest),
		want(after == "[exe_1 exe_2]", "after exe_0: %s", after),
		want(parkedOnly == "[exe_2]", "parked: %s", parkedOnly),
		want(expired == "[exe_0 exe_1]", "running and expired by 20s: %s", expired),
		want(notA == "[exe_1]", "not owned by a: %s", notA),
		want(ownA == "[exe_0]", "running, owned by a: %s", ownA),
		want(n == 1, "leases held by a: %d, want 1 (a parked execution holds none)", n),
	)
}

func executionCases() []Case {
	return []Case{
		{Name: "execution_round_trip", Run: plain(executionRoundTrip), Control: exitCodeZeroWhenUnobserved},
		{Name: "execution_update_fenced", Run: plain(executionUpdateFenced), Control: epochBlindControl},
		{Name: "execution_advance_epoch_fenced", Run: plain(executionAdvanceEpochFenced), Control: advanceIgnoresExpiry},
		{Name: "execution_advance_epoch_resets", Run: plain(executionAdvanceEpochResets), Control: advanceKeepsExitCode},
		{Name: "execution_lease_renew_fenced", Run: plain(executionLeaseRenewFenced), Control: epochBlindControl},
		{Name: "execution_one_live_per_work", Run: plain(executionOneLivePerWork), Control: insertSupersedesLive},
		{Name: "execution_list_filters", Run: plain(executionListFilters), Control: countLeasedCountsParked},
		{Name: "execution_history_filters", Run: plain(executionHistoryFilters), Control: historyIgnoresBinding},
		{Name: "execution_fence_survives_reopen", Run: executionFenceSurvivesReopen, Control: forgetsEpochsOnReopen},
		{Name: "execution_launch_marker", Run: plain(executionLaunchMarker), Control: forgetsLaunch},
		{Name: "launches_marked_together", Run: plain(launchesMarkedTogether), Control: marksEveryLaunch},
		{Name: "executions_inserted_together", Run: plain(executionsInsertedTogether), Control: insertsOverLive},
		{Name: "executions_inserted_launched", Run: plain(executionsInsertedLaunched), Control: insertForgetsLaunch},
		{Name: "declaration_one_pending", Run: plain(declarationOnePending), Control: reappliesDeclarations},
		{Name: "declaration_lookup", Run: plain(declarationLookup), Control: pendingIncludesApplied},
		{Name: "execution_session_usage", Run: plain(executionSessionUsage), Control: usageReplaced},
		{Name: "execution_session_usage_survives_reopen", Run: executionSessionUsageSurvivesReopen, Control: forgetsSessionUsageOnReopen},
		{Name: "execution_node", Run: plain(executionNode), Control: nodeFilterIgnored},
		{Name: "call_guard_agrees_with_reads", Run: plain(callGuardAgreesWithReads), Control: guardGenerationIsFirst},
		{Name: "call_guard_sees_tx_writes", Run: plain(callGuardSeesTxWrites), Control: guardKeepsFirstRead},
		{Name: "call_guard_reads_the_work_key", Run: plain(callGuardReadsTheWorkKey), Control: guardMissesTheWorkKey},
		{Name: "call_guard_key_reads_see_tx_writes", Run: plain(callGuardKeyReadsSeeTxWrites), Control: txKeepsKeyAbsence},
		{Name: "updates_of_read_rows", Run: plain(updatesOfReadRows), Control: updateForgetsAttempts},
		{Name: "call_guards_read_ahead", Run: plain(callGuardsReadAhead), Control: guardsAheadKeptStale},
	}
}

func executionRoundTrip(ctx context.Context, s storage.Store) error {
	for _, w := range []string{"wrk_1", "wrk_2"} {
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
	}
	var e storage.Execution
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		e, err = tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: "exe_1", Work: "wrk_1", Scope: "s1", Binding: "b1", Executor: "shell",
			Generation: 7, Owner: "owner-a", LeaseExpiresAt: at(30), Deadline: at(600), InputWatermark: 2, CreatedAt: at(1)})
		return err
	})
	if err != nil {
		return err
	}
	if e.ID != "exe_1" || e.Work != "wrk_1" || e.Scope != "s1" || e.Binding != "b1" || e.Executor != "shell" || e.Generation != 7 || e.Epoch != 1 ||
		e.Owner != "owner-a" || !e.LeaseExpiresAt.Equal(at(30)) || !e.Deadline.Equal(at(600)) || e.State != storage.ExecutionRunning || !e.Live() ||
		e.InputWatermark != 2 || e.Result != storage.ResultNone || e.Message != "" || e.ExitCode != nil || !e.CreatedAt.Equal(at(1)) {
		return fmt.Errorf("inserted execution = %+v (exit code %v): want running at epoch 1 with no exit code", e, e.ExitCode)
	}
	if got, err := s.GetExecution(ctx, "exe_1"); err != nil || !same(got, e) {
		return fmt.Errorf("execution read back = %+v, %v; inserted %+v", got, err, e)
	}
	dup := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: "exe_1", Work: "wrk_2", Scope: "s1", Binding: "b1", Executor: "x", Owner: "o",
			LeaseExpiresAt: at(30), Deadline: at(60), CreatedAt: at(2)})
		return err
	})
	if err := wantErr(dup, storage.ErrDuplicate, "a second execution with the same id"); err != nil {
		return err
	}
	finished, failed, msg, code, lease := storage.ExecutionFinished, storage.ResultFailed, "exit status 3", 3, at(45)
	var ended, later storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		ended, err = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_1", Epoch: 1, Owner: "owner-a", FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			State: &finished, Result: &failed, Message: &msg, ExitCode: &code, LeaseExpiresAt: &lease, Now: at(5)})
		if err != nil {
			return err
		}
		// A nil field is left as it is: the exit code stays.
		later, err = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_1", Epoch: 1, Now: at(6)})
		return err
	})
	if err != nil {
		return err
	}
	_, missing := s.GetExecution(ctx, "exe_none")
	reread, err := s.GetExecution(ctx, "exe_1")
	return first(err,
		want(ended.State == finished && !ended.Live() && ended.Result == failed && ended.Message == msg && ended.ExitCode != nil && *ended.ExitCode == 3 &&
			ended.LeaseExpiresAt.Equal(at(45)) && ended.UpdatedAt.Equal(at(5)) && ended.Revision > e.Revision && ended.Epoch == 1 && ended.Generation == 7,
			"finished execution = %+v", ended),
		want(later.ExitCode != nil && *later.ExitCode == 3 && later.Message == msg && later.Result == failed, "an update without an exit code dropped it: %+v", later),
		want(same(reread, later), "execution read back = %+v, want %+v", reread, later),
		wantErr(missing, storage.ErrNotFound, "a missing execution"),
	)
}

// executionLaunchMarker: a new execution was never launched; Launched
// records the epoch it is written at, fenced like any update (a refused
// one leaves no mark), and a new epoch is not launched until it is
// marked in its turn.
func executionLaunchMarker(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if e.LaunchedEpoch != 0 || e.Launched() {
		return fmt.Errorf("a new execution reads launched at %d", e.LaunchedEpoch)
	}
	mark := func(epoch int64) (storage.Execution, error) {
		var out storage.Execution
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			out, err = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: epoch, Owner: e.Owner,
				FromStates: []storage.ExecutionState{storage.ExecutionRunning}, Launched: true, Now: at(2)})
			return err
		})
		return out, err
	}
	_, stale := mark(2)
	if err := wantErr(stale, storage.ErrFenced, "a launch marked at an epoch that is not the execution's"); err != nil {
		return err
	}
	if got, err := s.GetExecution(ctx, e.ID); err != nil || got.LaunchedEpoch != 0 {
		return fmt.Errorf("after a fenced launch mark the execution reads launched at %d (%v)", got.LaunchedEpoch, err)
	}
	marked, err := mark(1)
	if err != nil {
		return err
	}
	var next storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		next, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			Owner: "owner-b", LeaseExpiresAt: at(90), Now: at(3)})
		return err
	})
	if err != nil {
		return err
	}
	reread, err := s.GetExecution(ctx, e.ID)
	return first(err,
		want(marked.LaunchedEpoch == 1 && marked.Launched(), "a launch marked at epoch 1 reads %d", marked.LaunchedEpoch),
		want(next.LaunchedEpoch == 1 && !next.Launched(), "a new epoch reads launched at %d (launched %v), want 1 and not launched", next.LaunchedEpoch, next.Launched()),
		want(same(reread, next), "execution read back = %+v; advanced %+v", reread, next))
}

// executionsInsertedTogether: InsertExecutions inserts, in one call,
// each new execution as InsertExecution would, returns those, and inserts
// nothing for one refused (its Work has a live execution, its id is
// taken); the transaction reads what it inserted.
func executionsInsertedTogether(ctx context.Context, s storage.Store) error {
	for _, w := range []string{"wrk_1", "wrk_2", "wrk_3"} {
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
	}
	live, err := SeedExecution(ctx, s, "wrk_live", "exe_live")
	if err != nil {
		return err
	}
	mk := func(id, work string) storage.InsertExecutionParams {
		return storage.InsertExecutionParams{ID: id, Work: work, Scope: "s1", Binding: "b1", Executor: "x", Generation: 4, Owner: "owner-a", Node: "nod_a",
			LeaseExpiresAt: at(30), Deadline: at(600), InputWatermark: 2, CreatedAt: at(1)}
	}
	var got, none []storage.Execution
	var inTx storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		if none, err = tx.InsertExecutions(ctx, nil); err != nil {
			return err
		}
		got, err = tx.InsertExecutions(ctx, []storage.InsertExecutionParams{
			mk("exe_a", "wrk_1"), mk("exe_b", "wrk_2"), mk("exe_c", "wrk_live"), mk("exe_live", "wrk_3"),
		})
		if err != nil {
			return err
		}
		inTx, err = tx.GetExecution(ctx, "exe_a")
		return err
	})
	if err != nil {
		return err
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	errs := []error{
		want(len(none) == 0, "no executions inserted %v", none),
		want(slices.Equal(ids, []string{"exe_a", "exe_b"}), "inserted %v, want exe_a and exe_b", ids),
		want(inTx.ID == "exe_a" && inTx.Work == "wrk_1", "the inserting transaction reads exe_a as %+v", inTx),
	}
	for _, e := range got {
		back, err := s.GetExecution(ctx, e.ID)
		if err != nil {
			return err
		}
		errs = append(errs,
			want(e.Epoch == 1 && e.State == storage.ExecutionRunning && e.Owner == "owner-a" && e.Node == "nod_a" && e.Generation == 4 &&
				e.InputWatermark == 2 && e.LeaseExpiresAt.Equal(at(30)) && e.Deadline.Equal(at(600)) && e.CreatedAt.Equal(at(1)) && e.ExitCode == nil && !e.Launched(),
				"inserted %+v", e),
			want(same(back, e), "%s read back %+v; inserted %+v", e.ID, back, e))
	}
	refusedID, err := s.ListExecutions(ctx, &storage.ListExecutionsParams{Work: "wrk_3"})
	if err != nil {
		return err
	}
	refusedLive, err := s.ListExecutions(ctx, &storage.ListExecutionsParams{Work: "wrk_live"})
	if err != nil {
		return err
	}
	errs = append(errs,
		want(len(refusedID) == 0, "an execution refused for its taken id left %+v", refusedID),
		want(len(refusedLive) == 1 && same(refusedLive[0], live), "an execution refused for its Work's live one left %+v", refusedLive))
	return first(errs...)
}

// executionsInsertedLaunched: an execution inserted Launched (alone or
// with others) reads launched at its epoch 1, in its transaction and
// after it, beside one inserted without it, which reads never launched;
// its next epoch is not launched until marked in its turn.
func executionsInsertedLaunched(ctx context.Context, s storage.Store) error {
	for _, w := range []string{"wrk_1", "wrk_2", "wrk_3"} {
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
	}
	mk := func(id, work string, launched bool) storage.InsertExecutionParams {
		return storage.InsertExecutionParams{ID: id, Work: work, Scope: "s1", Binding: "b1", Executor: "x", Generation: 1, Owner: "owner-a",
			LeaseExpiresAt: at(30), Deadline: at(600), Launched: launched, CreatedAt: at(1)}
	}
	var alone, inTx storage.Execution
	var together []storage.Execution
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		one := mk("exe_1", "wrk_1", true)
		if alone, err = tx.InsertExecution(ctx, &one); err != nil {
			return err
		}
		if together, err = tx.InsertExecutions(ctx, []storage.InsertExecutionParams{mk("exe_2", "wrk_2", true), mk("exe_3", "wrk_3", false)}); err != nil {
			return err
		}
		inTx, err = tx.GetExecution(ctx, "exe_2")
		return err
	})
	if err != nil {
		return err
	}
	launched := map[string]bool{}
	for _, id := range []string{"exe_1", "exe_2", "exe_3"} {
		e, err := s.GetExecution(ctx, id)
		if err != nil {
			return err
		}
		launched[id] = e.Launched() && e.LaunchedEpoch == 1
	}
	var next storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		next, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: "exe_1", FromEpoch: 1, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			Owner: "owner-b", LeaseExpiresAt: at(90), Now: at(3)})
		return err
	})
	if err != nil {
		return err
	}
	return first(
		want(alone.Launched() && alone.LaunchedEpoch == 1, "an execution inserted launched reads launched at %d", alone.LaunchedEpoch),
		want(len(together) == 2, "inserted %d executions together, want 2", len(together)),
		want(inTx.Launched(), "the inserting transaction reads exe_2 launched at %d", inTx.LaunchedEpoch),
		want(launched["exe_1"] && launched["exe_2"] && !launched["exe_3"], "launched after commit: %v, want exe_1 and exe_2 only", launched),
		want(next.LaunchedEpoch == 1 && !next.Launched(), "the next epoch reads launched at %d (launched %v), want 1 and not launched", next.LaunchedEpoch, next.Launched()),
	)
}

// launchesMarkedTogether: MarkLaunched marks, in one call, each launch
// still at its epoch, held by the owner and running or stopping, and
// leaves every other one as it was (a stale epoch, another owner's
// execution, a finished one, an unknown id); the transaction reads its
// own marks, and nothing at all is asked of an empty set.
func launchesMarkedTogether(ctx context.Context, s storage.Store) error {
	ids := []string{"exe_run", "exe_stale", "exe_other", "exe_done", "exe_stop"}
	for i, id := range ids {
		if _, err := SeedExecution(ctx, s, fmt.Sprintf("wrk_%d", i+1), id); err != nil {
			return err
		}
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: "exe_other", FromEpoch: 1, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			Owner: "owner-b", LeaseExpiresAt: at(90), Now: at(1)}); err != nil {
			return err
		}
		fin, stop := storage.ExecutionFinished, storage.ExecutionStopping
		res := storage.ResultSucceeded
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_done", Epoch: 1, State: &fin, Result: &res, Now: at(1)}); err != nil {
			return err
		}
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_stop", Epoch: 1, State: &stop, Now: at(1)})
		return err
	})
	if err != nil {
		return err
	}
	before := map[string]storage.Execution{}
	for _, id := range ids {
		if before[id], err = s.GetExecution(ctx, id); err != nil {
			return err
		}
	}
	var marked, none []string
	var inTx storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		// Read first, so that a transaction that keeps what it read
		// must see its own marks over it.
		if _, err := tx.GetExecution(ctx, "exe_run"); err != nil {
			return err
		}
		var err error
		if none, err = tx.MarkLaunched(ctx, &storage.MarkLaunchedParams{Owner: "owner-a", Now: at(2)}); err != nil {
			return err
		}
		marked, err = tx.MarkLaunched(ctx, &storage.MarkLaunchedParams{Owner: "owner-a", Now: at(2), Launches: []storage.Launch{
			{Execution: "exe_run", Epoch: 1}, {Execution: "exe_stale", Epoch: 2}, {Execution: "exe_other", Epoch: 2},
			{Execution: "exe_done", Epoch: 1}, {Execution: "exe_stop", Epoch: 1}, {Execution: "exe_unknown", Epoch: 1},
		}})
		if err != nil {
			return err
		}
		inTx, err = tx.GetExecution(ctx, "exe_run")
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(marked)
	errs := []error{
		want(len(none) == 0, "an empty set of launches marked %v", none),
		want(slices.Equal(marked, []string{"exe_run", "exe_stop"}), "marked %v, want exe_run and exe_stop", marked),
		want(inTx.LaunchedEpoch == 1, "the marking transaction reads exe_run launched at %d, want 1", inTx.LaunchedEpoch),
	}
	for _, id := range ids {
		got, err := s.GetExecution(ctx, id)
		if err != nil {
			return err
		}
		was := before[id]
		if id == "exe_run" || id == "exe_stop" {
			errs = append(errs, want(got.LaunchedEpoch == 1 && got.Launched() && got.Revision == was.Revision+1 && got.UpdatedAt.Equal(at(2)) && got.State == was.State,
				"%s after its mark = %+v; before %+v", id, got, was))
			continue
		}
		errs = append(errs, want(same(got, was), "%s, not to be marked, reads %+v; before %+v", id, got, was))
	}
	return first(errs...)
}

// executionAdvanceEpochResets: a new epoch has a new owner and lease, no
// exit code (nobody observed its end), and the deadline and watermark only
// when given; an adopted stopping execution stays stopping.
func executionAdvanceEpochResets(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	parked, zero := storage.ExecutionParked, 0
	deadline, wm := at(900), int64(4)
	var claimed, kept, adopted storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		p, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, State: &parked, ExitCode: &zero, Now: at(2)})
		if err != nil {
			return err
		}
		if p.ExitCode == nil || *p.ExitCode != 0 {
			return fmt.Errorf("a parked segment's observed exit code 0 = %v", p.ExitCode)
		}
		claimed, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: []storage.ExecutionState{parked},
			State: storage.ExecutionRunning, Owner: "owner-b", LeaseExpiresAt: at(60), Deadline: &deadline, InputWatermark: &wm, Now: at(3)})
		if err != nil {
			return err
		}
		kept, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 2, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			Owner: "owner-c", LeaseExpiresAt: at(70), Now: at(4)})
		if err != nil {
			return err
		}
		stopping := storage.ExecutionStopping
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 3, Owner: "owner-c", State: &stopping, Now: at(5)}); err != nil {
			return err
		}
		adopted, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 3, FromStates: []storage.ExecutionState{stopping},
			State: stopping, Owner: "owner-d", LeaseExpiresAt: at(80), Now: at(6)})
		return err
	})
	if err != nil {
		return err
	}
	n, err := s.CountLeased(ctx, "owner-d")
	return first(err,
		want(claimed.Epoch == 2 && claimed.Owner == "owner-b" && claimed.State == storage.ExecutionRunning && claimed.ExitCode == nil &&
			claimed.LeaseExpiresAt.Equal(at(60)) && claimed.Deadline.Equal(deadline) && claimed.InputWatermark == 4 && claimed.UpdatedAt.Equal(at(3)),
			"claimed parked execution = %+v (exit code %v)", claimed, claimed.ExitCode),
		want(kept.Epoch == 3 && kept.Owner == "owner-c" && kept.Deadline.Equal(deadline) && kept.InputWatermark == 4 && kept.State == storage.ExecutionRunning,
			"an advance without a deadline or a watermark changed them: %+v", kept),
		want(adopted.Epoch == 4 && adopted.State == storage.ExecutionStopping && adopted.Owner == "owner-d", "adopted stopping execution = %+v", adopted),
		want(n == 1, "owner-d holds %d leases, want the adopted stopping one", n),
	)
}

// executionFenceSurvivesReopen: the epoch an execution reached persists,
// so a superseded attempt stays fenced across a restart.
func executionFenceSurvivesReopen(ctx context.Context, env *Env) error {
	s := env.Store
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	running := []storage.ExecutionState{storage.ExecutionRunning}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: running, ExpiredBy: at(30), Owner: "owner-b", LeaseExpiresAt: at(90), Now: at(31)})
		return err
	}); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	s = env.Store
	got, err := s.GetExecution(ctx, e.ID)
	if err != nil {
		return err
	}
	if got.Epoch != 2 || got.Owner != "owner-b" || !got.LeaseExpiresAt.Equal(at(90)) || got.State != storage.ExecutionRunning {
		return fmt.Errorf("execution after a reopen = %+v, want epoch 2 held by owner-b until 90s", got)
	}
	finished, failed := storage.ExecutionFinished, storage.ResultFailed
	stale := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, Owner: "owner-a", FromStates: running, State: &finished, Result: &failed, Now: at(32)})
		return err
	})
	if err := wantErr(stale, storage.ErrFenced, "an update by the epoch superseded before the reopen"); err != nil {
		return err
	}
	staleRenew := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(32), LeaseExpiresAt: at(200)})
		return err
	})
	if err := wantErr(staleRenew, storage.ErrFenced, "a renewal by the epoch superseded before the reopen"); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 2, Owner: "owner-b", ValidAt: at(32), LeaseExpiresAt: at(120)})
		return err
	})
}

func declarationLookup(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if _, err := s.GetPendingDeclaration(ctx, e.ID); !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("the pending declaration of an execution that declared nothing: %v", err)
	}
	payload := []byte(`{"result":"succeeded","message":"ok"}`)
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertDeclaration(ctx, &storage.Declaration{Execution: e.ID, Epoch: 1, Kind: storage.DeclaredOutcome, Payload: payload, DeclaredAt: at(3)})
	}); err != nil {
		return err
	}
	p, err := s.GetPendingDeclaration(ctx, e.ID)
	if err != nil {
		return err
	}
	if p.Execution != e.ID || p.Epoch != 1 || p.Kind != storage.DeclaredOutcome || !sameJSON(p.Payload, payload) || !p.DeclaredAt.Equal(at(3)) || !p.Pending() || p.Disposition != "" {
		return fmt.Errorf("pending declaration = %+v", p)
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.MarkDeclarationApplied(ctx, &storage.MarkDeclarationAppliedParams{Execution: e.ID, Epoch: 1, Disposition: "discarded", At: at(4)})
	}); err != nil {
		return err
	}
	_, pending := s.GetPendingDeclaration(ctx, e.ID)
	_, other := s.GetDeclaration(ctx, e.ID, 2)
	_, otherExe := s.GetDeclaration(ctx, "exe_none", 1)
	d, err := s.GetDeclaration(ctx, e.ID, 1)
	return first(err,
		wantErr(pending, storage.ErrNotFound, "the pending declaration once it was applied"),
		wantErr(other, storage.ErrNotFound, "the declaration of an epoch that declared nothing"),
		wantErr(otherExe, storage.ErrNotFound, "the declaration of a missing execution"),
		want(!d.Pending() && d.Disposition == "discarded" && d.AppliedAt.Equal(at(4)) && d.Kind == storage.DeclaredOutcome && sameJSON(d.Payload, payload),
			"applied declaration = %+v", d),
	)
}

// executionSessionUsage: an execution starts with no session and no usage;
// a session given replaces the recorded one and one not given keeps it;
// usage given is added to the totals (the first to none), usage not given
// keeps them; a fenced update changes neither, and a new epoch carries
// both (a resume continues the same session).
func executionSessionUsage(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if e.Session != "" || e.Usage != nil {
		return fmt.Errorf("a new execution has session %q and usage %+v, want none", e.Session, e.Usage)
	}
	u1 := &storage.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 3, CacheCreationTokens: 4, CostUSD: 0.25, Turns: 2}
	u2 := &storage.Usage{InputTokens: 5, OutputTokens: 6, CacheReadTokens: 7, CacheCreationTokens: 8, CostUSD: 0.5, Turns: 1}
	s1, s2 := "sess-1", "sess-2"
	update := func(epoch int64, session *string, usage *storage.Usage, now int) (storage.Execution, error) {
		var out storage.Execution
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			out, err = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: epoch, Session: session, AddUsage: usage, Now: at(now)})
			return err
		})
		return out, err
	}
	first1, err := update(1, &s1, u1, 2)
	if err != nil {
		return err
	}
	added, err := update(1, nil, u2, 3)
	if err != nil {
		return err
	}
	replaced, err := update(1, &s2, nil, 4)
	if err != nil {
		return err
	}
	_, stale := update(2, &s1, u1, 5)
	var next storage.Execution
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		next, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: e.ID, FromEpoch: 1, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			Owner: "owner-b", LeaseExpiresAt: at(90), Now: at(6)})
		return err
	})
	if err != nil {
		return err
	}
	sum := u1.Add(u2)
	reread, err := s.GetExecution(ctx, e.ID)
	return first(err,
		want(first1.Session == s1 && same(first1.Usage, u1), "the first usage and session: %q %+v, want %q %+v", first1.Session, first1.Usage, s1, u1),
		want(added.Session == s1 && same(added.Usage, sum), "usage added without a session: %q %+v, want %q %+v", added.Session, added.Usage, s1, sum),
		want(replaced.Session == s2 && same(replaced.Usage, sum), "a new session without usage: %q %+v, want %q %+v", replaced.Session, replaced.Usage, s2, sum),
		wantErr(stale, storage.ErrFenced, "a session and usage at an epoch that is not the execution's"),
		want(next.Epoch == 2 && next.Session == s2 && same(next.Usage, sum), "a new epoch: %q %+v, want %q %+v", next.Session, next.Usage, s2, sum),
		want(same(reread, next), "execution read back = %+v; advanced %+v", reread, next))
}

// executionSessionUsageSurvivesReopen: the session and the usage totals
// are in the database, not in memory.
func executionSessionUsageSurvivesReopen(ctx context.Context, env *Env) error {
	e, err := SeedExecution(ctx, env.Store, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	session, usage := "thread-9", &storage.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 56, CacheCreationTokens: 78, CostUSD: 0.125, Turns: 3}
	var before storage.Execution
	if err := env.Store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		before, err = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, Session: &session, AddUsage: usage, Now: at(2)})
		return err
	}); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	got, err := env.Store.GetExecution(ctx, e.ID)
	return first(err,
		want(got.Session == session && same(got.Usage, usage), "after a reopen: session %q usage %+v, want %q %+v", got.Session, got.Usage, session, usage),
		want(same(got, before), "execution after a reopen = %+v, want %+v", got, before))
}

// executionNode: an execution records the node its claimer named, an
// epoch advance naming a node moves it there and one naming none keeps
// it, and the list selects by node ("" for executions without one).
func executionNode(ctx context.Context, s storage.Store) error {
	if _, err := SeedExecution(ctx, s, "wrk_old", "exe_old"); err != nil {
		return err
	}
	running := []storage.ExecutionState{storage.ExecutionRunning}
	for i, n := range []string{"nod_a", "nod_b"} {
		w := fmt.Sprintf("wrk_%d", i)
		if _, err := SeedWork(ctx, s, w); err != nil {
			return err
		}
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: fmt.Sprintf("exe_%d", i), Work: w, Scope: "s1", Binding: "b1", Executor: "x",
				Generation: 1, Owner: "owner-" + n, Node: n, LeaseExpiresAt: at(30), Deadline: at(600), CreatedAt: at(i + 1)})
			return err
		})
		if err != nil {
			return err
		}
	}
	var kept, moved storage.Execution
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		if kept, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: "exe_0", FromEpoch: 1, FromStates: running, Owner: "owner-c", LeaseExpiresAt: at(90), Now: at(31)}); err != nil {
			return err
		}
		moved, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{ID: "exe_1", FromEpoch: 1, FromStates: running, Owner: "owner-c", Node: "nod_c", LeaseExpiresAt: at(90), Now: at(31)})
		return err
	})
	if err != nil {
		return err
	}
	old, err := s.GetExecution(ctx, "exe_old")
	if err != nil {
		return err
	}
	ids := func(e storage.Execution) string { return e.ID }
	onA, err := s.ListExecutions(ctx, &storage.ListExecutionsParams{Nodes: []string{"nod_a", ""}})
	if err != nil {
		return err
	}
	onC, err := s.ListExecutions(ctx, &storage.ListExecutionsParams{Nodes: []string{"nod_c"}, States: running})
	if err != nil {
		return err
	}
	all, err := s.ListExecutions(ctx, &storage.ListExecutionsParams{})
	return first(err,
		want(old.Node == "", "an execution inserted without a node has node %q", old.Node),
		want(kept.Node == "nod_a" && kept.Epoch == 2, "an advance naming no node: node %q epoch %d, want nod_a at 2", kept.Node, kept.Epoch),
		want(moved.Node == "nod_c" && moved.Epoch == 2, "an advance naming nod_c: node %q epoch %d, want nod_c at 2", moved.Node, moved.Epoch),
		want(list(onA, ids) == "[exe_old exe_0]", "executions of nod_a or none = %s, want [exe_old exe_0]", list(onA, ids)),
		want(list(onC, ids) == "[exe_1]", "executions of nod_c = %s, want [exe_1]", list(onC, ids)),
		want(len(all) == 3, "no node filter lists %d executions, want 3", len(all)),
	)
}

// guardByReads is what GetCallGuard must agree with: the four reads it
// stands for, made one by one in r.
func guardByReads(ctx context.Context, r storage.Reader, exeID string) (storage.CallGuard, error) {
	var g storage.CallGuard
	var err error
	if g.Execution, err = r.GetExecution(ctx, exeID); err != nil {
		return g, err
	}
	if g.Work, err = r.GetWork(ctx, g.Execution.Work); err != nil {
		return g, err
	}
	switch _, err := r.GetPendingDeclaration(ctx, exeID); {
	case err == nil:
		g.Declared = true
	case !errors.Is(err, storage.ErrNotFound):
		return g, err
	}
	switch latest, err := r.LatestGeneration(ctx); {
	case err == nil:
		g.LatestGeneration = latest.Number
	case !errors.Is(err, storage.ErrNotFound):
		return g, err
	}
	switch _, err := r.GetActiveWait(ctx, g.Work.ID); {
	case err == nil:
		g.ActiveWait = true
	case !errors.Is(err, storage.ErrNotFound):
		return g, err
	}
	toks, err := r.ListExecutionTokens(ctx, exeID)
	if err != nil {
		return g, err
	}
	for _, t := range toks {
		g.LiveTokens = g.LiveTokens || !t.Revoked()
	}
	switch owner, err := r.GetKeyOwner(ctx, g.Work.Scope, g.Work.ID); {
	case err == nil:
		g.KeyOwner = owner.ID
	case !errors.Is(err, storage.ErrNotFound):
		return g, err
	}
	waits, err := r.ListActiveWaitsByKey(ctx, g.Work.Scope, g.Work.ID)
	g.KeyWaits = len(waits) > 0
	return g, err
}

// checkKeyGuard reads the guard of exeID in r, holds it to the separate
// reads, and to the owner and the waits of its Work's key the case
// expects.
func checkKeyGuard(ctx context.Context, r storage.Reader, exeID, when, owner string, waits bool) error {
	g, err := guardAgrees(ctx, r, exeID, when)
	if err != nil {
		return err
	}
	return want(g.KeyOwner == owner && g.KeyWaits == waits, "the call guard %s says the Work's key is owned by %q with waits %v, want %q and %v", when, g.KeyOwner, g.KeyWaits, owner, waits)
}

// checkKeyGuardBoth is checkKeyGuard on the store's readers and inside a
// transaction.
func checkKeyGuardBoth(ctx context.Context, s storage.Store, exeID, when, owner string, waits bool) error {
	return inStoreAndTx(ctx, s, when, func(r storage.Reader, when string) error {
		return checkKeyGuard(ctx, r, exeID, when, owner, waits)
	})
}

// keyWait is a wait of workID that names key.
func keyWait(id, workID, key string, now int) *storage.InsertWaitParams {
	return &storage.InsertWaitParams{ID: id, Work: workID, Scope: "s1", Epoch: 1, Registration: "reg_" + id, Keys: []string{key}, CreatedAt: at(now)}
}

// callGuardReadsTheWorkKey: the call guard says who owns the key named by
// its Work's id and whether an active wait names it, as GetKeyOwner and
// ListActiveWaitsByKey do: the Work itself (a Work owns its id from its
// creation) and no wait, then another Work's wait naming it, then nobody
// and none once the Work released it and the wait ended, then another
// Work.
func callGuardReadsTheWorkKey(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if _, err := SeedWork(ctx, s, "wrk_2"); err != nil {
		return err
	}
	if err := checkKeyGuardBoth(ctx, s, e.ID, "of a new Work", e.Work, false); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWait(ctx, keyWait("wat_k", "wrk_2", e.Work, 1))
		return err
	}); err != nil {
		return err
	}
	if err := checkKeyGuardBoth(ctx, s, e.ID, "of a Work whose key a wait names", e.Work, true); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.ReleaseKeys(ctx, e.Work, at(2)); err != nil {
			return err
		}
		_, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_k", State: storage.WaitCancelled, Now: at(2)})
		return err
	}); err != nil {
		return err
	}
	if err := checkKeyGuardBoth(ctx, s, e.ID, "once the Work released its key and the wait ended", "", false); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: e.Work, Work: "wrk_2", At: at(3)})
	}); err != nil {
		return err
	}
	return checkKeyGuardBoth(ctx, s, e.ID, "once another Work took the released key", "wrk_2", false)
}

// callGuardKeyReadsSeeTxWrites: inside a transaction, what a call guard
// found of its Work's key (the Work owning it and no wait naming it, or
// nobody owning it) is not what the transaction reads after its own
// writes changed it: a wait inserted or ended, the keys released, the key
// acquired by another Work (and committed so).
func callGuardKeyReadsSeeTxWrites(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if _, err := SeedWork(ctx, s, "wrk_2"); err != nil {
		return err
	}
	owner := func(tx storage.Tx) (string, error) {
		w, err := tx.GetKeyOwner(ctx, "s1", e.Work)
		if errors.Is(err, storage.ErrNotFound) {
			return "", nil
		}
		return w.ID, err
	}
	waits := func(tx storage.Tx) (int, error) {
		ws, err := tx.ListActiveWaitsByKey(ctx, "s1", e.Work)
		return len(ws), err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		if err := checkKeyGuard(ctx, tx, e.ID, "of a new Work", e.Work, false); err != nil {
			return err
		}
		if _, err := tx.InsertWait(ctx, keyWait("wat_k", "wrk_2", e.Work, 1)); err != nil {
			return err
		}
		if n, err := waits(tx); err != nil || n != 1 {
			return fmt.Errorf("after a guard found no wait naming the key, one inserted: %d listed (%v), want 1", n, err)
		}
		if _, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_k", State: storage.WaitCancelled, Now: at(2)}); err != nil {
			return err
		}
		if n, err := waits(tx); err != nil || n != 0 {
			return fmt.Errorf("after the wait naming the key ended: %d listed (%v), want none", n, err)
		}
		if err := tx.ReleaseKeys(ctx, e.Work, at(2)); err != nil {
			return err
		}
		if got, err := owner(tx); err != nil || got != "" {
			return fmt.Errorf("after the Work released its keys the key is owned by %q (%v), want nobody", got, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		if err := checkKeyGuard(ctx, tx, e.ID, "after the release committed", "", false); err != nil {
			return err
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: e.Work, Work: "wrk_2", At: at(3)}); err != nil {
			return err
		}
		if got, err := owner(tx); err != nil || got != "wrk_2" {
			return fmt.Errorf("the key acquired after a guard found it unowned is owned by %q (%v), want wrk_2", got, err)
		}
		return nil
	}); err != nil {
		return err
	}
	return checkKeyGuard(ctx, s, e.ID, "after the transaction committed", "wrk_2", false)
}

// guardAgrees reads the guard of exeID in r and holds it to the separate
// reads it stands for.
func guardAgrees(ctx context.Context, r storage.Reader, exeID, when string) (storage.CallGuard, error) {
	g, err := r.GetCallGuard(ctx, exeID)
	if err != nil {
		return g, fmt.Errorf("the call guard %s: %w", when, err)
	}
	byReads, err := guardByReads(ctx, r, exeID)
	if err != nil {
		return g, fmt.Errorf("the separate reads %s: %w", when, err)
	}
	return g, want(reflect.DeepEqual(g, byReads), "the call guard %s = %+v; the separate reads say %+v", when, g, byReads)
}

// checkGuard reads the guard of exeID in r and holds it to the separate
// reads and to what the case expects of it.
func checkGuard(ctx context.Context, r storage.Reader, exeID, when string, declared bool, generation int64, work storage.WorkState) error {
	g, err := guardAgrees(ctx, r, exeID, when)
	if err != nil {
		return err
	}
	return first(
		want(g.Execution.ID == exeID && g.Work.ID == g.Execution.Work, "the call guard %s read execution %s of Work %s", when, g.Execution.ID, g.Work.ID),
		want(g.Declared == declared, "the call guard %s says declared %v, want %v", when, g.Declared, declared),
		want(g.LatestGeneration == generation, "the call guard %s says latest generation %d, want %d", when, g.LatestGeneration, generation),
		want(g.Work.State == work, "the call guard %s read the Work %s, want %s", when, g.Work.State, work),
	)
}

// inStoreAndTx runs check on the store's readers and inside a
// transaction.
func inStoreAndTx(ctx context.Context, s storage.Store, when string, check func(r storage.Reader, when string) error) error {
	if err := check(s, when); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx storage.Tx) error { return check(tx, when+" (in a transaction)") })
}

// checkGuardBoth is checkGuard on the store's readers and inside a
// transaction.
func checkGuardBoth(ctx context.Context, s storage.Store, exeID, when string, declared bool, generation int64, work storage.WorkState) error {
	return inStoreAndTx(ctx, s, when, func(r storage.Reader, when string) error {
		return checkGuard(ctx, r, exeID, when, declared, generation, work)
	})
}

func updateWork(ctx context.Context, s storage.Store, workID string, state storage.WorkState, now int) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: workID, State: &state, Now: at(now)})
		return err
	})
}

// callGuardAgreesWithReads: GetCallGuard answers what GetExecution,
// GetWork, GetPendingDeclaration and LatestGeneration answer one by one,
// as the execution runs, declares, has its declaration applied, as
// generations commit and as its Work finishes; and ErrNotFound for an
// execution that does not exist.
func callGuardAgreesWithReads(ctx context.Context, s storage.Store) error {
	_, missing := s.GetCallGuard(ctx, "exe_none")
	var missingInTx error
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, missingInTx = tx.GetCallGuard(ctx, "exe_none")
		return nil
	}); err != nil {
		return err
	}
	if err := first(wantErr(missing, storage.ErrNotFound, "the call guard of a missing execution"),
		wantErr(missingInTx, storage.ErrNotFound, "the call guard of a missing execution in a transaction")); err != nil {
		return err
	}
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	// Another execution and a declaration of it, which exe_1's guard
	// must not see.
	other, err := SeedExecution(ctx, s, "wrk_2", "exe_2")
	if err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertDeclaration(ctx, &storage.Declaration{Execution: other.ID, Epoch: 1, Kind: storage.DeclaredWait, Payload: []byte(`{"types":["a.b"]}`), DeclaredAt: at(1)})
	}); err != nil {
		return err
	}
	if err := updateWork(ctx, s, e.Work, storage.WorkRunning, 2); err != nil {
		return err
	}
	if err := checkGuardBoth(ctx, s, e.ID, "of a running execution", false, 0, storage.WorkRunning); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertDeclaration(ctx, &storage.Declaration{Execution: e.ID, Epoch: 1, Kind: storage.DeclaredOutcome, Payload: []byte(`{"outcome":"succeeded"}`), DeclaredAt: at(3)})
	}); err != nil {
		return err
	}
	if err := checkGuardBoth(ctx, s, e.ID, "after a declaration", true, 0, storage.WorkRunning); err != nil {
		return err
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.MarkDeclarationApplied(ctx, &storage.MarkDeclarationAppliedParams{Execution: e.ID, Epoch: 1, Disposition: "applied", At: at(4)})
	}); err != nil {
		return err
	}
	if err := checkGuardBoth(ctx, s, e.ID, "once the declaration was applied", false, 0, storage.WorkRunning); err != nil {
		return err
	}
	for n := int64(1); n <= 2; n++ {
		if err := insertGeneration(ctx, s, generation(n)); err != nil {
			return err
		}
		if err := checkGuardBoth(ctx, s, e.ID, fmt.Sprintf("after generation %d", n), false, n, storage.WorkRunning); err != nil {
			return err
		}
	}
	// A wait of its Work and a token of its execution, then neither.
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_1", Work: e.Work, Scope: "s1", Execution: e.ID, Epoch: 1,
			Registration: "reg_1", Types: []string{"a.b"}, CreatedAt: at(5)}); err != nil {
			return err
		}
		return tx.InsertToken(ctx, token("tok_1", e.ID, 1))
	}); err != nil {
		return err
	}
	if err := checkGuardBoth(ctx, s, e.ID, "with a wait and a token", false, 2, storage.WorkRunning); err != nil {
		return err
	}
	if g, err := s.GetCallGuard(ctx, e.ID); err != nil || !g.ActiveWait || !g.LiveTokens {
		return fmt.Errorf("the call guard with a wait and a token says active wait %v, live tokens %v (%v), want both", g.ActiveWait, g.LiveTokens, err)
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_1", State: storage.WaitCancelled, Now: at(6)}); err != nil {
			return err
		}
		_, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{ID: "tok_1", At: at(6)})
		return err
	}); err != nil {
		return err
	}
	if err := checkGuardBoth(ctx, s, e.ID, "once the wait ended and the token was revoked", false, 2, storage.WorkRunning); err != nil {
		return err
	}
	if err := updateWork(ctx, s, e.Work, storage.WorkSucceeded, 7); err != nil {
		return err
	}
	if err := finish(ctx, s, e.ID, 1); err != nil {
		return err
	}
	return checkGuardBoth(ctx, s, e.ID, "once the Work and the execution finished", false, 2, storage.WorkSucceeded)
}

// callGuardSeesTxWrites: inside a transaction, GetCallGuard sees the
// transaction's own writes of the execution, its Work, its declaration
// and the generations, read before it or not, and so do the reads after
// it.
func callGuardSeesTxWrites(ctx context.Context, s storage.Store) error {
	e, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	if err := updateWork(ctx, s, e.Work, storage.WorkRunning, 2); err != nil {
		return err
	}
	return s.WithTx(ctx, func(tx storage.Tx) error {
		before, err := tx.GetCallGuard(ctx, e.ID)
		if err != nil {
			return err
		}
		// What the guard found absent, written after it: the
		// transaction's reads and revocations see it.
		if before.ActiveWait || before.LiveTokens {
			return fmt.Errorf("a new execution's guard says active wait %v, live tokens %v", before.ActiveWait, before.LiveTokens)
		}
		if _, err := tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_1", Work: e.Work, Scope: "s1", Execution: e.ID, Epoch: 1,
			Registration: "reg_1", Types: []string{"a.b"}, CreatedAt: at(2)}); err != nil {
			return err
		}
		if _, err := tx.GetActiveWait(ctx, e.Work); err != nil {
			return fmt.Errorf("a wait inserted after the call guard read none: %w", err)
		}
		if _, err := tx.GetCallGuard(ctx, e.ID); err != nil {
			return err
		}
		if err := tx.InsertToken(ctx, token("tok_1", e.ID, 1)); err != nil {
			return err
		}
		if n, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: e.ID, At: at(2)}); err != nil || n != 1 {
			return fmt.Errorf("revoking the tokens of the execution after its guard read none revoked %d (%v), want the one inserted since", n, err)
		}
		if _, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: "wat_1", State: storage.WaitCancelled, Now: at(2)}); err != nil {
			return err
		}
		renewed, err := tx.RenewLease(ctx, &storage.RenewLeaseParams{ID: e.ID, Epoch: 1, Owner: "owner-a", ValidAt: at(3), LeaseExpiresAt: at(60)})
		if err != nil {
			return err
		}
		if err := checkGuard(ctx, tx, e.ID, "after a renewal in its transaction", false, 0, storage.WorkRunning); err != nil {
			return err
		}
		g, err := tx.GetCallGuard(ctx, e.ID)
		if err != nil {
			return err
		}
		if err := first(
			want(!before.Execution.LeaseExpiresAt.Equal(renewed.LeaseExpiresAt), "the renewal changed nothing: %+v", renewed),
			want(reflect.DeepEqual(g.Execution, renewed), "the call guard after a renewal in its transaction read %+v, want the renewed row %+v", g.Execution, renewed),
		); err != nil {
			return err
		}
		stopping := storage.ExecutionStopping
		stopped, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, Owner: "owner-a", State: &stopping, Now: at(4)})
		if err != nil {
			return err
		}
		waiting := storage.WorkWaiting
		w, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: e.Work, State: &waiting, Now: at(4)})
		if err != nil {
			return err
		}
		if err := tx.InsertDeclaration(ctx, &storage.Declaration{Execution: e.ID, Epoch: 1, Kind: storage.DeclaredWait, Payload: []byte(`{"types":["a.b"]}`), DeclaredAt: at(4)}); err != nil {
			return err
		}
		if err := tx.InsertGeneration(ctx, generation(1)); err != nil {
			return err
		}
		if err := checkGuard(ctx, tx, e.ID, "after writes in its transaction", true, 1, waiting); err != nil {
			return err
		}
		g, err = tx.GetCallGuard(ctx, e.ID)
		if err != nil {
			return err
		}
		exe, err := tx.GetExecution(ctx, e.ID)
		if err != nil {
			return err
		}
		return first(
			want(reflect.DeepEqual(g.Execution, stopped) && reflect.DeepEqual(exe, stopped), "after an update in its transaction the call guard read %+v and GetExecution %+v, want %+v", g.Execution, exe, stopped),
			want(reflect.DeepEqual(g.Work, w), "after an update in its transaction the call guard read the Work %+v, want %+v", g.Work, w),
		)
	})
}

// callGuardsReadAhead: guards read ahead (Tx.ReadCallGuardsAhead) answer
// as GetCallGuard would have without it: unchanged where the
// transaction's writes since touched other rows, and with those writes
// where they touched the guard's own execution, Work or key, or a table
// every guard reads.
func callGuardsReadAhead(ctx context.Context, s storage.Store) error {
	names := []string{"a", "b", "c", "d", "e", "f", "g"}
	before := map[string]storage.CallGuard{}
	var ids []string
	for _, n := range names {
		if _, err := SeedExecution(ctx, s, "wrk_"+n, "exe_"+n); err != nil {
			return err
		}
		g, err := s.GetCallGuard(ctx, "exe_"+n)
		if err != nil {
			return err
		}
		before[n] = g
		ids = append(ids, "exe_"+n)
	}
	ids = append(ids, "exe_none")
	if before["e"].KeyOwner != "wrk_e" || before["f"].Declared || before["f"].LatestGeneration != 0 {
		return fmt.Errorf("seeded guards of e, f = %+v, %+v", before["e"], before["f"])
	}
	unchanged := func(tx storage.Tx, n, after string) error {
		g, err := tx.GetCallGuard(ctx, "exe_"+n)
		if err != nil {
			return err
		}
		return want(reflect.DeepEqual(g, before[n]), "the guard of exe_%s %s = %+v; want it as before the transaction, %+v", n, after, g, before[n])
	}
	finished, succeeded, held, lease := storage.ExecutionFinished, storage.WorkSucceeded, "held by ann", at(90)
	return s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.ReadCallGuardsAhead(ctx, ids); err != nil {
			return err
		}
		if err := unchanged(tx, "a", "first"); err != nil {
			return err
		}
		// A completion of a: its execution, its Work, its keys.
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_a", Epoch: 1, Owner: "owner-a", State: &finished, Now: at(2)}); err != nil {
			return err
		}
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_a", State: &succeeded, Now: at(2)}); err != nil {
			return err
		}
		if err := tx.ReleaseKeys(ctx, "wrk_a", at(2)); err != nil {
			return err
		}
		if err := unchanged(tx, "b", "after another execution's completion"); err != nil {
			return err
		}
		// c's execution, d's Work and e's keys change, each read first,
		// as a completion reads what it writes.
		if _, err := tx.GetExecution(ctx, "exe_c"); err != nil {
			return err
		}
		renewed, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_c", Epoch: 1, Owner: "owner-a", LeaseExpiresAt: &lease, Now: at(3)})
		if err != nil {
			return err
		}
		if _, err := tx.GetWork(ctx, "wrk_d"); err != nil {
			return err
		}
		heldWork, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_d", BlockedReason: &held, Now: at(3)})
		if err != nil {
			return err
		}
		if err := tx.ReleaseKeys(ctx, "wrk_e", at(3)); err != nil {
			return err
		}
		gc, err := tx.GetCallGuard(ctx, "exe_c")
		if err != nil {
			return err
		}
		gd, err := tx.GetCallGuard(ctx, "exe_d")
		if err != nil {
			return err
		}
		ge, err := tx.GetCallGuard(ctx, "exe_e")
		if err != nil {
			return err
		}
		if err := first(
			want(reflect.DeepEqual(gc.Execution, renewed), "the guard of exe_c after its renewal read %+v; want %+v", gc.Execution, renewed),
			want(reflect.DeepEqual(gd.Work, heldWork), "the guard of exe_d after its Work's hold read %+v; want %+v", gd.Work, heldWork),
			want(ge.KeyOwner == "", "the guard of exe_e after its Work's keys were released says %q owns its key", ge.KeyOwner),
		); err != nil {
			return err
		}
		// A declaration and a generation: what every guard reads.
		if err := tx.InsertDeclaration(ctx, &storage.Declaration{Execution: "exe_f", Epoch: 1, Kind: storage.DeclaredWait, Payload: []byte(`{"types":["a.b"]}`), DeclaredAt: at(4)}); err != nil {
			return err
		}
		if err := tx.InsertGeneration(ctx, generation(1)); err != nil {
			return err
		}
		gf, err := tx.GetCallGuard(ctx, "exe_f")
		if err != nil {
			return err
		}
		gg, err := tx.GetCallGuard(ctx, "exe_g")
		if err != nil {
			return err
		}
		_, none := tx.GetCallGuard(ctx, "exe_none")
		return first(
			want(gf.Declared && gf.LatestGeneration == 1, "the guard of exe_f after its declaration and a generation says declared %v, generation %d", gf.Declared, gf.LatestGeneration),
			want(gg.LatestGeneration == 1 && reflect.DeepEqual(gg.Execution, before["g"].Execution) && reflect.DeepEqual(gg.Work, before["g"].Work),
				"the guard of exe_g after a generation = %+v", gg),
			wantErr(none, storage.ErrNotFound, "the guard of an execution that does not exist, read ahead"),
		)
	})
}
