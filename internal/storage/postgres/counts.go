package postgres

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// WorkCount is how many Work rows share a state and a hold's reason.
type WorkCount struct {
	State         storage.WorkState
	BlockedReason string
	Count         int
}

// TallyWork counts every Work by state and hold's reason ("" when not
// held), in one grouped read: the daemon's Work gauges, computed at a
// scrape. It is the PostgreSQL store's own, not part of storage.Store.
func (s *Store) TallyWork(ctx context.Context) ([]WorkCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, blocked_reason, COUNT(*) FROM work GROUP BY state, blocked_reason ORDER BY state, blocked_reason`)
	return collect(rows, err, func(r scanner) (WorkCount, error) {
		var c WorkCount
		if err := r.Scan(&c.State, &c.BlockedReason, &c.Count); err != nil {
			return c, fmt.Errorf("postgres: tally work: %s", engineMessage(err))
		}
		return c, nil
	})
}

// ExecutionCount is how many executions share a state and a result.
type ExecutionCount struct {
	State  storage.ExecutionState
	Result storage.ExecutionResult
	Count  int
}

// TallyExecutions counts every execution (attempt) by state and result
// ("" until it finishes), in one grouped read: the daemon's attempt
// counters, computed at a scrape. It is the PostgreSQL store's own, not
// part of storage.Store.
func (s *Store) TallyExecutions(ctx context.Context) ([]ExecutionCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, result, COUNT(*) FROM executions GROUP BY state, result ORDER BY state, result`)
	return collect(rows, err, func(r scanner) (ExecutionCount, error) {
		var c ExecutionCount
		if err := r.Scan(&c.State, &c.Result, &c.Count); err != nil {
			return c, fmt.Errorf("postgres: tally executions: %s", engineMessage(err))
		}
		return c, nil
	})
}
