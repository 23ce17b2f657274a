package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// earlierRelease is a new state file as a release before migration below
// left it (every embedded migration when below is 0), open on the driver
// alone: its path and the connection, closed when the test ends.
func earlierRelease(t *testing.T, below int) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sqlite.RawForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := sqlite.ApplyMigrationsForTest(context.Background(), db, embedded(t, below)); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// embedded reads the migration files numbered below below (all of them
// when below is 0) as Open would apply them.
func embedded(t *testing.T, below int) []sqlite.TestMigration {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var out []sqlite.TestMigration
	for _, p := range names {
		base := filepath.Base(p)
		v, err := strconv.Atoi(base[:4])
		if err != nil {
			t.Fatal(err)
		}
		if below > 0 && v >= below {
			continue
		}
		body, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sqlite.TestMigration{Version: v, Name: strings.TrimSuffix(base[5:], ".sql"), SQL: string(body)})
	}
	return out
}

// Migration 0050 makes an execution's exit code nullable. Of the rows an
// earlier release wrote, where 0 also stood for "never observed", it keeps
// only the codes that can have come from an observation.
func TestMigrationKeepsOnlyObservedExitCodes(t *testing.T) {
	ctx := context.Background()
	path, db := earlierRelease(t, 50)
	rows := []struct {
		id, state, result string
		code              int
	}{
		{"exe_ok", "finished", "succeeded", 0},
		{"exe_three", "finished", "failed", 3},
		{"exe_killed", "finished", "cancelled", -1},
		{"exe_stopped", "finished", "cancelled", 0},
		{"exe_lost", "finished", "lost", 0},
		{"exe_unstarted", "finished", "failed", 0},
		{"exe_parked", "parked", "", 0},
		{"exe_running", "running", "", 0},
	}
	for i, r := range rows {
		if _, err := db.ExecContext(ctx, `INSERT INTO executions (id, work, scope, binding, executor, generation, epoch, owner,
			lease_expires_at, deadline, state, input_watermark, result, message, exit_code, created_at, updated_at)
			VALUES (?, 'wrk_'||?, 's1', 'b1', 'shell', 1, 1, 'd', 0, 0, ?, 0, ?, '', ?, ?, ?)`,
			r.id, i, r.state, r.result, r.code, i, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := sqlite.ApplyMigrationsForTest(ctx, db, embedded(t, 0)); err != nil {
		t.Fatal(err)
	}
	want := map[string]sql.NullInt64{
		"exe_ok": {Int64: 0, Valid: true}, "exe_three": {Int64: 3, Valid: true}, "exe_killed": {Int64: -1, Valid: true},
		"exe_parked":  {Int64: 0, Valid: true},
		"exe_stopped": {}, "exe_lost": {}, "exe_unstarted": {}, "exe_running": {},
	}
	for id, w := range want {
		var got sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT exit_code FROM executions WHERE id = ?`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s: exit code %+v after the migration, want %+v", id, got, w)
		}
	}
	db.Close()

	// The store reads NULL as no exit code.
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if e, err := s.GetExecution(ctx, "exe_lost"); err != nil || e.ExitCode != nil {
		t.Fatalf("exe_lost = %+v, %v", e, err)
	}
	if e, err := s.GetExecution(ctx, "exe_three"); err != nil || e.ExitCode == nil || *e.ExitCode != 3 {
		t.Fatalf("exe_three = %+v, %v", e, err)
	}
}
