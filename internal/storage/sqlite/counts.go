package sqlite

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
// held), in one grouped read on a reader connection: the daemon's Work
// gauges, computed at a scrape. The work_claimable index covers both
// columns, so it scans the index, never the rows. It is SQLite's own,
// not part of storage.Store.
func (s *Store) TallyWork(ctx context.Context) ([]WorkCount, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT state, blocked_reason, COUNT(*) FROM work GROUP BY state, blocked_reason ORDER BY state, blocked_reason`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: tally work: %w", err)
	}
	defer rows.Close()
	var out []WorkCount
	for rows.Next() {
		var c WorkCount
		if err := rows.Scan(&c.State, &c.BlockedReason, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlite: tally work: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: tally work: %w", err)
	}
	return out, nil
}

// ExecutionCount is how many executions share a state and a result.
type ExecutionCount struct {
	State  storage.ExecutionState
	Result storage.ExecutionResult
	Count  int
}

// TallyExecutions counts every execution (attempt) by state and result
// ("" until it finishes), in one grouped read on a reader connection:
// the daemon's attempt counters, computed at a scrape. Executions are
// never deleted, so the counts only grow. It is SQLite's own, not part of
// storage.Store.
func (s *Store) TallyExecutions(ctx context.Context) ([]ExecutionCount, error) {
	rows, err := s.readers.QueryContext(ctx, `SELECT state, result, COUNT(*) FROM executions GROUP BY state, result ORDER BY state, result`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: tally executions: %w", err)
	}
	defer rows.Close()
	var out []ExecutionCount
	for rows.Next() {
		var c ExecutionCount
		if err := rows.Scan(&c.State, &c.Result, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlite: tally executions: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: tally executions: %w", err)
	}
	return out, nil
}
