package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// The batch's own statements never cost a round trip of their own: they
// wait (ahead) and travel in one pipeline with the caller's next
// statement, BEGIN with the first caller's first, a savepoint with its
// caller's first, a kept savepoint's RELEASE with the next caller's, the
// last ones with the COMMIT. A caller's write whose result it does not
// need (ReleaseKeys) waits the same way, for its next statement or the
// end of its turn.
//
// A batch begins by locking the event counter row, in the same round trip
// as its BEGIN, and holds it to its end: the batches of every daemon on
// the database then run one at a time, in the order they got it. Without it, two daemons' batches could
// each hold a lock the other's next member waits for (one the counter,
// taken by an accepted event, the other a Work row, taken by a claim),
// which PostgreSQL ends by failing one of them: each member is innocent
// alone, but a batch keeps every member's locks until it commits. Writes
// across daemons were serialised on that row already wherever they accept
// an event; the batching makes each turn of it carry more.
//
// Holding the row, a batch numbers its events itself: the counter's value
// as the batch found it (base, read with the lock) plus the events its
// kept callers accepted so far (n). The row is written once, with the
// COMMIT, rather than once per event: a row updated a hundred times in
// one transaction is a chain of a hundred versions that every later
// lookup walks. A caller's savepoint remembers n, so a caller that is
// undone gives its numbers back to the next.

// maxBatch bounds the callers of one batch. Each keeps a savepoint (a
// subtransaction) until the batch commits; PostgreSQL keeps 64 of them per
// transaction in its shared snapshot data before other sessions' snapshots
// must look them up, so a batch stays under that.
const maxBatch = 48

// beginBatch begins a batch and takes its lock (see above).
var beginBatch = []string{`BEGIN ISOLATION LEVEL READ COMMITTED`, `SELECT last FROM event_counter WHERE id = 1 FOR UPDATE`}

// batch is one PostgreSQL transaction (a group.Batch).
type batch struct {
	s *Store
	c *pgxpool.Conn
	// ahead is what waits to travel with the next statement, in order:
	// the batch's own statements and the current caller's deferred
	// writes. from is where the current caller's
	// part of it begins (its unsent SAVEPOINT), or -1 once that is sent.
	ahead []pending
	from  int
	// begun: BEGIN has been sent.
	begun bool
	// base is the counter as the batch locked it, once based; n counts
	// the events of the batch's kept callers and of the current one, and
	// mark is n at the current caller's savepoint.
	base    int64
	based   bool
	n, mark int64
	// failed is the error of the current caller's deferred write when
	// one failed: the cause of the caller's failure, whatever the
	// statement that carried it made of that.
	failed error
}

// pending is one statement waiting in ahead: the batch's own, or a
// caller's deferred write.
type pending struct {
	sql   string
	args  []any
	write bool
	// base: the statement reads the counter into the batch's base.
	base bool
	// numbered: a fresh event's insert, numbered from n.
	numbered bool
	// fence names the row of a write computed from a kept row
	// (querier.deferredOne): the statement fails should it change no row.
	fence string
	// assumed names the Work of an insert on its caller's assumption
	// (InsertWorkParams.Assumed): a unique index it breaks says the
	// assumption was wrong.
	assumed string
	// only names the rows the write changes, when they are these alone
	// (storage.TxRows.StatementOn).
	only storage.RowScope
	// late is set on the writes of a caller whose turn has ended (see
	// Release).
	late *lateWrites
}

// lateWrites are the last writes of a caller whose turn has ended, which
// travel with a later caller's first statement (or before the COMMIT):
// fail tells the caller when they failed, and mark is n at its
// savepoint, to which its failure returns the numbering.
type lateWrites struct {
	fail func(error)
	mark int64
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
			b := &batch{s: s, c: c, from: -1}
			b.ahead = append(b.ahead, pending{sql: beginBatch[0]}, pending{sql: beginBatch[1], base: true})
			return b, nil
		},
	})
}

func (b *batch) Savepoint() error {
	b.mark, b.failed = b.n, nil
	b.from = len(b.ahead)
	b.ahead = append(b.ahead, pending{sql: `SAVEPOINT member`})
	return nil
}

// Release keeps the caller's writes. Its deferred writes still unsent
// (WithTx has sent any numbered event) become late writes: they travel,
// followed by the savepoint's release, with the next caller's first
// statement or before the COMMIT, and their failure is told the caller
// through late (see pipeline). A caller that ran no statement and left
// no write has its savepoint dropped.
func (b *batch) Release(late func(error)) error {
	lw := &lateWrites{fail: late, mark: b.mark}
	start := b.from + 1 // the caller's deferred writes follow its unsent savepoint
	if b.from < 0 {
		start = 0
	}
	kept := false
	for i := start; i < len(b.ahead); i++ {
		if b.ahead[i].write && b.ahead[i].late == nil {
			b.ahead[i].late, kept = lw, true
		}
	}
	if b.from >= 0 && !kept {
		b.ahead = b.ahead[:b.from]
		b.from = -1
		return nil
	}
	b.from = -1
	b.ahead = append(b.ahead, pending{sql: `RELEASE SAVEPOINT member`})
	return nil
}

// Undo drops what of the caller was never sent, and rolls back to its
// savepoint when that was sent.
func (b *batch) Undo() error {
	b.n = b.mark
	if b.from >= 0 {
		b.ahead = b.ahead[:b.from]
		b.from = -1
		return nil
	}
	b.ahead = nil
	if _, err := b.c.Exec(context.Background(), `ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member`); err != nil {
		return errors.New(engineMessage(err))
	}
	return nil
}

func (b *batch) Commit() error {
	defer b.c.Release()
	if b.hasLate() {
		// The last writes of a kept caller go first, on their own, so
		// that their failure undoes that caller alone (see pipeline);
		// sent with the COMMIT, it would end the whole transaction.
		br, err := b.pipeline(context.Background(), "", nil)
		if err == nil {
			err = br.Close()
		}
		if err != nil {
			return errors.New(engineMessage(err))
		}
	}
	if !b.begun {
		return nil // no caller ran a statement: there is nothing to commit
	}
	stmts := make([]string, 0, len(b.ahead)+2)
	for _, p := range b.ahead {
		stmts = append(stmts, p.sql)
	}
	b.ahead = nil
	if b.n > 0 {
		stmts = append(stmts, fmt.Sprintf(`UPDATE event_counter SET last = last + %d WHERE id = 1`, b.n))
	}
	began := b.s.clock.Now()
	// The simple protocol: several statements, one round trip, the last
	// one's tag.
	tag, err := b.c.Exec(context.Background(), strings.Join(append(stmts, `COMMIT`), "; "))
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
	if !b.begun {
		return // nothing was begun
	}
	// A connection left in a transaction (this failed) is not given back
	// to the pool: Release closes it.
	_, _ = b.c.Exec(context.Background(), `ROLLBACK`)
}

// deferWrite queues a caller's write to travel with its next statement
// (querier.deferred).
func (b *batch) deferWrite(w pending) {
	w.sql, w.write = rebind(w.sql), true
	b.ahead = append(b.ahead, w)
}

// fenceErr is the error of p, a statement sent ahead: a write computed
// from a kept row that found its row moved on says so, and so does an
// insert of a Work assumed new that found it, or its key, taken.
func fenceErr(p pending, err error) error {
	var pe *pgconn.PgError
	switch {
	case p.fence != "" && errors.As(err, &pe) && pe.Code == "22012":
		return fmt.Errorf("%w: %s had moved on when the write computed from its kept row ran; the transaction is not committed", storage.ErrFenced, p.fence)
	case p.assumed != "" && isUnique(err):
		return fmt.Errorf("%w: work %s, assumed new, exists or another work owns its key; the transaction is not committed", storage.ErrDuplicate, p.assumed)
	}
	return err
}

// numberedAhead reports whether a fresh event's insert waits in ahead:
// its number counts the events before it, which a late failure would
// change, so it is never sent late.
func (b *batch) numberedAhead() bool {
	for _, p := range b.ahead {
		if p.numbered {
			return true
		}
	}
	return false
}

// hasLate reports whether a kept caller's late writes wait in ahead.
func (b *batch) hasLate() bool {
	for _, p := range b.ahead {
		if p.late != nil {
			return true
		}
	}
	return false
}

// settle sends the late writes waiting ahead, before a statement whose
// arguments count the batch's events (their failure changes the count).
func (b *batch) settle(ctx context.Context) error {
	if !b.hasLate() {
		return nil
	}
	br, err := b.pipeline(context.WithoutCancel(ctx), "", nil)
	if err != nil {
		return writeErr(err, "write")
	}
	return br.Close()
}

// pipeline sends what waits ahead, then query, in one round trip (a pgx
// batch), and returns the results of query (br is closed by the caller,
// through the row or rows it is given). An error of a statement ahead is
// query's error, but for a kept caller's late write: that caller's
// writes are rolled back to its savepoint (the innermost, its release
// never ran) and it is told, the numbering returns to its mark, and what
// came after its release, which never ran, is sent again with query.
func (b *batch) pipeline(ctx context.Context, query string, args []any) (pgx.BatchResults, error) {
	for {
		br, failed, err := b.send(ctx, query, args)
		if failed == nil {
			return br, err
		}
		if _, rerr := b.c.Exec(context.Background(), `ROLLBACK TO SAVEPOINT member; RELEASE SAVEPOINT member`); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		failed.late.fail(writeErr(err, "write"))
		b.n = failed.late.mark
		for i := range b.ahead {
			if b.ahead[i].late != nil {
				b.ahead[i].late.mark = b.n
			}
		}
		if b.mark > b.n {
			b.mark = b.n
		}
	}
}

// send is one round trip of pipeline. When a late write fails, it
// returns that write as failed, and leaves in ahead what was to run after
// its caller's release.
func (b *batch) send(ctx context.Context, query string, args []any) (pgx.BatchResults, *pending, error) {
	var pb pgx.Batch
	for _, p := range b.ahead {
		pb.Queue(p.sql, p.args...)
	}
	if query != "" {
		pb.Queue(query, args...)
	}
	ahead := b.ahead
	b.ahead = nil
	b.from = -1
	b.begun = true
	br := b.c.SendBatch(ctx, &pb)
	for i, p := range ahead {
		var err error
		if p.base {
			err = br.QueryRow().Scan(&b.base)
			b.based = err == nil
		} else {
			_, err = br.Exec()
		}
		if err == nil {
			continue
		}
		_ = br.Close()
		err = fenceErr(p, err)
		if p.late == nil {
			if p.write && b.failed == nil {
				b.failed = err
			}
			return nil, nil, err
		}
		rest := i + 1
		for rest < len(ahead) && ahead[rest].late == p.late {
			rest++
		}
		rest++ // its release
		b.ahead = append([]pending(nil), ahead[rest:]...)
		return nil, &ahead[i], err
	}
	return br, nil, nil
}

// flush sends the caller's deferred writes (with what else waits ahead),
// at the end of its turn.
func (b *batch) flush(ctx context.Context) error {
	br, err := b.pipeline(ctx, "", nil)
	if err != nil {
		return writeErr(err, "write")
	}
	return br.Close()
}

// errAbortedUnreported is the error of a caller whose function returned
// nil after the database refused one of its statements.
var errAbortedUnreported = errors.New("postgres: a statement of the transaction failed and the function went on without returning its error; nothing of the transaction is committed")

// WithTx runs fn in a write transaction at READ COMMITTED, batched with
// the writes of this store queued at the same time (see the group commit
// above and group.Committer.Run): one at a time in this store. A caller's
// statements heed its context until they start, and are never interrupted
// once started; once fn has returned, its Tx refuses every statement.
func (s *Store) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	var rows *storage.TxRows
	err := s.group.Run(ctx, func(b *batch) error {
		t, tn := newTx(b.c, s.events)
		rows = &tn.rows
		tn.b = b
		defer tn.ended.Store(true)
		err := fn(t)
		if err == nil && b.numberedAhead() {
			err = b.flush(context.WithoutCancel(ctx))
		}
		if err != nil {
			if b.failed != nil {
				// The statement that carried a deferred write reports
				// that write's failure as its own; the write's is the
				// one that says what happened (ErrFenced, ErrDuplicate).
				return b.failed
			}
			return err
		}
		// A statement PostgreSQL refused aborts the transaction; a
		// function that went on and returned nil must not have its
		// savepoint kept (its RELEASE would fail in the next caller's
		// turn, which would then undo this caller's writes instead of its
		// own). It is undone and told.
		if b.begun && b.c.Conn().PgConn().TxStatus() == 'E' {
			return errAbortedUnreported
		}
		return nil
	})
	if err == nil {
		// Committed: the events fn read or accepted are true for good.
		s.events.Committed(rows)
	}
	return err
}
