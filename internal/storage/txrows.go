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
// WITH at all. No table of the schema changes another through a trigger or
// a cascade, so a write to one table leaves the rows of the others as they
// were. Events are kept across writes, because an accepted event never
// changes. A TxRows belongs to one caller's transaction and is never
// shared between transactions or goroutines; the zero value is ready to
// use.
//
// Holding a row across plain reads is like reading it at the first read:
// every write the store makes is a compare-and-set on the row's revision,
// epoch or state, so a row another transaction has changed since is still
// refused where it matters.
type TxRows struct {
	work   kept[Work]
	execs  kept[Execution]
	events kept[Event]
	// written marks the kept Work rows the transaction wrote itself
	// (KeepWrittenWork): it holds them locked to its end on an engine
	// that locks rows, and they are current.
	written map[string]bool
	// noWait and noTokens are what a guard read found absent (see
	// ReadCallGuard): the Work ids without an active wait, the execution
	// ids without a token not yet revoked. Each is forgotten, like a
	// kept row, at a statement that may change its table (waits,
	// toolbelt_tokens).
	noWait   map[string]bool
	noTokens map[string]bool
	// noKeyWaits are the keys (scope, key) a guard read found no active
	// wait naming, forgotten at a statement that may change waits.
	noKeyWaits map[[2]string]bool
	// unowned are the keys (scope, key) the transaction released itself
	// (KeepReleasedKeys) or a guard read found unowned, owned the keys a
	// guard read found owned or the transaction acquired itself
	// (KeepOwnedKey), by the owner's id; both are forgotten at a
	// statement that may change work_keys.
	unowned map[[2]string]bool
	owned   map[[2]string]string
	// ahead are call guards read ahead of their use (KeepCallGuards), by
	// execution id, each given out once by ReadCallGuard. A guard says
	// what eight tables hold: all are dropped at a statement that may
	// change any of them, but for a write whose rows are named
	// (StatementOn), which drops the guards it may change alone.
	ahead kept[CallGuard]
}

// RowScope names the rows a write changes, when they are these alone: a
// Work's row or an execution's, by primary key, or the keys a Work owns
// (work_keys of that Work). The zero scope names none: the statement may
// change anything its text names.
type RowScope struct {
	Work, Execution, KeysOf string
}

// Statement is told every statement the transaction runs, before it runs.
func (c *TxRows) Statement(query string) { c.StatementOn(query, RowScope{}) }

// StatementOn is Statement for a write that changes the rows of only, when
// only names any: the guards read ahead that it cannot change stay.
func (c *TxRows) StatementOn(query string, only RowScope) {
	if len(c.work) == 0 && len(c.execs) == 0 && len(c.noWait) == 0 && len(c.noTokens) == 0 && len(c.noKeyWaits) == 0 &&
		len(c.unowned) == 0 && len(c.owned) == 0 && len(c.ahead) == 0 {
		return
	}
	t := touches(query)
	switch {
	case len(c.ahead) == 0 || t == 0:
	case only == (RowScope{}) || t&^(touchWork|touchExecs|touchKeys) != 0:
		clear(c.ahead)
	default:
		for id, g := range c.ahead {
			if only.Execution != "" && g.Execution.ID == only.Execution || only.Work != "" && g.Work.ID == only.Work ||
				only.KeysOf != "" && (g.Work.ID == only.KeysOf || g.KeyOwner == only.KeysOf) {
				delete(c.ahead, id)
			}
		}
	}
	if t&touchWork != 0 {
		clear(c.work)
		clear(c.written)
	}
	if t&touchExecs != 0 {
		clear(c.execs)
	}
	if t&touchWaits != 0 {
		clear(c.noWait)
		clear(c.noKeyWaits)
	}
	if t&touchTokens != 0 {
		clear(c.noTokens)
	}
	if t&touchKeys != 0 {
		clear(c.unowned)
		clear(c.owned)
	}
}

// kept is the rows of one table a transaction keeps, by id. Rows go in and
// out as copies (cloned), so that no caller shares a kept row's slices or
// pointers with another.
type kept[T interface{ cloned() T }] map[string]T

func (k *kept[T]) get(id string) (T, bool) {
	v, ok := (*k)[id]
	if !ok {
		return v, false
	}
	return v.cloned(), true
}

func (k *kept[T]) put(id string, v T) {
	if *k == nil {
		*k = kept[T]{}
	}
	(*k)[id] = v.cloned()
}

// read is the kept row, else read's, kept.
func (k *kept[T]) read(ctx context.Context, id string, read func(context.Context, string) (T, error)) (T, error) {
	if v, ok := k.get(id); ok {
		return v, nil
	}
	v, err := read(ctx, id)
	if err == nil {
		k.put(id, v)
	}
	return v, err
}

// touched holds touches' answers: the stores' statements are a bounded
// set of texts, and reading one word by word on every statement was a
// measurable part of a short transaction's cost.
// It stops learning past maxTouched texts, so that a store that built
// statements without bound would still not grow it without bound.
var (
	touched      sync.Map // query → tables
	touchedCount atomic.Int64
)

const maxTouched = 4096

// tables is a set of the tables whose rows a TxRows keeps or knows absent.
type tables uint8

const (
	touchWork tables = 1 << iota
	touchExecs
	touchWaits
	touchTokens
	touchKeys
	// touchGuard: the other tables a call guard reads (declarations,
	// config_generations).
	touchGuard

	touchAll = touchWork | touchExecs | touchWaits | touchTokens | touchKeys | touchGuard
)

// touches reports which of the tables a TxRows knows of query may change:
// the tables it inserts into, updates or deletes from (in a WITH too), the
// tables it reads when it locks rows (… FOR UPDATE), and all of them for a
// statement of any other kind.
func touches(query string) tables {
	if v, ok := touched.Load(query); ok {
		return v.(tables)
	}
	t := readTouches(query)
	if touchedCount.Load() < maxTouched {
		if _, had := touched.LoadOrStore(query, t); !had {
			touchedCount.Add(1)
		}
	}
	return t
}

func readTouches(query string) (t tables) {
	next := words(query)
	first := next()
	switch strings.ToUpper(first) {
	case "SELECT", "WITH", "INSERT", "UPDATE", "DELETE":
	default:
		return touchAll
	}
	changes := func(table string) {
		switch strings.ToLower(table) {
		case "work":
			t |= touchWork
		case "executions":
			t |= touchExecs
		case "waits", "wait_keys":
			t |= touchWaits
		case "toolbelt_tokens":
			t |= touchTokens
		case "work_keys":
			t |= touchKeys
		case "declarations", "config_generations":
			t |= touchGuard
		}
	}
	var before, prev string
	var read []string // the tables read (FROM, JOIN), for a lock
	for w := first; w != ""; before, prev, w = prev, w, next() {
		switch {
		case strings.EqualFold(prev, "FOR") && (strings.EqualFold(w, "UPDATE") || strings.EqualFold(w, "SHARE")):
			// A lock: what this transaction reads next of the tables
			// it locks rows of may be newer than what it kept.
			for _, t := range read {
				changes(t)
			}
		case strings.EqualFold(prev, "FROM") || strings.EqualFold(prev, "JOIN"):
			read = append(read, w)
			if strings.EqualFold(before, "DELETE") {
				changes(w)
			}
		case strings.EqualFold(prev, "INTO"):
			changes(w)
		case strings.EqualFold(prev, "UPDATE") && !strings.EqualFold(w, "SET"): // not ON CONFLICT … DO UPDATE SET
			changes(w)
		}
	}
	return t
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
func (c *TxRows) Work(id string) (Work, bool) { return c.work.get(id) }

// Execution returns a copy of the execution row kept for id.
func (c *TxRows) Execution(id string) (Execution, bool) { return c.execs.get(id) }

// Event returns a copy of the event kept for id.
func (c *TxRows) Event(id string) (Event, bool) { return c.events.get(id) }

// KeepWork keeps a copy of w, a row just read or written by the
// transaction.
func (c *TxRows) KeepWork(w Work) { c.work.put(w.ID, w) }

// KeepWrittenWork keeps a copy of w, a row the transaction has just
// written (RETURNING): WrittenWork hands it out until the next statement
// that may change Work rows.
func (c *TxRows) KeepWrittenWork(w Work) {
	c.KeepWork(w)
	if c.written == nil {
		c.written = map[string]bool{}
	}
	c.written[w.ID] = true
}

// WrittenWork returns a copy of the Work row kept for id when the
// transaction wrote it itself and nothing since could have changed it: a
// row the transaction holds locked, whose counters a write may build on
// without reading (and locking) it again.
func (c *TxRows) WrittenWork(id string) (Work, bool) {
	if !c.written[id] {
		return Work{}, false
	}
	return c.work.get(id)
}

// KeepExecution keeps a copy of e, a row just read or written by the
// transaction.
func (c *TxRows) KeepExecution(e Execution) { c.execs.put(e.ID, e) }

// KeepEvent keeps a copy of e, an accepted event.
func (c *TxRows) KeepEvent(e Event) { c.events.put(e.ID, e) }

// ReadWork is a transaction's GetWork: the kept row, else read's, kept.
func (c *TxRows) ReadWork(ctx context.Context, id string, read func(context.Context, string) (Work, error)) (Work, error) {
	return c.work.read(ctx, id, read)
}

// ReadExecution is a transaction's GetExecution: the kept row, else
// read's, kept.
func (c *TxRows) ReadExecution(ctx context.Context, id string, read func(context.Context, string) (Execution, error)) (Execution, error) {
	return c.execs.read(ctx, id, read)
}

// ReadCallGuard is a transaction's GetCallGuard: read's, always (no
// kept row says whether a declaration is pending or which generation is
// the latest, and the one statement answers them with the rows), with its
// execution and Work rows kept for the transaction's later reads.
func (c *TxRows) ReadCallGuard(ctx context.Context, executionID string, read func(context.Context, string) (CallGuard, error)) (CallGuard, error) {
	g, ok := c.ahead.get(executionID)
	var err error
	if ok {
		delete(c.ahead, executionID)
	} else {
		g, err = read(ctx, executionID)
	}
	if err == nil {
		c.KeepExecution(g.Execution)
		c.KeepWork(g.Work)
		mark(&c.noWait, g.Work.ID, !g.ActiveWait)
		mark(&c.noTokens, g.Execution.ID, !g.LiveTokens)
		key := [2]string{g.Work.Scope, g.Work.ID}
		mark(&c.noKeyWaits, key, !g.KeyWaits)
		if g.KeyOwner == "" {
			mark(&c.unowned, key, true)
			delete(c.owned, key)
		} else {
			c.KeepOwnedKey(key[0], key[1], g.KeyOwner)
		}
	}
	return g, err
}

// KeepCallGuards keeps guards the transaction has just read ahead of
// their use (Tx.ReadCallGuardsAhead): ReadCallGuard gives each out once,
// as if it had read it then, while no statement since may have changed
// what it says (see StatementOn).
func (c *TxRows) KeepCallGuards(guards []CallGuard) {
	for _, g := range guards {
		c.ahead.put(g.Execution.ID, g)
	}
}

// mark sets or clears id in the set *m.
func mark[K comparable](m *map[K]bool, id K, on bool) {
	if !on {
		delete(*m, id)
		return
	}
	if *m == nil {
		*m = map[K]bool{}
	}
	(*m)[id] = true
}

// KeepReleasedKeys records keys (scope, key) the transaction has just
// released: nobody owns them until a statement may change work_keys.
func (c *TxRows) KeepReleasedKeys(keys [][2]string) {
	for _, k := range keys {
		if c.unowned == nil {
			c.unowned = map[[2]string]bool{}
		}
		c.unowned[k] = true
	}
}

// KeepOwnedKey records that work owns key in scope, a key the
// transaction has just acquired for it: until a statement may change
// work_keys, OwnsKey says so without a statement.
func (c *TxRows) KeepOwnedKey(scope, key, work string) {
	k := [2]string{scope, key}
	delete(c.unowned, k)
	if c.owned == nil {
		c.owned = map[[2]string]string{}
	}
	c.owned[k] = work
}

// OwnsKey reports whether the transaction knows, from its own acquiring
// or a guard read that nothing it ran since can have changed, that work
// owns key in scope.
func (c *TxRows) OwnsKey(scope, key, work string) bool {
	owner, ok := c.owned[[2]string{scope, key}]
	return ok && owner == work
}

// KeysOwnedBy is the keys (scope, key) the transaction knows, from a
// guard read that nothing it ran since can have changed, that work owns:
// a store whose release of a Work's keys returns none calls it before the
// release and keeps what it returns released (KeepReleasedKeys) after.
func (c *TxRows) KeysOwnedBy(work string) [][2]string {
	var out [][2]string
	for k, owner := range c.owned {
		if owner == work {
			out = append(out, k)
		}
	}
	return out
}

// NoWaitsByKey reports whether the transaction knows, from a guard read
// that nothing it ran since can have changed, that no active wait in
// scope names key: its ListActiveWaitsByKey needs no statement.
func (c *TxRows) NoWaitsByKey(scope, key string) bool { return c.noKeyWaits[[2]string{scope, key}] }

// KeyUnowned reports whether the transaction released key in scope itself,
// or a guard read found it unowned, and nothing since may have given it
// an owner: its GetKeyOwner needs no statement.
func (c *TxRows) KeyUnowned(scope, key string) bool { return c.unowned[[2]string{scope, key}] }

// NoActiveWait reports whether the transaction knows, from a guard read
// that nothing it ran since can have changed, that the Work has no active
// wait: its GetActiveWait needs no statement.
func (c *TxRows) NoActiveWait(workID string) bool { return c.noWait[workID] }

// NoLiveTokens reports whether the transaction knows, likewise, that the
// execution has no token left to revoke: revoking its tokens needs no
// statement.
func (c *TxRows) NoLiveTokens(executionID string) bool { return c.noTokens[executionID] }

// ReadEvent is a transaction's GetEvent: the kept event, else read's,
// kept.
func (c *TxRows) ReadEvent(ctx context.Context, id string, read func(context.Context, string) (Event, error)) (Event, error) {
	return c.events.read(ctx, id, read)
}

func (w Work) cloned() Work {
	w.OutcomeData = bytes.Clone(w.OutcomeData)
	w.Grants = slices.Clone(w.Grants)
	return w
}

func (e Execution) cloned() Execution {
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

func (g CallGuard) cloned() CallGuard {
	g.Execution, g.Work = g.Execution.cloned(), g.Work.cloned()
	return g
}

func (e Event) cloned() Event {
	e.Data = bytes.Clone(e.Data)
	return e
}
