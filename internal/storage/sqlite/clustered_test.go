package sqlite_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// clustered are the tables migration 0120 stores by their key, with the
// indexes each must have again after its rebuild.
var clustered = map[string][]string{
	"work":                {"work_created", "work_claimable", "work_scope", "work_parent"},
	"work_inputs":         nil,
	"executions":          {"executions_created", "executions_work", "executions_leased", "executions_owner", "executions_live"},
	"idempotency_records": {"idempotency_records_created"},
	"toolbelt_calls":      {"toolbelt_calls_created", "toolbelt_calls_execution"},
}

// Migration 0120 rebuilds the text-keyed tables WITHOUT ROWID: the rows an
// earlier release wrote, and the rows that reference them, are all there
// after it on the real file, every index is back, and foreign keys are
// enforced again once it has run.
func TestMigrationClustersTextKeyedTables(t *testing.T) {
	ctx := context.Background()
	path, db := earlierRelease(t, 120)
	for _, q := range []string{
		`PRAGMA foreign_keys = ON`,
		`INSERT INTO events (seq, id, type, source, scope, data, root, depth, accepted_at)
			VALUES (1, 'evt_1', 'core.work.created', 'manual', 's1', '{}', 'evt_1', 0, 1)`,
		`INSERT INTO work (id, scope, binding, state, created_event, outcome_data, grants, input_count, created_at, updated_at, wait_reason)
			VALUES ('wrk_1', 's1', 'b1', 'succeeded', 'evt_1', '{"n":1}', '["emit"]', 1, 10, 20, '')`,
		`INSERT INTO work (id, scope, binding, state, parent, created_at, updated_at) VALUES ('wrk_2', 's1', 'b1', 'ready', 'wrk_1', 11, 11)`,
		`INSERT INTO work_inputs (work, position, event, queued_at) VALUES ('wrk_1', 1, 'evt_1', 10)`,
		`INSERT INTO work_keys (scope, key, work, acquired_at) VALUES ('s1', 'pr/1', 'wrk_2', 11)`,
		`INSERT INTO executions (id, work, scope, binding, executor, generation, epoch, owner, lease_expires_at, deadline, state,
			input_watermark, result, message, created_at, updated_at, exit_code, launched_epoch, session,
			usage_input_tokens, usage_output_tokens, usage_cache_read_tokens, usage_cache_creation_tokens, usage_cost_usd, usage_turns, node)
			VALUES ('exe_1', 'wrk_1', 's1', 'b1', 'shell', 1, 2, 'd', 30, 40, 'finished', 1, 'succeeded', 'done', 12, 19, 0, 2, 'sess', 5, 6, 0, 0, 0.5, 3, 'n1')`,
		`INSERT INTO declarations (execution, epoch, kind, payload, declared_at, applied_at) VALUES ('exe_1', 2, 'outcome', '{}', 13, 14)`,
		`INSERT INTO idempotency_records (principal, key, method, path, body_hash, status, body, created_at)
			VALUES ('owner', 'k1', 'POST', '/v1/work', 'h', 201, X'7B7D', 14)`,
		`INSERT INTO toolbelt_calls (id, kind, operation, execution, epoch, token_id, result, created_at, refusal)
			VALUES ('tbc_1', 'toolbelt.called', 'emit', 'exe_1', 2, 'tok_1', 'ok', 15, '')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.GetWork(ctx, "wrk_1")
	if err != nil || w.State != storage.WorkSucceeded || string(w.OutcomeData) != `{"n":1}` || len(w.Grants) != 1 || w.InputCount != 1 || !w.UpdatedAt.Equal(time.Unix(0, 20)) {
		s.Close()
		t.Fatalf("wrk_1 after 0120 = %+v (%v)", w, err)
	}
	if w, err := s.GetWork(ctx, "wrk_2"); err != nil || w.Parent != "wrk_1" {
		s.Close()
		t.Fatalf("wrk_2 after 0120 = %+v (%v), want the child of wrk_1", w, err)
	}
	e, err := s.GetExecution(ctx, "exe_1")
	if err != nil || e.Epoch != 2 || e.LaunchedEpoch != 2 || e.Session != "sess" || e.Node != "n1" || e.ExitCode == nil || *e.ExitCode != 0 || e.Usage == nil || e.Usage.Turns != 3 || e.Usage.OutputTokens != 6 || e.Usage.CostUSD != 0.5 {
		s.Close()
		t.Fatalf("exe_1 after 0120 = %+v (%v)", e, err)
	}
	if ins, err := s.ListInputs(ctx, &storage.ListInputsParams{Work: "wrk_1", Limit: 10}); err != nil || len(ins) != 1 || ins[0].Event != "evt_1" {
		s.Close()
		t.Fatalf("inputs of wrk_1 after 0120 = %+v (%v)", ins, err)
	}
	if r, err := s.GetIdempotency(ctx, "owner", "k1"); err != nil || r.Status != 201 || string(r.Body) != "{}" {
		s.Close()
		t.Fatalf("the idempotency record after 0120 = %+v (%v)", r, err)
	}
	// Foreign keys hold again: an execution of a Work that does not exist
	// is refused.
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertExecutions(ctx, []storage.InsertExecutionParams{{
			ID: "exe_orphan", Work: "wrk_missing", Scope: "s1", Binding: "b1", Executor: "shell", Generation: 1, Owner: "d",
			LeaseExpiresAt: time.Unix(50, 0), Deadline: time.Unix(60, 0), CreatedAt: time.Unix(40, 0),
		}})
		return err
	})
	if err == nil {
		s.Close()
		t.Fatal("an execution of a missing Work was inserted after 0120: foreign keys are off")
	}
	s.Close()

	// Reopened: the schema is the clustered one, with its indexes, and
	// nothing references a missing row.
	s, err = sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v < 120 {
		s.Close()
		t.Fatalf("schema version %d (%v), want at least 120", v, err)
	}
	s.Close()
	raw, err := sqlite.RawForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for table, indexes := range clustered {
		var ddl string
		if err := raw.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&ddl); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
		if !strings.HasSuffix(strings.TrimSpace(ddl), "WITHOUT ROWID") {
			t.Errorf("table %s is not clustered: %s", table, ddl)
		}
		for _, ix := range indexes {
			var on string
			if err := raw.QueryRowContext(ctx, `SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?`, ix).Scan(&on); err != nil || on != table {
				t.Errorf("index %s is on %q (%v), want %s", ix, on, err, table)
			}
		}
	}
	if n := dangling(t, raw); n != 0 {
		t.Errorf("%d rows reference missing rows after 0120", n)
	}
	var calls int
	if err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM toolbelt_calls WHERE id = 'tbc_1' AND execution = 'exe_1'`).Scan(&calls); err != nil || calls != 1 {
		t.Errorf("toolbelt call rows after 0120: %d (%v), want 1", calls, err)
	}
}

// A migration that runs with foreign keys off is refused, and changes
// nothing, when it would leave a row referencing one that is gone; rows a
// damaged file already had are not its doing and do not stop it.
func TestMigrationWithoutForeignKeysRefusesDanglingRows(t *testing.T) {
	ctx := context.Background()
	_, db := earlierRelease(t, 0)
	// One connection, so that the pragmas below are the migrations' too.
	db.SetMaxOpenConns(1)
	ms := embedded(t, 0)
	for _, q := range []string{
		`PRAGMA foreign_keys = ON`,
		`INSERT INTO work (id, scope, binding, state, created_at, updated_at) VALUES ('wrk_1', 's1', 'b1', 'ready', 1, 1)`,
		`INSERT INTO executions (id, work, scope, binding, executor, generation, epoch, owner, lease_expires_at, deadline, state,
			input_watermark, created_at, updated_at) VALUES ('exe_1', 'wrk_1', 's1', 'b1', 'shell', 1, 1, 'd', 0, 0, 'running', 0, 1, 1)`,
		// Already dangling before any migration below: written with
		// foreign keys off, as only a damaged file would have it.
		`PRAGMA foreign_keys = OFF`,
		`INSERT INTO work_keys (scope, key, work, acquired_at) VALUES ('s1', 'k', 'wrk_gone', 1)`,
		`PRAGMA foreign_keys = ON`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := dangling(t, db)

	bad := append(ms, sqlite.TestMigration{Version: 9001, Name: "drop_work", SQL: "-- foreign_keys: off\nDELETE FROM work;"})
	if err := sqlite.ApplyMigrationsForTest(ctx, db, bad); err == nil || !strings.Contains(err.Error(), "9001") {
		t.Fatalf("a migration leaving an execution without its Work: %v, want it refused", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM work) + (SELECT COUNT(*) FROM schema_migrations WHERE version = 9001)`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("after the refused migration: %d Work and records (%v), want the Work alone", n, err)
	}
	if got := dangling(t, db); got != before {
		t.Fatalf("dangling rows %d, were %d", got, before)
	}
	var fk int
	if err := db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
		t.Fatalf("foreign_keys after the migration = %d (%v), want the connection back with them on", fk, err)
	}

	fine := append(ms, sqlite.TestMigration{Version: 9002, Name: "rebind", SQL: "-- foreign_keys: off\nUPDATE work SET binding = 'b2';"})
	if err := sqlite.ApplyMigrationsForTest(ctx, db, fine); err != nil {
		t.Fatalf("a harmless migration on a file with a dangling row already: %v", err)
	}
}

// dangling counts the rows that reference a missing row.
func dangling(t *testing.T, db *sql.DB) int {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `PRAGMA foreign_key_check`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
