package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// TestQueryPlans asks SQLite how it runs the queries that matter as the
// store writes them (bound values as parameters: a partial index is only
// used when the query's own text implies its condition) and holds each to
// the index it must search, so that a filter never quietly turns into a
// scan of every event. It also checks that the indexes migration 0100
// dropped are gone and its events_type is there.
func TestQueryPlans(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open(t, path)
	db, err := sqlite.RawForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	const cols = `seq, id, type, source, scope, work, execution, correlation_key, data, parent, root, depth, actor, delivery_id, accepted_at`
	for _, c := range []struct{ what, query, uses string }{
		{"events by type (GET /v1/events?type=)", `SELECT ` + cols + ` FROM events WHERE type = ? ORDER BY seq LIMIT 101`, "INDEX events_type (type=?)"},
		{"events by type, next page", `SELECT ` + cols + ` FROM events WHERE type = ? AND seq > ? ORDER BY seq LIMIT 101`, "INDEX events_type (type=? AND seq>?)"},
		{"events by type, newest first", `SELECT ` + cols + ` FROM events WHERE type = ? AND seq < ? ORDER BY seq DESC LIMIT 101`, "INDEX events_type (type=? AND seq<?)"},
		{"events by scope", `SELECT ` + cols + ` FROM events WHERE scope = ? ORDER BY seq LIMIT 101`, "INDEX events_scope (scope=?)"},
		{"events by work", `SELECT ` + cols + ` FROM events WHERE work = ? AND work <> '' ORDER BY seq LIMIT 101`, "INDEX events_work (work=?)"},
		{"a Work's recent events (read_context)", `SELECT ` + cols + ` FROM events WHERE scope = ? AND work = ? AND work <> '' ORDER BY seq DESC LIMIT 10`, "INDEX events_work (work=?)"},
		{"events by correlation key in a scope", `SELECT ` + cols + ` FROM events WHERE scope = ? AND correlation_key = ? AND correlation_key <> '' ORDER BY seq LIMIT 101`, "INDEX events_key (scope=? AND correlation_key=?)"},
		{"events of a causal tree", `SELECT ` + cols + ` FROM events WHERE root = ? ORDER BY seq LIMIT 101`, "INDEX events_root (root=?)"},
		{"the delivery check of every acceptance", `SELECT 1 FROM events WHERE source = ? AND delivery_id = ? AND delivery_id <> ''`, "INDEX events_delivery (source=? AND delivery_id=?)"},
		{"the next sequence number", `SELECT COALESCE(MAX(seq), 0) + 1 FROM events`, "SEARCH events"},
		{"an active credential by name", `SELECT id FROM operator_credentials WHERE name = ? AND revoked_at = 0`, "INDEX operator_credentials_active (name=?)"},
		{"the leases held by an owner", `SELECT COUNT(*) FROM executions WHERE owner = ? AND state IN ('running', 'stopping')`, "INDEX executions_owner (owner=? AND state=?)"},
		{"a toolbelt call's guard (its pending declaration)", sqlite.CallGuardQueryForTest, "INDEX declarations_pending (execution=?)"},
		{"a toolbelt call's guard (its Work's active wait)", sqlite.CallGuardQueryForTest, "INDEX waits_active (work=?)"},
		{"a toolbelt call's guard (its tokens)", sqlite.CallGuardQueryForTest, "INDEX toolbelt_tokens_execution (execution=?)"},
		{"the launch marks of a round", sqlite.MarkLaunchedQueryForTest(3), "MULTI-INDEX OR"},
		{"the claims of a round", sqlite.ClaimWorkQueryForTest(3), "MULTI-INDEX OR"},
	} {
		var plan []string
		args := make([]any, strings.Count(c.query, "?"))
		for i := range args {
			args[i] = "x"
		}
		rows, err := db.QueryContext(ctx, `EXPLAIN QUERY PLAN `+c.query, args...)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, c.uses) || strings.Contains(got, "SCAN events") {
			t.Errorf("%s: plan %q, want it to use %s", c.what, got, c.uses)
		}
	}
	for name, want := range map[string]bool{"events_type": true, "operator_credentials_name": false, "toolbelt_tokens_retention": false} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name = ?`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if (n == 1) != want {
			t.Errorf("index %s exists: %v, want %v", name, n == 1, want)
		}
	}
}
