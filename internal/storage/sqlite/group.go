package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Group commit.
//
// Write transactions queue for the one writer connection. The first caller
// in the queue begins a SQLite transaction (a batch); then every caller, in
// queue order, takes its turn: it runs its own function, on its own
// goroutine, inside a SAVEPOINT of the batch. A function that fails (or
// panics, or ends its goroutine) is rolled back to its savepoint and its
// caller returns at once with its error; a function that succeeds releases
// its savepoint and its caller waits for the batch's COMMIT. The caller that
// ends its turn with nobody queued behind it (or the batch full) commits the
// batch, with the one fsync of synchronous=FULL, and tells every waiting
// caller the outcome; then the next queued caller begins the next batch.
// Nothing waits for a batch to fill: one writer alone commits exactly as it
// did before, and a batch holds whoever queued while the one before it was
// running.
//
// Functions run one at a time, each seeing the writes of those before it in
// its batch, so a batch commits what the same functions would have
// committed one transaction each, in the same order. The events' sequence
// (the next number after the highest one) stays gap-free: a rolled back
// savepoint takes its rows back before the next function allocates.

// maxBatch bounds the callers of one batch, so that a steady stream of
// writers still reaches a commit.
const maxBatch = 128

// member is one caller of WithTx.
type member struct {
	turn chan struct{} // closed when the caller may run its function
	done chan struct{} // closed once err holds its batch's outcome
	err  error
}

// batch is one SQLite transaction holding the savepoints of several
// callers. Only the caller holding the turn touches it.
type batch struct {
	tx      *sql.Tx
	size    int       // callers that took a turn in it
	waiting []*member // callers whose function succeeded, waiting for COMMIT
	// lost is set when SQLite ended the transaction under a caller (an
	// I/O error, a full disk): nothing of the batch can commit any more.
	lost error
}

var errClosed = errors.New("sqlite: the store is closed")

// errNotRun wraps the context's error of a caller that never ran.
func errNotRun(err error) error {
	return fmt.Errorf("sqlite: the transaction did not run: %w", err)
}

// WithTx runs fn in a write transaction, batched with the writes queued at
// the same time (see the group commit above).
//
// Context: a caller whose ctx ends while it waits for its turn leaves the
// queue and gets ctx's error, wrapped; its function never runs. Once its
// function has run, the caller waits for its batch's COMMIT whatever ctx
// says (a COMMIT is one fsync, and is never interrupted), so the answer is
// always the truth: nil means its writes are durable, an error that they
// are not. Queries inside fn fail with ctx's error once ctx has ended; one
// already running is never interrupted (an interrupted statement would
// roll back the whole batch, other callers' writes with it).
func (s *Store) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	m := &member{turn: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.queue = append(s.queue, m)
	if !s.busy {
		s.busy = true
		s.handOnLocked()
	}
	s.mu.Unlock()
	select {
	case <-m.turn:
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.queue, m); i >= 0 {
			s.queue = slices.Delete(s.queue, i, i+1)
			s.mu.Unlock()
			return errNotRun(ctx.Err())
		}
		s.mu.Unlock()
		<-m.turn // the turn was handed to it meanwhile
	}
	return s.takeTurn(ctx, m, fn)
}

// handOnLocked gives the turn to the first queued caller. s.mu is held.
func (s *Store) handOnLocked() {
	next := s.queue[0]
	s.queue = slices.Delete(s.queue, 0, 1)
	close(next.turn)
}

// takeTurn runs the caller's function in its savepoint of the open batch
// (beginning one when none is open), then passes the turn on.
func (s *Store) takeTurn(ctx context.Context, m *member, fn func(tx storage.Tx) error) error {
	if err := ctx.Err(); err != nil {
		s.passTurn()
		return errNotRun(err)
	}
	bg := context.Background()
	b := s.cur
	if b == nil {
		// The batch is not bound to any caller's context: a cancelled
		// caller must not roll back the others.
		sqlTx, err := s.writer.BeginTx(bg, nil)
		if err != nil {
			s.passTurn()
			return fmt.Errorf("sqlite: begin: %w", err)
		}
		b = &batch{tx: sqlTx}
		s.cur = b
	}
	b.size++
	// q is the caller's; ctl runs the savepoint's own statements, after q
	// has ended too.
	q, ctl := &txQuerier{tx: b.tx, c: s.wstmts}, &txQuerier{tx: b.tx, c: s.wstmts}
	if _, err := ctl.ExecContext(bg, `SAVEPOINT member`); err != nil {
		b.lost = err
		s.passTurn()
		return fmt.Errorf("sqlite: savepoint: %w", err)
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		// fn panicked (the panic goes on up the caller's stack) or ended
		// its goroutine: its writes are undone and the batch goes on.
		q.ended.Store(true)
		_ = s.undo(b, ctl)
		s.passTurn()
	}()
	err := fn(&tx{queries: queries{q: q}})
	finished = true
	q.ended.Store(true)
	if err != nil {
		if rerr := s.undo(b, ctl); rerr != nil {
			err = errors.Join(err, fmt.Errorf("sqlite: rollback: %w", rerr))
		}
		s.passTurn()
		return err
	}
	if _, err := ctl.ExecContext(bg, `RELEASE member`); err != nil {
		b.lost = err
		s.passTurn()
		return fmt.Errorf("sqlite: release savepoint: %w", err)
	}
	b.waiting = append(b.waiting, m)
	s.passTurn()
	<-m.done
	return m.err
}

// undo rolls a failed caller's writes back to its savepoint.
func (s *Store) undo(b *batch, ctl *txQuerier) error {
	bg := context.Background()
	_, err := ctl.ExecContext(bg, `ROLLBACK TO member`)
	if err == nil {
		_, err = ctl.ExecContext(bg, `RELEASE member`)
	}
	if err != nil {
		b.lost = err
	}
	return err
}

// passTurn ends the holder's turn: the next queued caller joins the open
// batch, or, when nobody is queued (or the batch is full or lost), the
// holder commits the batch and the next queued caller begins another.
//
// A batch of one caller with nobody queued yields its processor once
// (runtime.Gosched) before it commits: the goroutines already runnable,
// such as requests read and on their way to WithTx, run first, and those
// that queue meanwhile join this batch instead of waiting for its fsync
// and forming the next. Concurrent callers released together by one
// COMMIT otherwise split, batch after batch, into the first one back
// alone and all the others (measured in docs/performance.md). A larger
// batch does not yield: its callers are already in it, and a yield would
// only delay its commit. The yield waits for nothing: with nothing else
// runnable it returns at once, so a lone writer commits as before.
func (s *Store) passTurn() {
	b := s.cur
	if b != nil && b.lost == nil && b.size == 1 {
		s.mu.Lock()
		alone := len(s.queue) == 0
		s.mu.Unlock()
		if alone {
			runtime.Gosched()
		}
	}
	s.mu.Lock()
	if b != nil && b.lost == nil && b.size < maxBatch && len(s.queue) > 0 {
		s.handOnLocked()
		s.mu.Unlock()
		return
	}
	s.cur = nil
	s.mu.Unlock()
	if b != nil {
		s.finish(b)
	}
	s.mu.Lock()
	if len(s.queue) > 0 {
		s.handOnLocked()
	} else {
		s.busy = false
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// finish commits the batch (or rolls back one with nothing to commit, or
// one SQLite lost) and tells every waiting caller its outcome; it runs
// after the last function of the batch, on the writer's free connection.
func (s *Store) finish(b *batch) {
	var err error
	switch {
	case b.lost != nil:
		_ = b.tx.Rollback()
		err = fmt.Errorf("sqlite: the transaction was rolled back by the database: %w", b.lost)
	case len(b.waiting) == 0:
		_ = b.tx.Rollback()
	default:
		began := s.clock.Now()
		if cerr := b.tx.Commit(); cerr != nil {
			err = fmt.Errorf("sqlite: commit: %w", cerr)
			// A COMMIT SQLite refused (a deferred constraint, say) leaves
			// the transaction open on the connection, and database/sql
			// has let go of it: end it, so the next batch can begin.
			_, _ = s.writer.ExecContext(context.Background(), `ROLLBACK`)
		} else {
			s.batches.Add(1)
			if s.commit != nil {
				s.commit(s.clock.Now().Sub(began))
			}
		}
	}
	for _, m := range b.waiting {
		m.err = err
		close(m.done)
	}
	// The writer's connection is free again: prepare what the batch ran
	// unprepared.
	s.wstmts.flush(context.Background())
}
