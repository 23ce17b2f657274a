package postgres_test

import (
	"context"
	"errors"
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

// bound is how long a test waits for something that must happen; it is a
// failure bound, never a wait for a deadline.
const bound = 30 * time.Second

const probe storage.Topic = "probe"

// next is the next topic w delivers, failing after bound.
func next(t *testing.T, w <-chan storage.Topic) storage.Topic {
	t.Helper()
	select {
	case topic, ok := <-w:
		if !ok {
			t.Fatal("the watch ended")
		}
		return topic
	case <-time.After(bound):
		t.Fatalf("nothing delivered within %s", bound)
	}
	return ""
}

// drainConnect takes the deliveries of a (re)connection: each topic once.
func drainConnect(t *testing.T, w <-chan storage.Topic, topics ...storage.Topic) {
	t.Helper()
	got := map[storage.Topic]bool{}
	for range topics {
		got[next(t, w)] = true
	}
	for _, topic := range topics {
		if !got[topic] {
			t.Fatalf("a connection delivered %v, not every topic of %v", got, topics)
		}
	}
}

func generation(n int64) *storage.Generation {
	return &storage.Generation{Number: n, Hash: "h" + string(rune('0'+n)), Normalized: []byte(`{}`), Actor: "test", CreatedAt: storagetest.T0}
}

// TestWatchHearsCommittedGenerations: a generation committed through one
// store is announced to a watcher of another on the same schema; one
// rolled back is not, and neither is one committed on another schema of
// the same database. A probe notified afterwards shows that nothing came
// before it (notifications arrive in commit order).
func TestWatchHearsCommittedGenerations(t *testing.T) {
	c, _, ss := daemons(t, 2)
	a, b := ss[0], ss[1]
	other, err := openSchema(t, c, c.FreshSchema())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := b.Watch(ctx, storage.TopicConfig, probe, "Not-A-Topic")
	drainConnect(t, w, storage.TopicConfig, probe)

	if err := a.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertGeneration(ctx, generation(1)) }); err != nil {
		t.Fatal(err)
	}
	if got := next(t, w); got != storage.TopicConfig {
		t.Fatalf("after a commit through another store: %q, want %q", got, storage.TopicConfig)
	}

	rolledBack := errors.New("roll back")
	if err := a.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.InsertGeneration(ctx, generation(2)); err != nil {
			return err
		}
		return rolledBack
	}); !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if err := other.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertGeneration(ctx, generation(1)) }); err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if got := next(t, w); got != probe {
		t.Fatalf("after a rollback and another schema's commit: %q delivered before the probe", got)
	}
	if err := a.Notify(ctx, "Bad Topic"); err == nil {
		t.Fatal("Notify took a topic that is not lower-case letters")
	}
	cancel()
	select {
	case _, ok := <-w:
		if ok {
			// One delivery may still have been under way; the next read
			// must find the channel closed.
			if _, ok := <-w; ok {
				t.Fatal("the watch delivered after its context ended")
			}
		}
	case <-time.After(bound):
		t.Fatal("the watch's channel did not close when its context ended")
	}
}

// TestWatchReconnects: when the watcher's connection is lost, it says so,
// waits the backoff on the store's timer, connects again and delivers
// every topic once (what was announced meanwhile was not delivered).
func TestWatchReconnects(t *testing.T) {
	c := pgtest.Require(t)
	schema := c.FreshSchema()
	var mu sync.Mutex
	var waits []time.Duration
	events := make(chan error, 8)
	s, err := postgres.Open(context.Background(), postgres.Options{
		ConnString: c.ConnString("postgres"), Schema: schema, Clock: clock.System{},
		After: func(d time.Duration) <-chan time.Time {
			mu.Lock()
			waits = append(waits, d)
			mu.Unlock()
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		},
		OnListen: func(err error) { events <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := s.Watch(ctx, storage.TopicConfig)
	drainConnect(t, w, storage.TopicConfig)
	if err := <-events; err != nil {
		t.Fatalf("first connection: %v", err)
	}
	killer, err := openSchema(t, c, schema)
	if err != nil {
		t.Fatal(err)
	}
	// Through a plain connection of the test: terminate the watcher's.
	if killed := terminateWatchers(t, c.ConnString("postgres")); killed != 1 {
		t.Fatalf("terminated %d watcher connections, want 1", killed)
	}
	select {
	case err := <-events:
		if err == nil || !strings.Contains(err.Error(), "lost") {
			t.Fatalf("the loss was reported as %v", err)
		}
		if strings.Contains(err.Error(), c.Dir()) {
			t.Fatalf("the loss names the connection: %v", err)
		}
	case <-time.After(bound):
		t.Fatal("the loss of the connection was not reported")
	}
	drainConnect(t, w, storage.TopicConfig)
	if err := <-events; err != nil {
		t.Fatalf("reconnection: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 1 || waits[0] <= 0 {
		t.Fatalf("backoff waits = %v, want one before reconnecting", waits)
	}
	// Still listening after the reconnection.
	if err := killer.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertGeneration(ctx, generation(1)) }); err != nil {
		t.Fatal(err)
	}
	if got := next(t, w); got != storage.TopicConfig {
		t.Fatalf("after reconnecting: %q", got)
	}
}

// TestConfigDocuments: a document is kept by hash, the first one kept
// under a hash stays, and an unknown hash is ErrNotFound.
func TestConfigDocuments(t *testing.T) {
	_, _, ss := daemons(t, 2)
	ctx := context.Background()
	if _, err := ss[1].ConfigDocument(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown hash: %v, want ErrNotFound", err)
	}
	doc := []byte("{\"version\": 1,\n \"secrets\": {\"gh\": \"env:GH_TOKEN\"}}\n")
	if err := ss[0].PutConfigDocument(ctx, "abc", doc); err != nil {
		t.Fatal(err)
	}
	if err := ss[1].PutConfigDocument(ctx, "abc", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	got, err := ss[1].ConfigDocument(ctx, "abc")
	if err != nil || string(got) != string(doc) {
		t.Fatalf("document = %q, %v; want the first kept, byte for byte", got, err)
	}
}

// TestInspect: Inspect reports pending migrations of a schema no store
// opened, none once one did, and a version this release does not know,
// without creating or migrating anything; a refused connection does not
// repeat the connection string.
func TestInspect(t *testing.T) {
	c := pgtest.Require(t)
	ctx := context.Background()
	schema := c.FreshSchema()
	opts := postgres.Options{ConnString: c.ConnString("postgres"), Schema: schema}
	got, err := postgres.Inspect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Applied) != 0 || len(got.Pending) != len(got.Known) || len(got.Known) == 0 {
		t.Fatalf("a schema never opened: %+v, want everything pending", got)
	}
	s, err := openSchema(t, c, schema)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = postgres.Inspect(ctx, opts); err != nil || len(got.Pending) != 0 || len(got.Unknown) != 0 || len(got.Applied) != len(got.Known) {
		t.Fatalf("an opened schema: %+v, %v; want nothing pending", got, err)
	}
	execSQL(t, c.ConnString("postgres"), `INSERT INTO `+schema+`.schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`)
	if got, err = postgres.Inspect(ctx, opts); err != nil || len(got.Unknown) != 1 || got.Unknown[0] != 9999 {
		t.Fatalf("a newer release's schema: %+v, %v; want 9999 unknown", got, err)
	}
	s.Close()
	bad := postgres.Options{ConnString: "postgres://someone@127.0.0.1:1/nodb?connect_timeout=5"}
	if _, err := postgres.Inspect(ctx, bad); err == nil || strings.Contains(err.Error(), "someone") || strings.Contains(err.Error(), "nodb") {
		t.Fatalf("a refused connection: %v; want an error naming neither user nor database", err)
	}
}

// execSQL runs statement on a connection of its own.
func execSQL(t *testing.T, connString, statement string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, statement); err != nil {
		t.Fatal(err)
	}
}

// terminateWatchers ends every watcher's connection to the cluster and
// says how many there were.
func terminateWatchers(t *testing.T, connString string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'open-conduit-watch'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
