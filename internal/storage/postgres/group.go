package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/group"
)

// Group commit (internal/storage/group), as on SQLite: the write
// transactions of one Store queue, and the ones queued together run as
// one PostgreSQL transaction on one pooled connection, each in a SAVEPOINT
// of its own, with one COMMIT (one WAL flush) for all of them. A caller's
// failed statement aborts only its savepoint, which is rolled back.
//
// The batch's own statements travel with each other: BEGIN goes with the
// first SAVEPOINT, a kept savepoint's RELEASE with the next SAVEPOINT (the
// COMMIT releases the last), so a caller costs one round trip more than
// its own statements and a batch one more than its callers.
//
// A batch begins by locking the event counter row (the lock InsertEvent
// takes anyway), in the same round trip as its BEGIN, and holds it to its
// end: the batches of every daemon on the database then run one at a
// time, in the order they got it. Without it, two daemons' batches could
// each hold a lock the other's next member waits for (one the counter,
// taken by an accepted event, the other a Work row, taken by a claim),
// which PostgreSQL ends by failing one of them: each member is innocent
// alone, but a batch keeps every member's locks until it commits. Writes
// across daemons were serialised on that row already wherever they accept
// an event; the batching makes each turn of it carry more.

// maxBatch bounds the callers of one batch. Each keeps a savepoint (a
// subtransaction) until the batch commits; PostgreSQL keeps 64 of them per
// transaction in its shared snapshot data before other sessions' snapshots
// must look them up, so a batch stays under that.
const maxBatch = 48

// beginBatch begins a batch and takes its lock (see above).
const beginBatch = `BEGIN ISOLATION LEVEL READ COMMITTED; SELECT last FROM event_counter WHERE id = 1 FOR UPDATE`

// batch is one PostgreSQL transaction (a group.Batch). pending is the
// batch's statement that waits to travel with its next one.
type batch struct {
	s       *Store
	c       *pgxpool.Conn
	pending string
}

func (s *Store) newCommitter() *group.Committer[*batch] {
	return group.New(group.Options[*batch]{
		Engine: "postgres",
		Max:    maxBatch,
		Begin: func() (*batch, error) {
			c, err := s.pool.Acquire(context.Background())
			if err != nil {
				return nil, errors.New(connFailure(err))
			}
			return &batch{s: s, c: c, pending: beginBatch}, nil
		},
	})
}

// exec runs the batch's statements (several, in one round trip: the
// simple protocol), never bound to a caller's context.
func (b *batch) exec(stmts string) error {
	if _, err := b.c.Exec(context.Background(), stmts); err != nil {
		return errors.New(engineMessage(err))
	}
	return nil
}

func (b *batch) Savepoint() error {
	stmts := `SAVEPOINT member`
	if b.pending != "" {
		stmts = b.pending + `; ` + stmts
		b.pending = ""
	}
	return b.exec(stmts)
}

func (b *batch) Release() error {
	b.pending = `RELEASE SAVEPOINT member`
	return nil
}

func (b *batch) Undo() error {
	return b.exec(`ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member`)
}

func (b *batch) Commit() error {
	defer b.c.Release()
	began := b.s.clock.Now()
	tag, err := b.c.Exec(context.Background(), `COMMIT`)
	if err != nil {
		// The outcome is unknown (the connection failed during COMMIT):
		// the callers are told it failed, and the pool drops the
		// connection.
		return errors.New(engineMessage(err))
	}
	if tag.String() == "ROLLBACK" {
		return errors.New("the transaction was aborted by an earlier failed statement and rolled back")
	}
	if b.s.commit != nil {
		b.s.commit(b.s.clock.Now().Sub(began))
	}
	return nil
}

func (b *batch) Rollback() {
	defer b.c.Release()
	if b.pending == beginBatch {
		return // nothing was begun
	}
	// A connection left in a transaction (this failed) is not given back
	// to the pool: Release closes it.
	_, _ = b.c.Exec(context.Background(), `ROLLBACK`)
}

// WithTx runs fn in a write transaction at READ COMMITTED, batched with
// the writes of this store queued at the same time (see the group commit
// above and group.Committer.Run): one at a time in this store. A caller's
// statements heed its context until they start, and are never interrupted
// once started; once fn has returned, its Tx refuses every statement.
func (s *Store) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.group.Run(ctx, func(b *batch) error {
		t, tn := newTx(b.c)
		defer tn.ended.Store(true)
		return fn(t)
	})
}
