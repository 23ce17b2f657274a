package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

func open(t testing.TB, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openFresh(t *testing.T) storage.Store {
	return open(t, filepath.Join(t.TempDir(), "state.db"))
}

// engine is the SQLite store as the conformance suite opens it: a fresh
// file per case, opened again on the same path when a case reopens it.
var engine = storagetest.Engine{Name: "sqlite", Fresh: func(t *testing.T) func() (storage.Store, error) {
	path := filepath.Join(t.TempDir(), "state.db")
	return func() (storage.Store, error) {
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Clock: clock.System{}})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	}
}}

// TestConformance runs the whole storage contract against SQLite files,
// reopened where a case proves persistence.
func TestConformance(t *testing.T) {
	storagetest.ExerciseEngine(t, engine)
}

// TestConformanceNegativeControls runs every case against the deliberately
// wrong store it names: each must fail it. It fails when a case has no
// control, and when a control breaks more than its rule.
func TestConformanceNegativeControls(t *testing.T) {
	storagetest.CheckNegativeControls(t, engine)
}

// TestConformanceNegativeControl runs the suite against a store whose
// fenced updates ignore the epoch: the fencing cases must fail, or the suite
// proves nothing about fencing.
func TestConformanceNegativeControl(t *testing.T) {
	failures := storagetest.Failures(t, func(t *testing.T) storage.Store { return storagetest.EpochBlind(openFresh(t)) })
	for _, name := range []string{"execution_update_fenced", "execution_lease_renew_fenced"} {
		if failures[name] == nil {
			t.Errorf("case %s passed against the epoch-blind store", name)
		} else {
			t.Logf("%s failed as it must: %v", name, failures[name])
		}
	}
	// And the cases that do not touch fencing still pass, so the wrapper
	// is otherwise a working store.
	if failures["event_seq_gap_free"] != nil || failures["work_keys_exclusive"] != nil {
		t.Errorf("the wrapper broke more than fencing: %v", failures)
	}
}

func TestOpenSettings(t *testing.T) {
	s := openFresh(t).(*sqlite.Store)
	ctx := context.Background()
	for name, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "synchronous": "2", "busy_timeout": "5000", "temp_store": "2"} {
		got, err := s.Pragma(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", name, got, want)
		}
	}
	v, err := s.SchemaVersion(ctx)
	if err != nil || v < 1 {
		t.Fatalf("schema version = %d, %v", v, err)
	}
	// Foreign keys are enforced: an event cannot name a parent that does
	// not exist.
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: "evt_1", Type: "a.b", Source: "t", Scope: "s", Root: "evt_0", Parent: "evt_0", Data: []byte(`{}`)})
		return err
	})
	if err == nil {
		t.Fatal("an event with a missing parent was accepted: foreign keys are off")
	}
	if _, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "x.db"), Synchronous: "OFF", Clock: clock.System{}}); err == nil {
		t.Fatal("synchronous OFF was accepted")
	}
}

// TestPersistence closes and reopens the file: what committed is there,
// what rolled back is not, the sequence continues without a gap, and the
// migrations are not applied twice.
func TestPersistence(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(s storage.Store, id string) error {
		return s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: id, Type: "a.b", Source: "t", Scope: "s", Root: id, Data: []byte(`{"n":1}`), DeliveryID: id})
			return err
		})
	}
	if err := insert(s, "evt_1"); err != nil {
		t.Fatal(err)
	}
	_ = s.WithTx(ctx, func(tx storage.Tx) error {
		_, _ = tx.InsertEvent(ctx, &storage.InsertEventParams{ID: "evt_lost", Type: "a.b", Source: "t", Scope: "s", Root: "evt_lost", Data: []byte(`{}`)})
		return errors.New("roll back")
	})
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_1", Scope: "s", Binding: "b", State: storage.WorkReady, CreatedAt: storagetest.T0})
		if err != nil {
			return err
		}
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s", Key: "k", Work: "wrk_1", At: storagetest.T0})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, path)
	if v, _ := s2.SchemaVersion(ctx); v < 1 {
		t.Errorf("schema version after reopen = %d", v)
	}
	e, err := s2.GetEvent(ctx, "evt_1")
	if err != nil || string(e.Data) != `{"n":1}` || e.Seq != 1 {
		t.Fatalf("evt_1 after reopen = %+v, %v", e, err)
	}
	if _, err := s2.GetEvent(ctx, "evt_lost"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a rolled-back event survived: %v", err)
	}
	if owner, err := s2.GetKeyOwner(ctx, "s", "k"); err != nil || owner.ID != "wrk_1" {
		t.Fatalf("key owner after reopen = %+v, %v", owner, err)
	}
	if err := insert(s2, "evt_1"); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("the delivery identity was forgotten across a reopen: %v", err)
	}
	if err := insert(s2, "evt_2"); err != nil {
		t.Fatal(err)
	}
	if e, _ := s2.GetEvent(ctx, "evt_2"); e.Seq != 2 {
		t.Fatalf("seq after reopen = %d, want 2", e.Seq)
	}
}

func TestArtifactsBytes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s := open(t, path)
	if _, err := storagetest.SeedExecution(ctx, s, "wrk_1", "exe_1"); err != nil {
		t.Fatal(err)
	}
	arts, err := storage.NewArtifacts(s, filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("line of log\n", 1000)
	meta, err := arts.Put(ctx, storage.Artifact{ID: "art_1", Execution: "exe_1", Work: "wrk_1", Name: "log", MediaType: "text/plain; charset=utf-8", CreatedAt: storagetest.T0}, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size != int64(len(body)) || len(meta.SHA256) != 64 {
		t.Fatalf("metadata = %+v", meta)
	}
	// A failed commit leaves no visible artifact and no file.
	if _, err := arts.Put(ctx, storage.Artifact{ID: "art_2", Execution: "exe_missing", Work: "wrk_1", Name: "log", MediaType: "text/plain", CreatedAt: storagetest.T0}, strings.NewReader("x")); err == nil {
		t.Fatal("an artifact of a missing execution was stored")
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts", "art_2")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the discarded artifact's bytes remain: %v", err)
	}
	if _, err := arts.Put(ctx, storage.Artifact{ID: "../escape", Execution: "exe_1"}, strings.NewReader("x")); err == nil {
		t.Fatal("an artifact id with a path was accepted")
	}
	// A second Put under a committed id is a duplicate and takes nothing
	// of the committed artifact with it: its bytes stay readable.
	if _, err := arts.Put(ctx, storage.Artifact{ID: "art_1", Execution: "exe_1", Work: "wrk_1", Name: "log", MediaType: "text/plain", CreatedAt: storagetest.T0}, strings.NewReader("other")); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("a second Put of art_1 = %v, want ErrDuplicate", err)
	}
	if _, f, err := arts.Open(ctx, "art_1"); err != nil {
		t.Fatalf("the committed artifact after a refused Put: %v", err)
	} else {
		got, _ := io.ReadAll(f)
		f.Close()
		if string(got) != body {
			t.Fatalf("the committed artifact's bytes changed: %d bytes", len(got))
		}
	}
	s.Close()

	// Reopen and read a range.
	s2 := open(t, path)
	arts2, err := storage.NewArtifacts(s2, filepath.Join(dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	got, f, err := arts2.Open(ctx, "art_1")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	part := make([]byte, 11)
	if _, err := f.ReadAt(part, 12); err != nil {
		t.Fatal(err)
	}
	if string(part) != "line of log" || got.Name != "log" {
		t.Fatalf("range read = %q, meta %+v", part, got)
	}
	all, _ := io.ReadAll(f)
	if !bytes.Equal(all, []byte(body)) {
		t.Fatal("artifact bytes differ after reopen")
	}
	if _, _, err := arts2.Open(ctx, "art_2"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Open of an uncommitted artifact: %v", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	// Simulate a database written by a later release.
	if err := s.WithTx(ctx, func(tx storage.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, err := sqlite.RawForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (9999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}

// Open takes its clock from the caller: without one it refuses, naming it.
func TestOpenRefusesNoClock(t *testing.T) {
	_, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "x.db")})
	if err == nil || !strings.Contains(err.Error(), "Clock") {
		t.Fatalf("Open without a clock: %v, want a refusal naming it", err)
	}
}
