package storage

import "testing"

func TestTxRowsForgetsAtWrites(t *testing.T) {
	for query, keeps := range map[string]bool{
		"SELECT 1 FROM work WHERE id = ?":                          true,
		"\n\t\tselect seq FROM events":                             true,
		"SELECT input_count FROM work WHERE id = ? FOR UPDATE":     false,
		"SELECT last FROM event_counter FOR SHARE":                 false,
		"UPDATE work SET state = ? WHERE id = ?":                   false,
		"INSERT INTO events (seq) VALUES (?)":                      false,
		"WITH moved AS (UPDATE event_counter SET last = ?) SELECT": false,
		"DELETE FROM work_keys WHERE work = ?":                     false,
		"SAVEPOINT member":                                         false,
	} {
		var c TxRows
		c.KeepWork(Work{ID: "wrk_1", Grants: []string{"a"}})
		c.KeepExecution(Execution{ID: "exe_1"})
		c.KeepEvent(Event{ID: "evt_1"})
		c.Statement(query)
		_, work := c.Work("wrk_1")
		_, exec := c.Execution("exe_1")
		_, ev := c.Event("evt_1")
		if work != keeps || exec != keeps || !ev {
			t.Errorf("after %q: work kept %v, execution kept %v, event kept %v; want %v, %v, true", query, work, exec, ev, keeps, keeps)
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
