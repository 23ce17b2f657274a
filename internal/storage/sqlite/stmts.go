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

// stmtCache keeps prepared statements, so that the SQL text of a query is
// parsed once per connection instead of on every call (parsing was the
// largest cost of a small query). The readers' cache prepares on their
// pool; the writer's on its one held connection (Store.wconn), where a
// statement can be prepared at any moment, inside a transaction too.
type stmtCache struct {
	prep func(ctx context.Context, query string) (*sql.Stmt, error)
	mu   sync.Mutex
	m    map[string]*sql.Stmt
}

func newStmtCache(prep func(ctx context.Context, query string) (*sql.Stmt, error)) *stmtCache {
	return &stmtCache{prep: prep, m: map[string]*sql.Stmt{}}
}

// stmt returns query's prepared statement, preparing it on first use; nil
// when the cache is full or the text does not prepare (the caller then
// runs it unprepared, and gets the error from there). The lock is not
// held while preparing, which may wait for a reader.
func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	st, full := c.m[query], len(c.m) >= maxCachedStmts
	c.mu.Unlock()
	if st != nil || full {
		return st
	}
	st, err := c.prep(ctx, query)
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

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// poolQuerier runs queries on the reader pool through the cache.
type poolQuerier struct {
	db *sql.DB
	c  *stmtCache
}

func (p poolQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

func (p poolQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

func (p poolQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// txQuerier runs one caller's queries in the write transaction (its
// savepoint of the batch) on the writer's connection, through the
// writer's prepared statements.
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
	conn  *sql.Conn
	c     *stmtCache
	ended atomic.Bool
	rows  *storage.TxRows
}

var errTxEnded = errors.New("sqlite: the transaction has ended")

// endedCtx is done, so that the driver refuses a statement on it before
// it runs.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errTxEnded)
	return ctx
}()

// runCtx is the context a statement runs under: ctx without its
// cancellation while ctx is live, else a done context the driver refuses.
//
// A context without cancellation also keeps database/sql and the driver
// from starting a goroutine per statement to watch it: on the writer's
// held connection (no database/sql Tx, whose own context would be
// watched), a statement costs no goroutine at all.
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
	if st := t.c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.conn.ExecContext(ctx, query, args...)
}

func (t *txQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if t.rows != nil {
		t.rows.Statement(query)
	}
	if t.ended.Load() {
		return nil, errTxEnded
	}
	ctx = t.runCtx(ctx)
	if st := t.c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.conn.QueryContext(ctx, query, args...)
}

func (t *txQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if t.rows != nil {
		t.rows.Statement(query)
	}
	ctx = t.runCtx(ctx)
	if t.ended.Load() {
		// The driver refuses endedCtx; the statement is not prepared for it.
		return t.conn.QueryRowContext(ctx, query, args...)
	}
	if st := t.c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}
