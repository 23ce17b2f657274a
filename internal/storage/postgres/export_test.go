package postgres

// QueuedForTest is how many callers wait for their turn.
func (s *Store) QueuedForTest() int { return s.group.Queued() }
