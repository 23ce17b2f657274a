package storagetest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// updatesOfReadRows: an update of a Work or execution its transaction
// has read (as a completion reads both through the call guard, and an
// engine that keeps rows may answer the update from what it read)
// returns the row the store then holds, field for field; an update
// builds on the one before it in the same transaction; and a fence that
// does not hold on the row read is refused and changes nothing.
func updatesOfReadRows(ctx context.Context, s storage.Store) error {
	seeded, err := SeedExecution(ctx, s, "wrk_1", "exe_1")
	if err != nil {
		return err
	}
	running, waiting, succeeded := storage.WorkRunning, storage.WorkWaiting, storage.WorkSucceeded
	stopping, finished, ok := storage.ExecutionStopping, storage.ExecutionFinished, storage.ResultSucceeded
	str := func(v string) *string { return &v }
	raw := func(v string) *json.RawMessage { m := json.RawMessage(v); return &m }
	one, zero, lease := int64(1), 0, at(40)
	var refused []error
	var rows []any // what each update returned, in order
	var read storage.CallGuard
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		if read, err = tx.GetCallGuard(ctx, seeded.ID); err != nil {
			return err
		}
		w, e := read.Work, read.Execution
		for _, p := range []*storage.UpdateWorkParams{
			{ID: w.ID, Revision: w.Revision + 1, State: &running, Now: at(2)},
			{ID: w.ID, FromStates: []storage.WorkState{waiting}, State: &running, Now: at(2)},
		} {
			_, err := tx.UpdateWork(ctx, p)
			refused = append(refused, err)
		}
		for _, p := range []*storage.UpdateExecutionParams{
			{ID: e.ID, Epoch: e.Epoch + 1, State: &stopping, Now: at(2)},
			{ID: e.ID, Epoch: e.Epoch, Owner: "owner-b", State: &stopping, Now: at(2)},
			{ID: e.ID, Epoch: e.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionParked}, State: &stopping, Now: at(2)},
		} {
			_, err := tx.UpdateExecution(ctx, p)
			refused = append(refused, err)
		}
		steps := []func() (any, error){
			func() (any, error) {
				return tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: e.Epoch, Owner: "owner-a", FromStates: []storage.ExecutionState{storage.ExecutionRunning},
					Message: str("half way"), LeaseExpiresAt: &lease, Launched: true, Session: str("sess-1"), Now: at(3)})
			},
			func() (any, error) {
				return tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: e.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
					State: &finished, Result: &ok, Message: str("done"), ExitCode: &zero, Now: at(4)})
			},
			func() (any, error) {
				return tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{storage.WorkReady}, Revision: w.Revision,
					State: &running, AddAttempts: 1, InputWatermark: &one, Binding: str("b2"), BlockedReason: str(""), Now: at(3)})
			},
			func() (any, error) {
				return tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, Revision: w.Revision + 1, FromStates: []storage.WorkState{running},
					State: &succeeded, OutcomeMessage: str("fine"), OutcomeData: raw(`{"n":1}`), WaitReason: str(""), BlockedDetail: str("d"), Now: at(4)})
			},
			func() (any, error) {
				return tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, OutcomeData: raw(""), Now: at(5)})
			},
		}
		for i, step := range steps {
			row, err := step()
			if err != nil {
				return fmt.Errorf("update %d of the rows read: %w", i+1, err)
			}
			rows = append(rows, row)
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs := make([]error, 0, 12)
	for i, err := range refused {
		errs = append(errs, wantErr(err, storage.ErrFenced, fmt.Sprintf("refused update %d of a row read", i+1)))
	}
	e1, e2 := rows[0].(storage.Execution), rows[1].(storage.Execution)
	w1, w2, w3 := rows[2].(storage.Work), rows[3].(storage.Work), rows[4].(storage.Work)
	gotW, err := s.GetWork(ctx, "wrk_1")
	if err != nil {
		return err
	}
	gotE, err := s.GetExecution(ctx, "exe_1")
	if err != nil {
		return err
	}
	was := read.Execution
	return first(append(errs,
		want(e1.Revision == was.Revision+1 && e1.LaunchedEpoch == was.Epoch && e1.Session == "sess-1" && e1.Message == "half way" &&
			e1.LeaseExpiresAt.Equal(lease) && e1.State == storage.ExecutionRunning && e1.UpdatedAt.Equal(at(3)),
			"the first update of the execution read returned %+v; read %+v", e1, was),
		want(e2.Revision == was.Revision+2 && e2.State == finished && e2.Result == ok && e2.ExitCode != nil && *e2.ExitCode == 0 && e2.Session == "sess-1",
			"the second update of the execution returned %+v", e2),
		want(w1.Revision == read.Work.Revision+1 && w1.Attempts == read.Work.Attempts+1 && w1.InputWatermark == 1 && w1.Binding == "b2" && w1.State == running,
			"the first update of the Work read returned %+v; read %+v", w1, read.Work),
		want(w2.State == succeeded && w2.OutcomeMessage == "fine" && string(w2.OutcomeData) == `{"n":1}` && w2.BlockedDetail == "d" && w2.Attempts == w1.Attempts,
			"the second update of the Work returned %+v", w2),
		want(w3.OutcomeData == nil && w3.Revision == read.Work.Revision+3 && w3.UpdatedAt.Equal(at(5)), "the update clearing the outcome data returned %+v", w3),
		want(same(gotE, e2), "the execution reads %+v after the transaction; its last update returned %+v", gotE, e2),
		want(same(gotW, w3), "the Work reads %+v after the transaction; its last update returned %+v", gotW, w3),
	)...)
}
