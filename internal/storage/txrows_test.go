package storage

import (
	"context"
	"strings"
	"testing"
)

func TestTxRowsForgetsAtWrites(t *testing.T) {
	type kept struct{ work, execs bool }
	for query, want := range map[string]kept{
		"SELECT 1 FROM work WHERE id = ?":                                                                   {true, true},
		"\n\t\tselect seq FROM events":                                                                      {true, true},
		"SELECT input_count FROM work WHERE id = ? FOR UPDATE":                                              {false, true},
		"SELECT w.id FROM work w WHERE x = ? FOR UPDATE OF w SKIP LOCKED":                                   {false, true},
		"SELECT last FROM event_counter WHERE id = 1 FOR UPDATE":                                            {true, true},
		"UPDATE work SET state = ? WHERE id = ?":                                                            {false, true},
		"UPDATE executions SET state = ? WHERE id = ?":                                                      {true, false},
		"update work_keys SET released_at = ? WHERE work = ?":                                               {true, true},
		"INSERT INTO events (seq) VALUES (?)":                                                               {true, true},
		"INSERT INTO work (id) VALUES (?) ON CONFLICT DO NOTHING RETURNING id":                              {false, true},
		"INSERT OR IGNORE INTO executions (id) VALUES (?)":                                                  {true, false},
		"INSERT INTO idempotency_records (k) VALUES (?) ON CONFLICT (k) DO UPDATE SET k = excluded.k":       {true, true},
		"WITH moved AS (UPDATE event_counter SET last = ?) INSERT INTO events (seq) SELECT last FROM moved": {true, true},
		"WITH c AS (UPDATE work SET input_count = ? WHERE id = ?) SELECT 1":                                 {false, true},
		"DELETE FROM executions WHERE id = ?":                                                               {true, false},
		"DELETE FROM work_keys WHERE work = ?":                                                              {true, true},
		"SELECT e.id FROM executions e JOIN work w ON w.id = e.work FOR SHARE":                              {false, false},
		"SELECT e.id, w.id, EXISTS (SELECT 1 FROM declarations d WHERE d.execution = e.id AND d.applied_at IS NULL), " +
			"COALESCE((SELECT MAX(number) FROM config_generations), 0) FROM executions e JOIN work w ON w.id = e.work WHERE e.id = ?": {true, true},
		"SAVEPOINT member":    {false, false},
		"PRAGMA foreign_keys": {false, false},
		"":                    {false, false},
	} {
		var c TxRows
		c.KeepWork(Work{ID: "wrk_1", Grants: []string{"a"}})
		c.KeepExecution(Execution{ID: "exe_1"})
		c.KeepEvent(Event{ID: "evt_1"})
		c.Statement(query)
		_, work := c.Work("wrk_1")
		_, execs := c.Execution("exe_1")
		_, ev := c.Event("evt_1")
		if work != want.work || execs != want.execs || !ev {
			t.Errorf("after %q: work kept %v, execution kept %v, event kept %v; want %v, %v, true", query, work, execs, ev, want.work, want.execs)
		}
	}
}

func TestTxRowsReturnsCopies(t *testing.T) {
	var c TxRows
	c.KeepWork(Work{ID: "wrk_1", Grants: []string{"a"}})
	w, _ := c.Work("wrk_1")
	w.Grants[0] = "changed"
	again, _ := c.Work("wrk_1")
	if again.Grants[0] != "a" {
		t.Fatalf("a caller's change to a returned Work reached the kept row: %v", again.Grants)
	}
}

// A transaction's GetCallGuard always runs its statement (kept rows do
// not say whether a declaration is pending), answers what it read, and
// keeps the execution and Work it read for the reads after it.
func TestTxRowsReadCallGuardKeepsItsRows(t *testing.T) {
	var c TxRows
	c.KeepExecution(Execution{ID: "exe_1", Work: "wrk_1", Revision: 1})
	reads := 0
	read := func(context.Context, string) (CallGuard, error) {
		reads++
		return CallGuard{Execution: Execution{ID: "exe_1", Work: "wrk_1", Revision: 2}, Work: Work{ID: "wrk_1", Revision: 3}, Declared: true, LatestGeneration: 4}, nil
	}
	g, err := c.ReadCallGuard(context.Background(), "exe_1", read)
	if err != nil {
		t.Fatal(err)
	}
	e, keptExe := c.Execution("exe_1")
	w, keptWork := c.Work("wrk_1")
	switch {
	case reads != 1:
		t.Fatalf("the guard's statement ran %d times, want once although the execution was kept", reads)
	case g.Execution.Revision != 2 || g.Work.Revision != 3 || !g.Declared || g.LatestGeneration != 4:
		t.Fatalf("the guard = %+v, want what its statement read", g)
	case !keptExe || e.Revision != 2:
		t.Fatalf("the kept execution = %+v (kept %v), want the guard's", e, keptExe)
	case !keptWork || w.Revision != 3:
		t.Fatalf("the kept Work = %+v (kept %v), want the guard's", w, keptWork)
	}
}

// WrittenWork hands out only a row the transaction wrote itself, and
// forgets it where the kept rows are forgotten.
func TestTxRowsWrittenWork(t *testing.T) {
	var c TxRows
	c.KeepWork(Work{ID: "wrk_read"})
	c.KeepWrittenWork(Work{ID: "wrk_written", InputCount: 3})
	if _, ok := c.WrittenWork("wrk_read"); ok {
		t.Fatal("a row the transaction only read is handed out as written")
	}
	if w, ok := c.WrittenWork("wrk_written"); !ok || w.InputCount != 3 {
		t.Fatalf("WrittenWork = %+v, %v; want the written row", w, ok)
	}
	c.Statement("SELECT 1 FROM executions WHERE id = ?")
	if _, ok := c.WrittenWork("wrk_written"); !ok {
		t.Fatal("a plain read forgot the written row")
	}
	c.Statement("UPDATE work SET state = ? WHERE id = ?")
	if _, ok := c.WrittenWork("wrk_written"); ok {
		t.Fatal("a write to the work table left the written row handed out")
	}
	c.KeepWork(Work{ID: "wrk_written"})
	if _, ok := c.WrittenWork("wrk_written"); ok {
		t.Fatal("a row read again after a write is handed out as written")
	}
}

// What a guard read found absent (no active wait, no token to revoke) is
// known until a statement may change the waits or the tokens.
func TestTxRowsKnowsWhatTheGuardFoundAbsent(t *testing.T) {
	guard := func(wait, tokens bool) func(context.Context, string) (CallGuard, error) {
		return func(context.Context, string) (CallGuard, error) {
			return CallGuard{Execution: Execution{ID: "exe_1", Work: "wrk_1"}, Work: Work{ID: "wrk_1"}, ActiveWait: wait, LiveTokens: tokens}, nil
		}
	}
	for query, want := range map[string][2]bool{
		"UPDATE executions SET state = ? WHERE id = ?":                  {true, true},
		"UPDATE work_keys SET released_at = ? WHERE work = ?":           {true, true},
		"INSERT INTO waits (id) VALUES (?)":                             {false, true},
		"DELETE FROM wait_keys WHERE wait = ?":                          {false, true},
		"UPDATE waits SET state = ? WHERE id = ? AND state = 'active'":  {false, true},
		"INSERT INTO toolbelt_tokens (id) VALUES (?)":                   {true, false},
		"UPDATE toolbelt_tokens SET revoked_at = ? WHERE id = ?":        {true, false},
		"SELECT id FROM toolbelt_tokens WHERE execution = ? FOR UPDATE": {true, false},
		"SAVEPOINT member": {false, false},
		"SELECT id FROM waits w JOIN wait_keys k ON k.wait = w.id WHERE key = ?": {true, true},
	} {
		var c TxRows
		if _, err := c.ReadCallGuard(context.Background(), "exe_1", guard(false, false)); err != nil {
			t.Fatal(err)
		}
		c.Statement(query)
		if got := [2]bool{c.NoActiveWait("wrk_1"), c.NoLiveTokens("exe_1")}; got != want {
			t.Errorf("after %q: no active wait %v, no live tokens %v; want %v, %v", query, got[0], got[1], want[0], want[1])
		}
	}
	var c TxRows
	if _, err := c.ReadCallGuard(context.Background(), "exe_1", guard(false, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadCallGuard(context.Background(), "exe_1", guard(true, true)); err != nil {
		t.Fatal(err)
	}
	if c.NoActiveWait("wrk_1") || c.NoLiveTokens("exe_1") || c.NoActiveWait("wrk_2") {
		t.Fatalf("a later guard read that found a wait and a token, or another Work, still reads as absent")
	}
}

// A key the transaction released is unowned until a statement may change
// work_keys; another scope's key of the same name is not.
func TestTxRowsKnowsTheKeysItReleased(t *testing.T) {
	for query, want := range map[string]bool{
		"UPDATE work SET state = ? WHERE id = ?":                                      true,
		"INSERT INTO events (seq) VALUES (?)":                                         true,
		"INSERT INTO work_keys (scope, key, work, acquired_at) VALUES (?, ?, ?, ?)":   false,
		"UPDATE work_keys SET released_at = ? WHERE work = ? AND released_at IS NULL": false,
		"SELECT w.id FROM work_keys k JOIN work w ON w.id = k.work WHERE k.key = ?":   true,
		"SELECT k.key FROM work_keys k WHERE k.work = ? FOR UPDATE":                   false,
		"SAVEPOINT member": false,
	} {
		var c TxRows
		c.KeepReleasedKeys([][2]string{{"s1", "wrk_1"}, {"s1", "pr/1"}})
		c.Statement(query)
		if got := c.KeyUnowned("s1", "pr/1"); got != want {
			t.Errorf("after %q: key unowned %v, want %v", query, got, want)
		}
		if c.KeyUnowned("s2", "pr/1") {
			t.Errorf("a key of another scope reads as released")
		}
	}
}

// Guards read ahead are given out once each, and only while no statement
// since may have changed them: a write that names its rows drops the
// guards of those rows alone, any other write to a table a guard reads
// drops them all, and a plain read or an event insert none.
func TestTxRowsGuardsReadAhead(t *testing.T) {
	guard := func(n string) CallGuard {
		return CallGuard{Execution: Execution{ID: "exe_" + n, Work: "wrk_" + n}, Work: Work{ID: "wrk_" + n, Scope: "s1", Grants: []string{"g"}},
			KeyOwner: "wrk_" + n}
	}
	names := []string{"a", "b", "c", "d"}
	reads := 0
	read := func(_ context.Context, id string) (CallGuard, error) {
		reads++
		return CallGuard{Execution: Execution{ID: id}, LatestGeneration: 7}, nil
	}
	served := func(c *TxRows, n string) bool {
		t.Helper()
		before := reads
		g, err := c.ReadCallGuard(context.Background(), "exe_"+n, read)
		if err != nil {
			t.Fatal(err)
		}
		if reads == before && (g.Work.ID != "wrk_"+n || g.KeyOwner != "wrk_"+n) {
			t.Fatalf("the guard of exe_%s given out from ahead = %+v", n, g)
		}
		return reads == before
	}
	for _, c := range []struct {
		query   string
		only    RowScope
		dropped string // the guards a later read finds read ahead no more
	}{
		{"SELECT 1 FROM work WHERE id = ?", RowScope{}, ""},
		{"INSERT INTO events (seq) VALUES (?)", RowScope{}, ""},
		{"WITH u AS (UPDATE executions SET state = ? WHERE id = ? RETURNING 1) SELECT 1 / COUNT(*) FROM u", RowScope{Execution: "exe_b"}, "b"},
		{"WITH u AS (UPDATE work SET state = ? WHERE id = ? RETURNING 1) SELECT 1 / COUNT(*) FROM u", RowScope{Work: "wrk_c"}, "c"},
		{"UPDATE work_keys SET released_at = ? WHERE work = ? AND released_at IS NULL", RowScope{KeysOf: "wrk_d"}, "d"},
		{"UPDATE executions SET state = ? WHERE id = ?", RowScope{}, "abcd"},
		{"INSERT INTO declarations (execution) VALUES (?)", RowScope{}, "abcd"},
		{"INSERT INTO config_generations (number) VALUES (?)", RowScope{}, "abcd"},
		{"UPDATE waits SET state = ? WHERE id = ?", RowScope{Work: "wrk_a"}, "abcd"},
		{"SAVEPOINT member", RowScope{}, "abcd"},
	} {
		var rows TxRows
		var ahead []CallGuard
		for _, n := range names {
			ahead = append(ahead, guard(n))
		}
		rows.KeepCallGuards(ahead)
		rows.StatementOn(c.query, c.only)
		for _, n := range names {
			want := !strings.Contains(c.dropped, n)
			if got := served(&rows, n); got != want {
				t.Errorf("after %q on %+v: the guard of exe_%s given out from ahead %v, want %v", c.query, c.only, n, got, want)
			}
		}
		if served(&rows, "a") {
			t.Errorf("after %q: the guard of exe_a was given out from ahead twice", c.query)
		}
		if g, _ := rows.Work("wrk_b"); !strings.Contains(c.dropped, "b") && g.ID != "wrk_b" {
			t.Errorf("after %q: the Work of a guard given out from ahead is not kept", c.query)
		}
	}
	var rows TxRows
	a := guard("a")
	rows.KeepCallGuards([]CallGuard{a})
	a.Work.Grants[0] = "changed" // the kept guard is a copy
	if g, _ := rows.ReadCallGuard(context.Background(), "exe_a", read); g.Work.Grants[0] != "g" {
		t.Fatalf("the guard given out shares its grants with the guard kept: %v", g.Work.Grants)
	}
}
