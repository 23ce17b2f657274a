package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/postgres"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// Several stores on one schema stand for several daemons: each has its own
// pool and its own serialisation of WithTx, so whatever they share goes
// through the database alone.

func daemons(t *testing.T, n int) (*pgtest.Cluster, string, []*postgres.Store) {
	t.Helper()
	c := pgtest.Require(t)
	schema := c.FreshSchema()
	var out []*postgres.Store
	for range n {
		s, err := openSchema(t, c, schema)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return c, schema, out
}

func insertEvent(ctx context.Context, tx storage.Tx, id string) (storage.Event, error) {
	return tx.InsertEvent(ctx, &storage.InsertEventParams{ID: id, Type: "test.happened", Source: "test", Scope: "s1", Root: id, Data: []byte(`{}`), AcceptedAt: storagetest.T0})
}

// TestSequenceAcrossDaemons: events accepted at once through several
// stores, some transactions rolling back, form one gap-free sequence from
// 1; and a reader watching meanwhile never sees an event while one below
// it is still missing (the sequence increases in commit order, which wait
// watermarks and keyset pages depend on). A SEQUENCE object fails both.
func TestSequenceAcrossDaemons(t *testing.T) {
	_, _, ss := daemons(t, 4)
	ctx := context.Background()
	const rounds = 40
	var writers sync.WaitGroup
	committed := make(chan int, len(ss[:3])*rounds)
	for d, s := range ss[:3] {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for r := range rounds {
				n := 1 + r%3
				rollback := r%5 == 4
				err := s.WithTx(ctx, func(tx storage.Tx) error {
					for i := range n {
						if _, err := insertEvent(ctx, tx, fmt.Sprintf("evt_d%d_r%d_%d", d, r, i)); err != nil {
							return err
						}
					}
					// Work after numbering, before the commit: the window
					// in which a wrong sequence shows a hole.
					for range 3 {
						if _, err := tx.LastSeq(ctx); err != nil {
							return err
						}
					}
					if rollback {
						return errors.New("roll back")
					}
					return nil
				})
				if rollback != (err != nil) {
					t.Errorf("daemon %d round %d: %v", d, r, err)
					return
				}
				if err == nil {
					committed <- n
				}
			}
		}()
	}
	stop := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		reader := ss[3]
		checks := 0
		for {
			select {
			case <-stop:
				if checks == 0 {
					watched <- errors.New("the reader never looked")
				} else {
					watched <- nil
				}
				return
			default:
			}
			last, err := reader.LastSeq(ctx)
			if err != nil {
				watched <- err
				return
			}
			evs, err := reader.ListEvents(ctx, &storage.ListEventsParams{Limit: storage.MaxLimit})
			if err != nil {
				watched <- err
				return
			}
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					watched <- fmt.Errorf("the reader sees seq %d at position %d: a lower seq was not visible yet", e.Seq, i+1)
					return
				}
			}
			if last > int64(len(evs)) {
				watched <- fmt.Errorf("LastSeq was %d, then the reader saw only %d events", last, len(evs))
				return
			}
			checks++
		}
	}()
	writers.Wait()
	close(stop)
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	close(committed)
	total := 0
	for n := range committed {
		total += n
	}
	evs, err := ss[0].ListEvents(ctx, &storage.ListEventsParams{Limit: storage.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != total {
		t.Fatalf("%d events listed, %d committed", len(evs), total)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %s has seq %d, want %d: the sequence has a gap", e.ID, e.Seq, i+1)
		}
	}
	last, err := ss[1].LastSeq(ctx)
	if err != nil || last != int64(total) {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, total)
	}
}

// TestMigrationsOnceAcrossDaemons: stores opening a fresh schema at once
// all open, and the schema is migrated once.
func TestMigrationsOnceAcrossDaemons(t *testing.T) {
	c := pgtest.Require(t)
	schema := c.FreshSchema()
	const n = 5
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := openSchema(t, c, schema)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a store opening at the same time as others: %v", err)
		}
	}
	conn := rawConn(t, c)
	var rows, distinct int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*), COUNT(DISTINCT version) FROM `+schema+`.schema_migrations`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != distinct || rows == 0 {
		t.Fatalf("schema_migrations holds %d rows of %d versions: a migration was applied twice or none was", rows, distinct)
	}
}

func rawConn(t *testing.T, c *pgtest.Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitBlocked polls pg_stat_activity until n sessions wait on a lock: a
// real event, bounded generously.
func waitBlocked(t *testing.T, conn *pgx.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session waited on a lock within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDuplicateAcrossDaemons: a daemon inserting an id another daemon's
// open transaction holds waits for it, then gets ErrDuplicate with its
// transaction still usable (what it wrote before and after commits).
func TestDuplicateAcrossDaemons(t *testing.T) {
	c, _, ss := daemons(t, 2)
	ctx := context.Background()
	conn := rawConn(t, c)
	second := make(chan error, 1)
	err := ss[0].WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_x", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedAt: storagetest.T0}); err != nil {
			return err
		}
		go func() {
			second <- ss[1].WithTx(ctx, func(tx storage.Tx) error {
				if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_y", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedAt: storagetest.T0}); err != nil {
					return err
				}
				_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_x", Scope: "s1", Binding: "b2", State: storage.WorkReady, CreatedAt: storagetest.T0})
				if !errors.Is(err, storage.ErrDuplicate) {
					return fmt.Errorf("inserting a Work another daemon committed meanwhile: %v, want ErrDuplicate", err)
				}
				_, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_z", Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedAt: storagetest.T0})
				return err
			})
		}()
		waitBlocked(t, conn, 1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wrk_x", "wrk_y", "wrk_z"} {
		w, err := ss[0].GetWork(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if w.Binding != "b1" {
			t.Fatalf("%s has binding %s: the refused insert wrote", id, w.Binding)
		}
	}
}

// TestClaimsAcrossDaemons: a Work whose row another daemon's claim holds is
// not listed claimable (SKIP LOCKED) while that claim is open; and daemons
// claiming the same Work at once by its revision each take it at most
// once, one of them in all.
func TestClaimsAcrossDaemons(t *testing.T) {
	_, _, ss := daemons(t, 3)
	ctx := context.Background()
	const n = 30
	for i := range n {
		if _, err := storagetest.SeedWork(ctx, ss[0], fmt.Sprintf("wrk_%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	running := storage.WorkRunning
	err := ss[0].WithTx(ctx, func(tx storage.Tx) error {
		w, err := tx.GetWork(ctx, "wrk_00")
		if err != nil {
			return err
		}
		if _, err := tx.ClaimWork(ctx, &storage.ClaimWorkParams{Work: []storage.WorkRevision{{ID: w.ID, Revision: w.Revision}}, Now: storagetest.T0}); err != nil {
			return err
		}
		ws, err := ss[1].ListClaimable(ctx, 5)
		if err != nil {
			return err
		}
		if len(ws) != 5 || ws[0].ID != "wrk_01" {
			return fmt.Errorf("another daemon lists %v while wrk_00's claim is open; want wrk_01 first, five in all", ids(ws))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wins := make(chan string, 3*n)
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ws, err := s.ListClaimable(ctx, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ws) == 0 {
					return
				}
				for _, w := range ws {
					err := s.WithTx(ctx, func(tx storage.Tx) error {
						_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{storage.WorkReady}, Revision: w.Revision, State: &running, Now: storagetest.T0})
						return err
					})
					switch {
					case err == nil:
						wins <- w.ID
					case !errors.Is(err, storage.ErrFenced):
						t.Errorf("claim %s: %v", w.ID, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(wins)
	got := map[string]int{"wrk_00": 1}
	for id := range wins {
		got[id]++
	}
	for i := range n {
		id := fmt.Sprintf("wrk_%02d", i)
		if got[id] != 1 {
			t.Errorf("%s was claimed %d times, want once", id, got[id])
		}
	}
}

func ids(ws []storage.Work) string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return strings.Join(out, " ")
}

// TestOpenNeverRepeatsTheConnectionString: a connection string with a
// password that cannot connect, and one that does not parse, fail without
// the password (or the string) in the error.
func TestOpenNeverRepeatsTheConnectionString(t *testing.T) {
	const secret = "hunter2-very-secret"
	ctx := context.Background()
	for _, conn := range []string{
		"host=" + t.TempDir() + " user=someone password=" + secret + " dbname=db connect_timeout=5",
		"postgres://someone:" + secret + "@/db?host=" + t.TempDir() + "&connect_timeout=5",
		"postgres://someone:" + secret + "@localhost:notaport/db",
	} {
		_, err := postgres.Open(ctx, postgres.Options{ConnString: conn, Clock: clock.System{}})
		if err == nil {
			t.Fatalf("opening an unreachable database succeeded")
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "someone") {
			t.Fatalf("the error repeats the connection string: %v", err)
		}
		t.Logf("refused as it must: %v", err)
	}
}

func TestInlinePassword(t *testing.T) {
	for conn, want := range map[string]bool{
		"postgres://oc:pw@db/oc":                 true,
		"postgresql://oc:@db/oc":                 true,
		"postgres://oc@db/oc?password=pw":        true,
		"host=/run/pg user=oc password=pw":       true,
		"password = pw host=db":                  true,
		"postgres://oc@db/oc":                    false,
		"postgres://oc@db/oc?sslmode=require":    false,
		"host=/run/pg user=oc dbname=passwords":  false,
		"host=/run/pg user=oc passfile=/dev/nul": false,
	} {
		if got := postgres.InlinePassword(conn); got != want {
			t.Errorf("InlinePassword(%q) = %v, want %v", conn, got, want)
		}
	}
}
