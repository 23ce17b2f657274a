// Package group is the group commit both coordination stores use: write
// transactions queue for one writer, and the ones queued together run as
// one engine transaction, each in a savepoint of its own, with one COMMIT
// (one fsync) for all of them.
//
// The first caller in the queue begins a batch; then every caller, in
// queue order, takes its turn: it runs its own function, on its own
// goroutine, inside its savepoint. A function that fails (or panics, or
// ends its goroutine) is rolled back to its savepoint and its caller
// returns at once with its error; a function that succeeds keeps its
// writes and its caller waits for the batch's COMMIT. The caller that ends
// its turn with nobody queued behind it (or the batch full) commits the
// batch and tells every waiting caller the outcome; then the next queued
// caller begins the next batch. Nothing waits for a batch to fill: a lone
// writer commits exactly as it would alone, and a batch holds whoever
// queued while the one before it was running.
//
// Functions run one at a time, each seeing the writes of those before it
// in its batch, so a batch commits what the same functions would have
// committed one transaction each, in the same order: writes stay
// serialised, as the storage contract requires.
//
// The package knows no engine and no SQL: an engine gives it a Begin that
// opens a Batch. It must never run two callers' functions at once, never
// return nil to a caller before that caller's batch committed, and never
// let one caller's failure undo another's writes.
package group

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
)

// Batch is one engine transaction holding the savepoints of several
// callers. Only the caller holding the turn uses it, and each method is
// called at most once per caller (Savepoint, then Release or Undo), and
// Commit or Rollback once per batch.
type Batch interface {
	// Savepoint opens the savepoint of the caller whose turn it is.
	Savepoint() error
	// Release keeps the caller's writes in the batch. An engine may leave
	// the savepoint's end to the next Savepoint or the Commit, and may
	// send the caller's last writes after its turn, with a later caller's
	// first statement: should they fail then, the engine rolls the
	// caller's writes back to its savepoint and calls late with their
	// error, during a later turn or the Commit, and the caller returns
	// that error instead of the batch's outcome. late is called at most
	// once, never during Release.
	Release(late func(error)) error
	// Undo rolls the caller's writes back to its savepoint.
	Undo() error
	// Commit makes every kept write durable.
	Commit() error
	// Rollback ends a batch that has nothing to commit or that the engine
	// lost.
	Rollback()
}

// Options configure a Committer.
type Options[B Batch] struct {
	// Begin opens a batch; it is called with the turn held.
	Begin func() (B, error)
	// Max bounds the callers of one batch, so that a steady stream of
	// writers still reaches a commit (128 when zero).
	Max int
	// Ended, when set, runs after each batch ended (committed, rolled
	// back or lost), before the next begins: the writer is free then.
	Ended func()
	// Engine prefixes the errors the committer makes ("sqlite").
	Engine string
}

// Committer queues the write transactions of one store.
type Committer[B Batch] struct {
	o Options[B]

	mu     sync.Mutex
	closed bool
	busy   bool      // the writer is taken: a batch is open or committing
	queue  []*member // callers waiting for their turn
	idle   sync.Cond // broadcast when busy turns false
	// cur is the open batch; only the caller holding the turn touches it.
	cur *batch[B]
}

// member is one caller of Run.
type member struct {
	turn chan struct{} // closed when the caller may run its function
	done chan struct{} // closed once err holds its batch's outcome
	err  error
}

// batch is an open Batch with what the committer knows of it.
type batch[B Batch] struct {
	b       B
	size    int       // callers that took a turn in it
	waiting []*member // callers whose function succeeded, waiting for COMMIT
	// lost is set when the engine ended the transaction under a caller
	// (an I/O error, a full disk, a lost connection): nothing of the batch
	// can commit any more.
	lost error
}

// New returns a Committer.
func New[B Batch](o Options[B]) *Committer[B] {
	if o.Max <= 0 {
		o.Max = 128
	}
	c := &Committer[B]{o: o}
	c.idle.L = &c.mu
	return c
}

// ErrClosed is the error of a transaction asked of a closed store.
var ErrClosed = errors.New("the store is closed")

// Run runs fn, in its turn, inside its savepoint of a batch (see the
// package comment).
//
// Context: a caller whose ctx ends while it waits for its turn leaves the
// queue and gets ctx's error, wrapped; its function never runs. Once its
// function has run, the caller waits for its batch's COMMIT whatever ctx
// says, so the answer is always the truth: nil means its writes are
// durable, an error that they are not. Making fn's statements heed ctx
// without disturbing the batch is the engine's part.
func (c *Committer[B]) Run(ctx context.Context, fn func(b B) error) error {
	m := &member{turn: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.errorf("%w", ErrClosed)
	}
	c.queue = append(c.queue, m)
	if !c.busy {
		c.busy = true
		c.handOnLocked()
	}
	c.mu.Unlock()
	select {
	case <-m.turn:
	case <-ctx.Done():
		c.mu.Lock()
		if i := slices.Index(c.queue, m); i >= 0 {
			c.queue = slices.Delete(c.queue, i, i+1)
			c.mu.Unlock()
			return c.notRun(ctx.Err())
		}
		c.mu.Unlock()
		<-m.turn // the turn was handed to it meanwhile
	}
	return c.takeTurn(ctx, m, fn)
}

// Close refuses new transactions and waits for the open batch to end.
// It reports whether the committer was open (the first Close).
func (c *Committer[B]) Close() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	for c.busy {
		c.idle.Wait()
	}
	return true
}

// Queued is how many callers wait for their turn.
func (c *Committer[B]) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

func (c *Committer[B]) errorf(format string, args ...any) error {
	return fmt.Errorf(c.o.Engine+": "+format, args...)
}

func (c *Committer[B]) notRun(err error) error {
	return c.errorf("the transaction did not run: %w", err)
}

// handOnLocked gives the turn to the first queued caller. c.mu is held.
func (c *Committer[B]) handOnLocked() {
	next := c.queue[0]
	c.queue = slices.Delete(c.queue, 0, 1)
	close(next.turn)
}

// takeTurn runs the caller's function in its savepoint of the open batch
// (beginning one when none is open), then passes the turn on.
func (c *Committer[B]) takeTurn(ctx context.Context, m *member, fn func(b B) error) error {
	if err := ctx.Err(); err != nil {
		c.passTurn()
		return c.notRun(err)
	}
	bt := c.cur
	if bt == nil {
		b, err := c.o.Begin()
		if err != nil {
			c.passTurn()
			return c.errorf("begin: %w", err)
		}
		bt = &batch[B]{b: b}
		c.cur = bt
	}
	bt.size++
	if err := bt.b.Savepoint(); err != nil {
		bt.lost = err
		c.passTurn()
		return c.errorf("savepoint: %w", err)
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		// fn panicked (the panic goes on up the caller's stack) or ended
		// its goroutine: its writes are undone and the batch goes on.
		c.undo(bt)
		c.passTurn()
	}()
	err := fn(bt.b)
	finished = true
	if err != nil {
		if rerr := c.undo(bt); rerr != nil {
			err = errors.Join(err, c.errorf("rollback: %w", rerr))
		}
		c.passTurn()
		return err
	}
	late := func(err error) {
		// Called by the turn's holder or the committer, who alone touch
		// bt: the caller leaves the waiting and has its own error.
		if i := slices.Index(bt.waiting, m); i >= 0 {
			bt.waiting = slices.Delete(bt.waiting, i, i+1)
			m.err = err
			close(m.done)
		}
	}
	if err := bt.b.Release(late); err != nil {
		bt.lost = err
		c.passTurn()
		return c.errorf("release savepoint: %w", err)
	}
	bt.waiting = append(bt.waiting, m)
	c.passTurn()
	<-m.done
	return m.err
}

// undo rolls a failed caller's writes back to its savepoint.
func (c *Committer[B]) undo(bt *batch[B]) error {
	err := bt.b.Undo()
	if err != nil {
		bt.lost = err
	}
	return err
}

// passTurn ends the holder's turn: the next queued caller joins the open
// batch, or, when nobody is queued (or the batch is full or lost), the
// holder commits the batch and the next queued caller begins another.
//
// A batch of one caller with nobody queued yields its processor once
// (runtime.Gosched) before it commits: the goroutines already runnable,
// such as requests read and on their way to Run, run first, and those
// that queue meanwhile join this batch instead of waiting for its commit
// and forming the next. Concurrent callers released together by one
// COMMIT otherwise split, batch after batch, into the first one back
// alone and all the others (measured in docs/performance.md). A larger
// batch does not yield: its callers are already in it, and a yield would
// only delay its commit. The yield waits for nothing: with nothing else
// runnable it returns at once, so a lone writer commits as before.
func (c *Committer[B]) passTurn() {
	bt := c.cur
	if bt != nil && bt.lost == nil && bt.size == 1 {
		c.mu.Lock()
		alone := len(c.queue) == 0
		c.mu.Unlock()
		if alone {
			runtime.Gosched()
		}
	}
	c.mu.Lock()
	if bt != nil && bt.lost == nil && bt.size < c.o.Max && len(c.queue) > 0 {
		c.handOnLocked()
		c.mu.Unlock()
		return
	}
	c.cur = nil
	c.mu.Unlock()
	if bt != nil {
		c.finish(bt)
	}
	c.mu.Lock()
	if len(c.queue) > 0 {
		c.handOnLocked()
	} else {
		c.busy = false
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

// finish commits the batch (or rolls back one with nothing to commit, or
// one the engine lost) and tells every waiting caller its outcome.
func (c *Committer[B]) finish(bt *batch[B]) {
	var err error
	switch {
	case bt.lost != nil:
		bt.b.Rollback()
		err = c.errorf("the transaction was rolled back by the database: %w", bt.lost)
	case len(bt.waiting) == 0:
		bt.b.Rollback()
	default:
		if cerr := bt.b.Commit(); cerr != nil {
			err = c.errorf("commit: %w", cerr)
		}
	}
	for _, m := range bt.waiting {
		m.err = err
		close(m.done)
	}
	if c.o.Ended != nil {
		c.o.Ended()
	}
}
