package storage

import (
	"bytes"
	"context"
	"slices"
	"strings"
)

// TxRows keeps the Work, execution and event rows that one write
// transaction has read, so that reading one again inside the same
// transaction costs no statement. The kernel and the scheduler read the
// same Work and execution several times in one transaction (each step
// checks what it acts on); on PostgreSQL each read is a round trip, and on
// SQLite it is time inside the one writer.
//
// A Work or execution row is served from here only while the transaction
// has run nothing but plain reads since it was read: Statement forgets
// them at any statement that may write or lock (anything that is not a
// SELECT, and a SELECT … FOR UPDATE). Events are kept across writes,
// because an accepted event never changes. A TxRows belongs to one caller's
// transaction and is never shared between transactions or goroutines; the
// zero value is ready to use.
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
	if readOnly(query) {
		return
	}
	clear(c.work)
	clear(c.execs)
}

// readOnly reports whether query is a plain SELECT that neither writes
// nor locks.
func readOnly(query string) bool {
	q := strings.TrimLeft(query, " \t\n")
	if len(q) < 6 || !strings.EqualFold(q[:6], "SELECT") {
		return false
	}
	return !strings.Contains(q, "FOR UPDATE") && !strings.Contains(q, "FOR SHARE")
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
