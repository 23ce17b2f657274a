package storagetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Batching is what GroupCommitOneBatch needs of an engine whose store
// batches its write transactions (group commit): the store, how many
// callers wait for their turn, how many batches it has committed, and
// a way to read what is durable.
type Batching struct {
	Store   storage.Store
	Queued  func() int
	Batches func() int64
	// Durable returns a store that reads only what committed: the
	// database reopened, or another store on it.
	Durable func() storage.Store
}

// GroupCommitOneBatch holds the writer with one caller until n-1 others
// have queued, so that all of them share one batch: the ones that fail
// (one after a statement the engine refuses, which on PostgreSQL aborts
// the transaction but for the caller's savepoint, one right after a
// fresh event), panic or end their
// goroutine get their own outcome and leave nothing behind, a queued
// caller whose context is cancelled never runs, and the rest commit in one
// COMMIT with a gap-free sequence, each seeing the writes before it.
// Durable then shows exactly the committed callers' rows.
//
// It polls the queue (a real event of the store) with a generous bound;
// nothing in it waits for a deadline.
func GroupCommitOneBatch(t *testing.T, e Batching, n int) {
	t.Helper()
	s := e.Store
	ctx := context.Background()
	before := e.Batches()
	type outcome struct {
		err      error
		seq      int64
		sawLast  int64
		panicked any
		returned bool
	}
	var (
		outcomes = make([]outcome, n)
		wg       sync.WaitGroup
		holding  = make(chan struct{})
		release  = make(chan struct{})
	)
	fails := func(i int) bool { return i%5 == 3 }
	run := func(i int) {
		defer wg.Done()
		o := &outcomes[i]
		defer func() { o.panicked = recover() }()
		id := fmt.Sprint("g", i)
		o.err = s.WithTx(ctx, func(tx storage.Tx) error {
			if i == 0 {
				close(holding)
				<-release
			}
			last, err := tx.LastSeq(ctx)
			if err != nil {
				return err
			}
			o.sawLast = last
			// Odd callers' events are fresh, which an engine may send
			// with the caller's next statement.
			ev, err := insertEvent(ctx, tx, "evt_"+id, func(p *storage.InsertEventParams) { p.Fresh = i%2 == 1 })
			if err != nil {
				return err
			}
			o.seq = ev.Seq
			if i == 17 {
				// Fails with its fresh event its only write.
				return fmt.Errorf("caller %d fails", i)
			}
			if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_" + id, Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: ev.ID, CreatedAt: T0}); err != nil {
				return err
			}
			switch {
			case i == 7:
				panic("caller 7 panics")
			case i == 11:
				runtime.Goexit()
			case i == 13:
				// An event of a parent that does not exist: the engine
				// refuses the statement.
				_, err := insertEvent(ctx, tx, "evt_orphan", func(p *storage.InsertEventParams) { p.Parent, p.Root, p.Depth = "evt_missing", "evt_missing", 1 })
				if err == nil {
					return errors.New("caller 13: an event of a missing parent was accepted")
				}
				return fmt.Errorf("caller %d fails", i)
			case fails(i):
				return fmt.Errorf("caller %d fails", i)
			}
			return nil
		})
		o.returned = true
	}
	wg.Add(1)
	go run(0)
	<-holding
	for i := 1; i < n; i++ {
		wg.Add(1)
		go run(i)
	}
	cctx, cancel := context.WithCancel(ctx)
	ranCancelled := false
	cancelledErr := make(chan error, 1)
	go func() {
		cancelledErr <- s.WithTx(cctx, func(tx storage.Tx) error { ranCancelled = true; return nil })
	}()
	for deadline := time.Now().Add(60 * time.Second); e.Queued() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for every caller to queue (%d of %d)", e.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-cancelledErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller got %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if ranCancelled {
		t.Fatal("the function of a caller cancelled in the queue ran")
	}
	if got := e.Batches() - before; got != 1 {
		t.Fatalf("%d callers committed in %d batches, want 1", n, got)
	}
	committed := map[string]int64{}
	for i := range n {
		o := outcomes[i]
		switch {
		case i == 7:
			if o.panicked != "caller 7 panics" || o.returned {
				t.Errorf("caller 7: panic %v, returned %v; want its own panic", o.panicked, o.returned)
			}
		case i == 11:
			if o.returned || o.panicked != nil {
				t.Errorf("caller 11 ended its goroutine but returned %v (panic %v)", o.err, o.panicked)
			}
		case i == 13 || i == 17 || fails(i):
			if o.err == nil || o.err.Error() != fmt.Sprintf("caller %d fails", i) {
				t.Errorf("caller %d got %v, want its own error unchanged", i, o.err)
			}
		default:
			if o.err != nil {
				t.Errorf("caller %d: %v", i, o.err)
			}
			committed[fmt.Sprint("g", i)] = o.seq
		}
		// Each function saw the writes of those before it (the callers
		// ran in queue order, which only they know): its event took the
		// next number after the last it read.
		if o.seq != 0 && o.seq != o.sawLast+1 {
			t.Errorf("caller %d inserted seq %d after reading last seq %d", i, o.seq, o.sawLast)
		}
	}
	d := e.Durable()
	var evs []storage.Event
	for {
		page, err := d.ListEvents(ctx, &storage.ListEventsParams{AfterSeq: int64(len(evs)), Limit: storage.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, page...)
		if len(page) < storage.MaxLimit {
			break
		}
	}
	if len(evs) != len(committed) {
		t.Fatalf("the store holds %d events, want the %d committed", len(evs), len(committed))
	}
	for k, ev := range evs {
		if ev.Seq != int64(k+1) {
			t.Fatalf("event %d has seq %d: the sequence has a gap", k, ev.Seq)
		}
	}
	for i := range n {
		id := fmt.Sprint("g", i)
		seq, ok := committed[id]
		ev, err := d.GetEvent(ctx, "evt_"+id)
		_, werr := d.GetWork(ctx, "wrk_"+id)
		switch {
		case ok && (err != nil || ev.Seq != seq || werr != nil):
			t.Errorf("caller %d's rows: event %v (seq %d, written with %d), Work %v", i, err, ev.Seq, seq, werr)
		case !ok && (!storage.IsNotFound(err) || !storage.IsNotFound(werr)):
			t.Errorf("the rows of failed caller %d: event %v, Work %v; want not found", i, err, werr)
		}
	}
}
