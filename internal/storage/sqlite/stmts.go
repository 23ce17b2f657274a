package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// maxCachedStmts bounds the statement cache of one pool: the queries are
// fixed texts, and the few built from optional filters have a bounded set
// of shapes.
const maxCachedStmts = 512

// stmtCache keeps prepared statements of one pool, so that the SQL text of
// a query is parsed once per connection instead of on every call (parsing
// was the largest cost of a small query).
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	wanted map[string]bool
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

// prepare prepares query on the pool now. Only call it when a connection
// is free (always for the readers; for the writer outside a transaction).
// The lock is not held while preparing, which may wait for a connection.
func (c *stmtCache) prepare(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	st, full := c.m[query], len(c.m) >= maxCachedStmts
	c.mu.Unlock()
	if st != nil || full {
		return st
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if other := c.m[query]; other != nil {
		st.Close()
		return other
	}
	c.m[query] = st
	return st
}

// want records a query a transaction ran unprepared (the writer's single
// connection is busy inside it); flush prepares them afterwards.
func (c *stmtCache) want(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m)+len(c.wanted) < maxCachedStmts {
		c.wanted[query] = true
	}
}

func (c *stmtCache) flush(ctx context.Context) {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = map[string]bool{}
	c.mu.Unlock()
	for q := range wanted {
		c.prepare(ctx, q)
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// poolQuerier runs queries on the reader pool through the cache.
type poolQuerier struct{ c *stmtCache }

func (p poolQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	if st := p.c.lookup(query); st != nil {
		return st
	}
	return p.c.prepare(ctx, query)
}

func (p poolQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.c.db.ExecContext(ctx, query, args...)
}

func (p poolQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.c.db.QueryContext(ctx, query, args...)
}

func (p poolQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.c.db.QueryRowContext(ctx, query, args...)
}

// txQuerier runs one caller's queries in the write transaction (its
// savepoint of the batch), through the writer's cached statements when they
// exist.
//
// The caller's context is checked before each statement and never handed
// to the driver: the driver interrupts a statement whose context ends, and
// SQLite answers an interrupted write by rolling back the whole
// transaction, the other callers of the batch with it. Once the caller's
// turn has ended (ended), its queries fail: a function that kept its Tx
// must not write into another caller's savepoint.
//
// rows, when set, is told every statement, so that the rows the caller's
// transaction keeps are forgotten at a write.
type txQuerier struct {
	tx    *sql.Tx
	c     *stmtCache
	ended atomic.Bool
	rows  *storage.TxRows
}

var errTxEnded = errors.New("sqlite: the transaction has ended")

// endedCtx is done, so that database/sql refuses a statement on it before
// the driver sees it.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errTxEnded)
	return ctx
}()

// runCtx is the context a statement runs under: ctx without its
// cancellation while ctx is live, else a done context database/sql refuses.
func (t *txQuerier) runCtx(ctx context.Context) context.Context {
	switch {
	case t.ended.Load():
		return endedCtx
	case ctx.Err() != nil:
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func (t *txQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.rows != nil {
		t.rows.Statement(query)
	}
	if t.ended.Load() {
		return nil, errTxEnded
	}
	ctx = t.runCtx(ctx)
	if st := t.c.lookup(query); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	t.c.want(query)
	return t.tx.ExecContext(ctx, query, args...)
}

func (t *txQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if t.rows != nil {
		t.rows.Statement(query)
	}
	if t.ended.Load() {
		return nil, errTxEnded
	}
	ctx = t.runCtx(ctx)
	if st := t.c.lookup(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	t.c.want(query)
	return t.tx.QueryContext(ctx, query, args...)
}

func (t *txQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if t.rows != nil {
		t.rows.Statement(query)
	}
	ctx = t.runCtx(ctx)
	if st := t.c.lookup(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	t.c.want(query)
	return t.tx.QueryRowContext(ctx, query, args...)
}
