package storage

import "testing"

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
