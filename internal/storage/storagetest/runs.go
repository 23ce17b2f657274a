package storagetest

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// executionHistoryFilters holds the filters the run history lists
// executions by: binding, result and creation time, newest first.
func executionHistoryFilters(ctx context.Context, s storage.Store) error {
	type row struct {
		id, work, binding string
		result            storage.ExecutionResult
	}
	rows := []row{
		{"exe_0", "wrk_0", "b1", storage.ResultSucceeded},
		{"exe_1", "wrk_1", "b2", storage.ResultFailed},
		{"exe_2", "wrk_2", "b1", storage.ResultCancelled},
		{"exe_3", "wrk_3", "b1", storage.ResultNone},
	}
	finished := storage.ExecutionFinished
	for i, r := range rows {
		if _, err := SeedWork(ctx, s, r.work); err != nil {
			return err
		}
		if err := s.WithTx(ctx, func(tx storage.Tx) error {
			if _, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: r.id, Work: r.work, Scope: "s1", Binding: r.binding, Executor: "x",
				Owner: "a", LeaseExpiresAt: at(100), Deadline: at(600), CreatedAt: at(10 * i)}); err != nil {
				return err
			}
			if r.result == storage.ResultNone {
				return nil
			}
			result := r.result
			_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: r.id, Epoch: 1, State: &finished, Result: &result, Now: at(10*i + 5)})
			return err
		}); err != nil {
			return err
		}
	}
	ids := func(p *storage.ListExecutionsParams) (string, error) {
		p.Desc = true
		es, err := s.ListExecutions(ctx, p)
		var out []string
		for _, e := range es {
			out = append(out, e.ID)
		}
		return fmt.Sprint(out), err
	}
	b1, err1 := ids(&storage.ListExecutionsParams{Binding: "b1"})
	ended, err2 := ids(&storage.ListExecutionsParams{Results: []storage.ExecutionResult{storage.ResultFailed, storage.ResultCancelled}})
	since, err3 := ids(&storage.ListExecutionsParams{CreatedFrom: at(10)})
	all, err4 := ids(&storage.ListExecutionsParams{Binding: "b1", CreatedFrom: at(5), Results: []storage.ExecutionResult{storage.ResultCancelled}})
	none, err5 := ids(&storage.ListExecutionsParams{Binding: "b3"})
	return first(err1, err2, err3, err4, err5,
		want(b1 == "[exe_3 exe_2 exe_0]", "binding b1, newest first: %s", b1),
		want(ended == "[exe_2 exe_1]", "failed or cancelled: %s", ended),
		want(since == "[exe_3 exe_2 exe_1]", "created at or after 10s: %s", since),
		want(all == "[exe_2]", "b1, cancelled, since 5s: %s", all),
		want(none == "[]", "binding b3 (none): %s", none),
	)
}
