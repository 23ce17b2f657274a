package sqlite

import (
	"context"
	"database/sql"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// RawForTest opens the file with the driver alone, without migrations, so a
// test can shape what a later release would have written.
func RawForTest(path string) (*sql.DB, error) { return sql.Open(driverName, path) }

// TestMigration is a migration a test supplies instead of the embedded
// ones.
type TestMigration struct {
	Version int
	Name    string
	SQL     string
}

// ApplyMigrationsForTest applies ms to db as Open applies the embedded
// migrations.
func ApplyMigrationsForTest(ctx context.Context, db *sql.DB, ms []TestMigration) error {
	var list []migration
	for _, m := range ms {
		list = append(list, newMigration(m.Version, m.Name, m.SQL))
	}
	return applyMigrations(ctx, db, clock.System{}, list)
}

// BatchesForTest is how many batches the store has committed (its
// writer's fsyncs).
func (s *Store) BatchesForTest() int64 { return s.batches.Load() }

// QueuedForTest is how many callers wait for their turn.
func (s *Store) QueuedForTest() int {
	return s.group.Queued()
}

// ExecForTest runs a statement of the test's own in the caller's
// savepoint.
func ExecForTest(ctx context.Context, t storage.Tx, query string) error {
	_, err := t.(*tx).q.ExecContext(ctx, query)
	return err
}

// CallGuardQueryForTest is GetCallGuard's statement.
var CallGuardQueryForTest = callGuardQuery

// MarkLaunchedQueryForTest is MarkLaunched's statement for n launches.
func MarkLaunchedQueryForTest(n int) string { return markLaunchedQuery(n) }

// ClaimWorkQueryForTest is ClaimWork's statement for n Work.
func ClaimWorkQueryForTest(n int) string { return claimWorkQuery(n) }
