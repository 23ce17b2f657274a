package postgres_test

import (
	"context"
	"fmt"
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

// TestGroupCommitOneBatch: callers queued together share one batch (one
// COMMIT) and each gets its own outcome (storagetest.GroupCommitOneBatch);
// a second store on the schema then reads what is durable.
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
	storagetest.GroupCommitOneBatch(t, storagetest.Batching{
		Store: s, Queued: s.QueuedForTest, Batches: commits.Load,
		Durable: func() storage.Store {
			other, err := openSchema(t, c, schema)
			if err != nil {
				t.Fatal(err)
			}
			return other
		},
	}, 40)
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

// TestSwallowedFailureIsNotCommitted: a caller that goes on after a
// statement PostgreSQL refused (which aborts the transaction) and returns
// nil gets an error, nothing of it commits, and the callers of its batch
// before and after it commit as if it had not been there.
func TestSwallowedFailureIsNotCommitted(t *testing.T) {
	_, _, ss := daemons(t, 2)
	s, other := ss[0], ss[1]
	ctx := context.Background()
	hold, release := make(chan struct{}), make(chan struct{})
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = s.WithTx(ctx, func(tx storage.Tx) error {
			close(hold)
			<-release
			_, err := insertEvent(ctx, tx, "evt_before")
			return err
		})
	}()
	<-hold
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs[1] = s.WithTx(ctx, func(tx storage.Tx) error {
			if _, err := insertEvent(ctx, tx, "evt_swallowed"); err != nil {
				return err
			}
			// Refused (a missing parent); the error is dropped.
			_, _ = tx.InsertEvent(ctx, &storage.InsertEventParams{ID: "evt_orphan", Type: "test.happened", Source: "test", Scope: "s1", Root: "evt_missing", Parent: "evt_missing", Depth: 1, Data: []byte(`{}`), AcceptedAt: storagetest.T0})
			return nil
		})
	}()
	waitQueued(t, s, 1)
	go func() {
		defer wg.Done()
		errs[2] = s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := insertEvent(ctx, tx, "evt_after")
			return err
		})
	}()
	waitQueued(t, s, 2)
	close(release)
	wg.Wait()
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("outcomes %v; want the swallowing caller alone to fail", errs)
	}
	for id, want := range map[string]bool{"evt_before": true, "evt_swallowed": false, "evt_after": true} {
		_, err := other.GetEvent(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("%s committed %v, want %v (%v)", id, got, want, err)
		}
	}
}

// waitQueued polls until n callers wait for their turn in s (a real
// event of the store), failing after a generous bound.
func waitQueued(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); s.QueuedForTest() != n; {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %d callers to queue", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLateWriteFailureUndoesItsCallerAlone: a caller's last write, whose
// result nobody reads, travels after its turn with the next caller's
// first statement, or before the COMMIT. When PostgreSQL refuses it (a
// NUL in a text), that caller alone fails and nothing of it commits, its
// event's number goes to the next event (no gap), and the callers around
// it commit, the statement that carried it answered as if it had not.
func TestLateWriteFailureUndoesItsCallerAlone(t *testing.T) {
	_, _, ss := daemons(t, 2)
	s, other := ss[0], ss[1]
	ctx := context.Background()
	fresh := func(tx storage.Tx, id string) (storage.Event, error) {
		return tx.InsertEvent(ctx, &storage.InsertEventParams{ID: id, Type: "test.happened", Source: "test", Scope: "s1", Root: id, Data: []byte(`{}`), AcceptedAt: storagetest.T0, Fresh: true})
	}
	record := func(tx storage.Tx, key string) error {
		return tx.PutIdempotency(ctx, &storage.IdempotencyRecord{Principal: "op", Key: key, Method: "POST", Path: "/v1/work", Status: 201, CreatedAt: storagetest.T0})
	}
	// A late failure: the event, sent with a read, and then the refused
	// record, the turn's last write.
	failing := func(id string) func(tx storage.Tx) error {
		return func(tx storage.Tx) error {
			if _, err := fresh(tx, id); err != nil {
				return err
			}
			if _, err := tx.GetKeyOwner(ctx, "s1", "k-"+id); !storage.IsNotFound(err) {
				return fmt.Errorf("the read that carried the event: %v", err)
			}
			return record(tx, "refused\x00"+id)
		}
	}
	hold, release := make(chan struct{}), make(chan struct{})
	errs := make([]error, 6)
	seqs := make([]int64, 6)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = s.WithTx(ctx, func(tx storage.Tx) error {
			close(hold)
			<-release
			e, err := fresh(tx, "evt_before")
			seqs[0] = e.Seq
			return err
		})
	}()
	<-hold
	callers := []func(tx storage.Tx) error{
		failing("evt_late"),
		func(tx storage.Tx) error {
			// Its first statement carries the refused record.
			if _, err := tx.GetEvent(ctx, "evt_before"); err != nil {
				return fmt.Errorf("the read that carried the late write: %w", err)
			}
			e, err := fresh(tx, "evt_after")
			seqs[2] = e.Seq
			if err != nil {
				return err
			}
			return record(tx, "kept")
		},
		failing("evt_mid"),
		func(tx storage.Tx) error {
			// Its first statement is a numbered event: the refused record
			// goes first, and the event has the undone caller's number.
			e, err := fresh(tx, "evt_after2")
			seqs[4] = e.Seq
			return err
		},
		failing("evt_last"), // refused before the COMMIT
	}
	for i, fn := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = s.WithTx(ctx, fn)
		}()
		waitQueued(t, s, i+1)
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || errs[1] == nil || errs[2] != nil || errs[3] == nil || errs[4] != nil || errs[5] == nil {
		t.Fatalf("outcomes %v; want the callers with a refused write alone to fail", errs)
	}
	if seqs[2] != seqs[0]+1 || seqs[4] != seqs[2]+1 {
		t.Errorf("evt_before, evt_after and evt_after2 are %d, %d and %d: an undone caller's number was not given back", seqs[0], seqs[2], seqs[4])
	}
	for id, want := range map[string]bool{"evt_before": true, "evt_late": false, "evt_after": true, "evt_mid": false, "evt_after2": true, "evt_last": false} {
		e, err := other.GetEvent(ctx, id)
		if got := err == nil; got != want {
			t.Errorf("%s committed %v, want %v (%v, seq %d)", id, got, want, err, e.Seq)
		}
	}
	if _, err := other.GetIdempotency(ctx, "op", "kept"); err != nil {
		t.Errorf("the kept caller's record: %v", err)
	}
	if last, err := other.LastSeq(ctx); err != nil || last != seqs[4] {
		t.Errorf("the counter is %d (%v), want %d: the batch moved it by undone events", last, err, seqs[4])
	}
	// The store goes on numbering from there.
	var next storage.Event
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		next, err = fresh(tx, "evt_next")
		return err
	}); err != nil || next.Seq != seqs[4]+1 {
		t.Fatalf("the next event: seq %d (%v), want %d", next.Seq, err, seqs[4]+1)
	}
}
