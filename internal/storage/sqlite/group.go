package sqlite

import (
	"context"
	"database/sql"

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

// batch is one SQLite transaction of the writer (a group.Batch). ctl runs
// the savepoints' own statements.
type batch struct {
	s   *Store
	tx  *sql.Tx
	ctl *txQuerier
}

func (s *Store) newCommitter() *group.Committer[*batch] {
	return group.New(group.Options[*batch]{
		Engine: "sqlite",
		Max:    maxBatch,
		Begin: func() (*batch, error) {
			// The batch is not bound to any caller's context: a cancelled
			// caller must not roll back the others.
			tx, err := s.writer.BeginTx(context.Background(), nil)
			if err != nil {
				return nil, err
			}
			return &batch{s: s, tx: tx, ctl: &txQuerier{tx: tx, c: s.wstmts}}, nil
		},
		// The writer's connection is free again: prepare what the batch
		// ran unprepared.
		Ended: func() { s.wstmts.flush(context.Background()) },
	})
}

func (b *batch) exec(query string) error {
	_, err := b.ctl.ExecContext(context.Background(), query)
	return err
}

func (b *batch) Savepoint() error { return b.exec(`SAVEPOINT member`) }
func (b *batch) Release() error   { return b.exec(`RELEASE member`) }

func (b *batch) Undo() error {
	if err := b.exec(`ROLLBACK TO member`); err != nil {
		return err
	}
	return b.exec(`RELEASE member`)
}

func (b *batch) Commit() error {
	began := b.s.clock.Now()
	if err := b.tx.Commit(); err != nil {
		// A COMMIT SQLite refused (a deferred constraint, say) leaves the
		// transaction open on the connection, and database/sql has let go
		// of it: end it, so the next batch can begin.
		_, _ = b.s.writer.ExecContext(context.Background(), `ROLLBACK`)
		return err
	}
	b.s.batches.Add(1)
	if b.s.commit != nil {
		b.s.commit(b.s.clock.Now().Sub(began))
	}
	return nil
}

func (b *batch) Rollback() { _ = b.tx.Rollback() }

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
		q := &txQuerier{tx: b.tx, c: s.wstmts, rows: rows}
		defer q.ended.Store(true)
		return fn(&tx{queries: queries{q: q}, rows: rows, events: s.events})
	})
	if err == nil {
		s.events.Committed(rows)
	}
	return err
}
