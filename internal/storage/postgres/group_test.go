package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/postgres"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// waitFor polls for a real event of the store, failing after a generous
// bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommitOneBatch holds the writer with one caller until every
// other has queued, so that all of them share one batch (one COMMIT): the
// ones that fail (one of them after a statement PostgreSQL refused, which
// aborts the transaction without its savepoint), panic or end their
// goroutine get their own outcome and leave nothing behind, a queued
// caller whose context is cancelled never runs, and the rest commit with a
// gap-free sequence, each seeing the writes before it. A second store on
// the schema then reads what is durable.
func TestGroupCommitOneBatch(t *testing.T) {
	c := pgtest.Require(t)
	schema := c.FreshSchema()
	var commits atomic.Int64
	s, err := postgres.Open(context.Background(), postgres.Options{ConnString: c.ConnString("postgres"), Schema: schema, Clock: clock.System{},
		OnCommit: func(time.Duration) { commits.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()

	const n = 40
	type outcome struct {
		err      error
		seq      int64
		sawLast  int64
		panicked any
		returned bool
	}
	var (
		outcomes [n]outcome
		wg       sync.WaitGroup
		holding  = make(chan struct{})
		release  = make(chan struct{})
	)
	fails := func(i int) bool { return i%5 == 3 }
	run := func(i int) {
		defer wg.Done()
		o := &outcomes[i]
		defer func() { o.panicked = recover() }()
		id := fmt.Sprint("evt_g", i)
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
			ev, err := insertEvent(ctx, tx, id)
			if err != nil {
				return err
			}
			o.seq = ev.Seq
			switch {
			case i == 7:
				panic("caller 7 panics")
			case i == 11:
				runtime.Goexit()
			case i == 13:
				// An event whose parent does not exist: the database
				// refuses the statement and aborts the transaction, which
				// only this caller's savepoint undoes.
				_, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: "evt_orphan", Type: "test.happened", Source: "test", Scope: "s1", Root: "evt_missing", Parent: "evt_missing", Depth: 1, Data: []byte(`{}`), AcceptedAt: storagetest.T0})
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
	before := commits.Load()
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
	waitFor(t, "every caller to queue", func() bool { return s.QueuedForTest() == n })
	cancel()
	if err := <-cancelledErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller got %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if ranCancelled {
		t.Fatal("the function of a caller cancelled in the queue ran")
	}
	if got := commits.Load() - before; got != 1 {
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
		case i == 13 || fails(i):
			if o.err == nil || o.err.Error() != fmt.Sprintf("caller %d fails", i) {
				t.Errorf("caller %d got %v, want its own error unchanged", i, o.err)
			}
		default:
			if o.err != nil {
				t.Errorf("caller %d: %v", i, o.err)
			}
			committed[fmt.Sprint("evt_g", i)] = o.seq
		}
		if o.seq != 0 && o.seq != o.sawLast+1 {
			t.Errorf("caller %d inserted seq %d after reading last seq %d", i, o.seq, o.sawLast)
		}
	}
	other, err := openSchema(t, c, schema)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := other.ListEvents(ctx, &storage.ListEventsParams{Limit: storage.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(committed) {
		t.Fatalf("the database holds %d events, want the %d committed", len(evs), len(committed))
	}
	for k, ev := range evs {
		if ev.Seq != int64(k+1) {
			t.Fatalf("event %d has seq %d: the sequence has a gap", k, ev.Seq)
		}
		if seq, ok := committed[ev.ID]; !ok || seq != ev.Seq {
			t.Errorf("event %s has seq %d in the database; committed with %d (%v)", ev.ID, ev.Seq, seq, ok)
		}
	}
}

// TestBatchesOfDaemonsNeverDeadlock: two daemons' batches each take a
// Work row's lock and the event counter's, in opposite orders by member.
// Each member alone is innocent; a batch keeps every member's locks until
// it commits, so batches that could hold one each would wait on each
// other and PostgreSQL would fail one (SQLSTATE 40P01). Every transaction
// must commit.
func TestBatchesOfDaemonsNeverDeadlock(t *testing.T) {
	_, _, ss := daemons(t, 2)
	ctx := context.Background()
	err := ss[0].WithTx(ctx, func(tx storage.Tx) error {
		for _, id := range []string{"a", "b"} {
			if _, err := insertEvent(ctx, tx, "evt_"+id); err != nil {
				return err
			}
			if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_" + id, Scope: "s1", Binding: "b", State: storage.WorkReady, CreatedEvent: "evt_" + id, CreatedAt: storagetest.T0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	touch := func(tx storage.Tx, work string) error {
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: work, Now: storagetest.T0})
		return err
	}
	const writers, rounds = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*rounds)
	var n atomic.Int64
	for d, s := range ss {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					err := s.WithTx(ctx, func(tx storage.Tx) error {
						work := []string{"wrk_a", "wrk_b"}[(d+w+r)%2]
						event := func() error {
							_, err := insertEvent(ctx, tx, fmt.Sprint("evt_", n.Add(1)))
							return err
						}
						if (w+r)%2 == 0 {
							if err := touch(tx, work); err != nil {
								return err
							}
							return event()
						}
						if err := event(); err != nil {
							return err
						}
						return touch(tx, work)
					})
					if err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a transaction failed: %v", err)
	}
}

// TestDeferredWritesTravelInOrder: a released key (a write that waits to
// travel with the caller's next statement) is released for that
// statement, and a turn whose last act is such a write still commits it.
func TestDeferredWritesTravelInOrder(t *testing.T) {
	_, _, ss := daemons(t, 2)
	s, other := ss[0], ss[1]
	ctx := context.Background()
	work := func(tx storage.Tx, id string) error {
		if _, err := insertEvent(ctx, tx, "evt_"+id); err != nil {
			return err
		}
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_" + id, Scope: "s1", Binding: "b", State: storage.WorkReady, CreatedEvent: "evt_" + id, CreatedAt: storagetest.T0})
		return err
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for _, id := range []string{"1", "2"} {
			if err := work(tx, id); err != nil {
				return err
			}
		}
		if err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "k", Work: "wrk_1", At: storagetest.T0}); err != nil {
			return err
		}
		if err := tx.ReleaseKeys(ctx, "wrk_1", storagetest.T0); err != nil {
			return err
		}
		if owner, err := tx.GetKeyOwner(ctx, "s1", "k"); !storage.IsNotFound(err) {
			return fmt.Errorf("after its release the key is owned by %q (%v)", owner.ID, err)
		}
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: "k", Work: "wrk_2", At: storagetest.T0})
	})
	if err != nil {
		t.Fatal(err)
	}
	// A turn that ends with the release: it is committed with the turn.
	if err := s.WithTx(ctx, func(tx storage.Tx) error { return tx.ReleaseKeys(ctx, "wrk_2", storagetest.T0) }); err != nil {
		t.Fatal(err)
	}
	if owner, err := other.GetKeyOwner(ctx, "s1", "k"); !storage.IsNotFound(err) {
		t.Fatalf("the key released at the end of a turn is owned by %q (%v)", owner.ID, err)
	}
	keys, err := other.ListKeysEverOwned(ctx, "wrk_2")
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("wrk_2 owned %v (%v), want [k]", keys, err)
	}
}
