package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// TestMigrationBelowTheHighestIsApplied: the migration numbers leave gaps
// (0001, 0020, 0030), so a later release may add one numbered below the
// highest a database already has. It must be applied (once, in order with
// the others), not skipped because a higher number is recorded.
func TestMigrationBelowTheHighestIsApplied(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.RawForTest(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	first := []sqlite.TestMigration{
		{Version: 1, Name: "a", SQL: `CREATE TABLE a (x INTEGER)`},
		{Version: 30, Name: "c", SQL: `CREATE TABLE c (x INTEGER)`},
	}
	if err := sqlite.ApplyMigrationsForTest(ctx, db, first); err != nil {
		t.Fatal(err)
	}
	later := []sqlite.TestMigration{first[0], {Version: 20, Name: "b", SQL: `CREATE TABLE b (x INTEGER)`}, first[1]}
	for range 2 { // the second run applies nothing again
		if err := sqlite.ApplyMigrationsForTest(ctx, db, later); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'b'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatal("migration 20, numbered below the recorded 30, was skipped")
	}
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if !slices.Equal(got, []int{1, 20, 30}) {
		t.Fatalf("recorded versions = %v, want [1 20 30]", got)
	}

	// A recorded version this release does not know, even below its
	// highest, means a newer (or other) release wrote the file.
	if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (25, 'other', 0)`); err != nil {
		t.Fatal(err)
	}
	if err := sqlite.ApplyMigrationsForTest(ctx, db, later); err == nil || !strings.Contains(err.Error(), "newer release") {
		t.Fatalf("a database recording an unknown version 25: %v", err)
	}
}
