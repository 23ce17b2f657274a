package storage

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// TxRows keeps the Work, execution and event rows that one write
// transaction has read, so that reading one again inside the same
// transaction costs no statement. The kernel and the scheduler read the
// same Work and execution several times in one transaction (each step
// checks what it acts on); on PostgreSQL each read is a round trip, and on
// SQLite it is time inside the one writer.
//
// A Work or execution row is served from here only while the transaction
// has run nothing since it was read that could change it: Statement
// forgets the Work rows at a statement that writes the work table, the
// execution rows at one that writes the executions table, each at a
// statement that locks rows of its table (… FOR UPDATE, FOR SHARE), and
// both at a statement that is not a SELECT, INSERT, UPDATE, DELETE or
// WITH at all. No table of the schema
// changes another through a trigger or a cascade, so a write to one table
// leaves the rows of the others as they were. Events are kept across
// writes, because an accepted event never changes. A TxRows belongs to one
// caller's transaction and is never shared between transactions or
// goroutines; the zero value is ready to use.
//
// Holding a row across plain reads is like reading it at the first read:
// every write the store makes is a compare-and-set on the row's revision,
// epoch or state, so a row another transaction has changed since is still
// refused where it matters.
type TxRows struct {
	work   map[string]Work
	execs  map[string]Execution
	events map[string]Event
}

// Statement is told every statement the transaction runs, before it runs.
func (c *TxRows) Statement(query string) {
	if len(c.work) == 0 && len(c.execs) == 0 {
		return
	}
	work, execs := touches(query)
	if work {
		clear(c.work)
	}
	if execs {
		clear(c.execs)
	}
}

// touched holds touches' answers: the stores' statements are a bounded
// set of texts, and reading one word by word on every statement was a
// measurable part of a short transaction's cost.
// It stops learning past maxTouched texts, so that a store that built
// statements without bound would still not grow it without bound.
var (
	touched      sync.Map // query → [2]bool
	touchedCount atomic.Int64
)

const maxTouched = 4096

// touches reports whether query may change rows of the work table and of
// the executions table: the tables it inserts into, updates or deletes
// from (in a WITH too), the tables it reads when it locks rows (… FOR
// UPDATE), and both for a statement of any other kind.
func touches(query string) (work, execs bool) {
	if v, ok := touched.Load(query); ok {
		t := v.([2]bool)
		return t[0], t[1]
	}
	work, execs = readTouches(query)
	if touchedCount.Load() < maxTouched {
		if _, had := touched.LoadOrStore(query, [2]bool{work, execs}); !had {
			touchedCount.Add(1)
		}
	}
	return work, execs
}

func readTouches(query string) (work, execs bool) {
	next := words(query)
	first := next()
	switch strings.ToUpper(first) {
	case "SELECT", "WITH", "INSERT", "UPDATE", "DELETE":
	default:
		return true, true
	}
	var before, prev string
	var read []string // the tables read (FROM, JOIN), for a lock
	for w := first; w != ""; before, prev, w = prev, w, next() {
		var table string
		switch {
		case strings.EqualFold(prev, "FOR") && (strings.EqualFold(w, "UPDATE") || strings.EqualFold(w, "SHARE")):
			// A lock: what this transaction reads next of the tables
			// it locks rows of may be newer than what it kept.
			for _, t := range read {
				switch strings.ToLower(t) {
				case "work":
					work = true
				case "executions":
					execs = true
				}
			}
		case strings.EqualFold(prev, "FROM") || strings.EqualFold(prev, "JOIN"):
			read = append(read, w)
			if strings.EqualFold(before, "DELETE") {
				table = w
			}
		case strings.EqualFold(prev, "INTO"):
			table = w
		case strings.EqualFold(prev, "UPDATE") && !strings.EqualFold(w, "SET"): // not ON CONFLICT … DO UPDATE SET
			table = w
		}
		switch strings.ToLower(table) {
		case "work":
			work = true
		case "executions":
			execs = true
		}
	}
	return work, execs
}

// words returns a function that gives the words of query one at a time
// (runs of letters, digits, _ and .), and "" at the end.
func words(query string) func() string {
	i := 0
	isWord := func(b byte) bool {
		return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.'
	}
	return func() string {
		for i < len(query) && !isWord(query[i]) {
			i++
		}
		start := i
		for i < len(query) && isWord(query[i]) {
			i++
		}
		return query[start:i]
	}
}

// Work returns a copy of the Work row kept for id.
func (c *TxRows) Work(id string) (Work, bool) {
	w, ok := c.work[id]
	if !ok {
		return Work{}, false
	}
	return cloneWork(w), true
}

// KeepWork keeps a copy of w, a row just read or written by the
// transaction.
func (c *TxRows) KeepWork(w Work) {
	if c.work == nil {
		c.work = map[string]Work{}
	}
	c.work[w.ID] = cloneWork(w)
}

// Execution returns a copy of the execution row kept for id.
func (c *TxRows) Execution(id string) (Execution, bool) {
	e, ok := c.execs[id]
	if !ok {
		return Execution{}, false
	}
	return cloneExecution(e), true
}

// KeepExecution keeps a copy of e, a row just read or written by the
// transaction.
func (c *TxRows) KeepExecution(e Execution) {
	if c.execs == nil {
		c.execs = map[string]Execution{}
	}
	c.execs[e.ID] = cloneExecution(e)
}

// Event returns a copy of the event kept for id.
func (c *TxRows) Event(id string) (Event, bool) {
	e, ok := c.events[id]
	if !ok {
		return Event{}, false
	}
	e.Data = bytes.Clone(e.Data)
	return e, true
}

// KeepEvent keeps a copy of e, an accepted event.
func (c *TxRows) KeepEvent(e Event) {
	if c.events == nil {
		c.events = map[string]Event{}
	}
	e.Data = bytes.Clone(e.Data)
	c.events[e.ID] = e
}

// ReadWork is a transaction's GetWork: the kept row, else read's, kept.
func (c *TxRows) ReadWork(ctx context.Context, id string, read func(context.Context, string) (Work, error)) (Work, error) {
	if w, ok := c.Work(id); ok {
		return w, nil
	}
	w, err := read(ctx, id)
	if err == nil {
		c.KeepWork(w)
	}
	return w, err
}

// ReadExecution is a transaction's GetExecution: the kept row, else
// read's, kept.
func (c *TxRows) ReadExecution(ctx context.Context, id string, read func(context.Context, string) (Execution, error)) (Execution, error) {
	if e, ok := c.Execution(id); ok {
		return e, nil
	}
	e, err := read(ctx, id)
	if err == nil {
		c.KeepExecution(e)
	}
	return e, err
}

// ReadEvent is a transaction's GetEvent: the kept event, else read's,
// kept.
func (c *TxRows) ReadEvent(ctx context.Context, id string, read func(context.Context, string) (Event, error)) (Event, error) {
	if e, ok := c.Event(id); ok {
		return e, nil
	}
	e, err := read(ctx, id)
	if err == nil {
		c.KeepEvent(e)
	}
	return e, err
}

func cloneWork(w Work) Work {
	w.OutcomeData = bytes.Clone(w.OutcomeData)
	w.Grants = slices.Clone(w.Grants)
	return w
}

func cloneExecution(e Execution) Execution {
	if e.ExitCode != nil {
		c := *e.ExitCode
		e.ExitCode = &c
	}
	if e.Usage != nil {
		u := *e.Usage
		e.Usage = &u
	}
	return e
}
