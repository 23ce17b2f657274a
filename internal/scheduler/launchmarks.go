package scheduler

import (
	"context"
	"slices"
	"sync"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// launchMarks writes the launch marks of the segments prepared at about
// the same time together: one transaction and one statement
// (storage.Tx.MarkLaunched) for all of them, where each would otherwise be
// a transaction of its own (a savepoint, its update, its share of a
// commit). The first preparation to ask writes at once, for itself and
// whoever queued by then; those that ask meanwhile queue, and the first of
// them writes the next batch when that one ends. Nothing waits for a batch
// to fill, so a lone launch is marked as soon as it asks.
type launchMarks struct {
	mu      sync.Mutex
	queue   []*launchMark
	writing bool // a batch is being written; its writer hands on
}

// launchMark is one preparation's request.
type launchMark struct {
	ctx    context.Context
	launch storage.Launch
	// lead is closed when this request is to write the next batch.
	lead chan struct{}
	// done is closed once marked and err hold the outcome.
	done    chan struct{}
	leading bool // lead was closed (guarded by launchMarks.mu)
	marked  bool
	err     error
}

// markLaunched records, under the fence, that the segment of exe's epoch
// is handed to its executor now: the last write before a process may
// start. false: the epoch was superseded meanwhile (its new holder finds
// it never launched), and nothing may start.
//
// As with a transaction of its own: a request whose ctx ends before its
// batch is written is not marked and gets ctx's error; once its batch is
// being written, it waits for the batch's outcome whatever ctx says.
func (s *Scheduler) markLaunched(ctx context.Context, exe storage.Execution) (bool, error) {
	m := &launchMark{ctx: ctx, launch: storage.Launch{Execution: exe.ID, Epoch: exe.Epoch}, lead: make(chan struct{}), done: make(chan struct{})}
	lm := &s.marks
	lm.mu.Lock()
	lm.queue = append(lm.queue, m)
	if !lm.writing {
		lm.writing = true
		m.leading = true
		close(m.lead)
	}
	lm.mu.Unlock()
	select {
	case <-m.lead:
		s.writeMarks(ctx)
	case <-m.done:
	case <-ctx.Done():
		lm.mu.Lock()
		i := slices.Index(lm.queue, m)
		if i >= 0 && !m.leading {
			lm.queue = slices.Delete(lm.queue, i, i+1)
			lm.mu.Unlock()
			return false, ctx.Err()
		}
		lm.mu.Unlock()
		// Its batch is being written, or it is to write the next one.
		select {
		case <-m.lead:
			s.writeMarks(ctx)
		case <-m.done:
		}
	}
	<-m.done
	if m.err == nil && !m.marked {
		s.o.Logger.Info("attempt superseded before launch; not started", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch)
	}
	return m.marked, m.err
}

// writeMarks writes every queued launch mark in one transaction, tells
// each its outcome, and hands the next batch to the first request queued
// meanwhile. The caller holds the writer's turn (its request's lead).
func (s *Scheduler) writeMarks(ctx context.Context) {
	lm := &s.marks
	lm.mu.Lock()
	queued := lm.queue
	lm.queue = nil
	lm.mu.Unlock()
	// A request whose ctx ended before its batch began is not marked.
	var batch []*launchMark
	var launches []storage.Launch
	for _, m := range queued {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			close(m.done)
			continue
		}
		batch = append(batch, m)
		launches = append(launches, m.launch)
	}
	var marked []string
	var err error
	if len(batch) > 0 {
		wctx := context.WithoutCancel(ctx)
		err = s.store.WithTx(wctx, func(tx storage.Tx) error {
			var err error
			marked, err = tx.MarkLaunched(wctx, &storage.MarkLaunchedParams{Owner: s.o.Owner, Launches: launches, Now: s.now()})
			return err
		})
	}
	for _, m := range batch {
		m.err = err
		m.marked = err == nil && slices.Contains(marked, m.launch.Execution)
		close(m.done)
	}
	lm.mu.Lock()
	if len(lm.queue) > 0 {
		next := lm.queue[0]
		next.leading = true
		close(next.lead)
	} else {
		lm.writing = false
	}
	lm.mu.Unlock()
}
