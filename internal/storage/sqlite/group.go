package sqlite

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/group"
)

// Group commit (internal/storage/group): write transactions queue for the
// one writer connection, and the ones queued together run as one SQLite
// transaction, each in a SAVEPOINT of its own, with the one fsync of
// synchronous=FULL at its COMMIT.
//
// The events' sequence (the next number after the highest one) stays
// gap-free: a rolled back savepoint takes its rows back before the next
// function allocates.

// maxBatch bounds the callers of one batch, so that a steady stream of
// writers still reaches a commit.
const maxBatch = 128

// batch is one SQLite transaction of the writer (a group.Batch), begun
// and ended by its own statements on the writer's held connection. ctl
// runs the batch's own statements.
type batch struct {
	s   *Store
	ctl *txQuerier
}

func (s *Store) newCommitter() *group.Committer[*batch] {
	return group.New(group.Options[*batch]{
		Engine: "sqlite",
		Max:    maxBatch,
		Begin: func() (*batch, error) {
			// The batch is not bound to any caller's context: a cancelled
			// caller must not roll back the others.
			b := &batch{s: s, ctl: &txQuerier{conn: s.wconn, c: s.wstmts}}
			if err := b.exec(`BEGIN IMMEDIATE`); err != nil {
				return nil, err
			}
			return b, nil
		},
	})
}

func (b *batch) exec(query string) error {
	_, err := b.ctl.ExecContext(context.Background(), query)
	return err
}

func (b *batch) Savepoint() error          { return b.exec(`SAVEPOINT member`) }
func (b *batch) Release(func(error)) error { return b.exec(`RELEASE member`) }

func (b *batch) Undo() error {
	if err := b.exec(`ROLLBACK TO member`); err != nil {
		return err
	}
	return b.exec(`RELEASE member`)
}

func (b *batch) Commit() error {
	began := b.s.clock.Now()
	if err := b.exec(`COMMIT`); err != nil {
		// A COMMIT SQLite refused (a deferred constraint, say) leaves the
		// transaction open on the connection: end it, so the next batch
		// can begin.
		b.Rollback()
		return err
	}
	b.s.batches.Add(1)
	if b.s.commit != nil {
		b.s.commit(b.s.clock.Now().Sub(began))
	}
	return nil
}

// Rollback ends the batch's transaction if one is open (SQLite may have
// rolled it back itself, after an I/O error say; a ROLLBACK then fails,
// harmlessly).
func (b *batch) Rollback() { _ = b.exec(`ROLLBACK`) }

// WithTx runs fn in a write transaction, batched with the writes queued at
// the same time (see the group commit above and group.Committer.Run).
//
// Queries inside fn fail with ctx's error once ctx has ended; one already
// running is never interrupted (an interrupted statement would roll back
// the whole batch, other callers' writes with it). Once fn has returned,
// its Tx refuses every query: a function that kept it must not write into
// another caller's savepoint.
//
// Once its batch has committed, the events fn read or accepted go into
// the store's cache of committed events.
func (s *Store) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	rows := &storage.TxRows{}
	err := s.group.Run(ctx, func(b *batch) error {
		q := &txQuerier{conn: s.wconn, c: s.wstmts, rows: rows}
		defer q.ended.Store(true)
		return fn(&tx{queries: queries{q: q}, rows: rows, events: s.events})
	})
	if err == nil {
		s.events.Committed(rows)
	}
	return err
}
