package postgres

import "context"

// QueuedForTest is how many callers wait for their turn.
func (s *Store) QueuedForTest() int { return s.group.Queued() }

// ExecOutsideBatchForTest runs sql on the pool, outside any batch: a
// write no batch of any daemon makes.
func (s *Store) ExecOutsideBatchForTest(ctx context.Context, sql string, args ...any) error {
	_, err := s.pool.Exec(ctx, sql, args...)
	return err
}
