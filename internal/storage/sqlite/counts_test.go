package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// insertWork inserts n Work in state, held with reason when it is not "".
func insertWork(t testing.TB, s storage.Store, prefix string, n int, state storage.WorkState, reason string) {
	t.Helper()
	ctx := context.Background()
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range n {
			id := fmt.Sprintf("wrk_%s%d", prefix, i)
			if _, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: id, Scope: "s", Binding: "b", State: state, CreatedAt: storagetest.T0}); err != nil {
				return err
			}
			if reason != "" {
				if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: id, BlockedReason: &reason, Now: storagetest.T0}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTallyWork(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := context.Background()
	if got, err := s.TallyWork(ctx); err != nil || len(got) != 0 {
		t.Fatalf("an empty store tallies %v, %v", got, err)
	}
	insertWork(t, s, "r", 3, storage.WorkReady, "")
	insertWork(t, s, "h", 2, storage.WorkReady, "secret_unavailable")
	insertWork(t, s, "s", 1, storage.WorkSucceeded, "")
	got, err := s.TallyWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []sqlite.WorkCount{
		{State: storage.WorkReady, Count: 3},
		{State: storage.WorkReady, BlockedReason: "secret_unavailable", Count: 2},
		{State: storage.WorkSucceeded, Count: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tally = %v, want %v", got, want)
	}
}

// stepClock moves by step at every reading, so a commit's measured
// duration is exactly one step.
type stepClock struct {
	now  time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time { c.now = c.now.Add(c.step); return c.now }

func TestOnCommitTimesEachCommit(t *testing.T) {
	var got []time.Duration
	ck := &stepClock{now: storagetest.T0, step: 3 * time.Millisecond}
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "x.db"), Clock: ck, OnCommit: func(d time.Duration) { got = append(got, d) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got = nil // the migrations' own commits
	insertWork(t, s, "a", 1, storage.WorkReady, "")
	// A rolled back transaction commits nothing and is not timed.
	_ = s.WithTx(context.Background(), func(storage.Tx) error { return fmt.Errorf("roll back") })
	if len(got) != 1 || got[0] != ck.step {
		t.Fatalf("commits timed %v, want one of %v", got, ck.step)
	}
}

// BenchmarkTallyWork measures the scrape-time count over 100,000 Work.
func BenchmarkTallyWork(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "state.db"))
	insertWork(b, s, "r", 50_000, storage.WorkSucceeded, "")
	insertWork(b, s, "f", 40_000, storage.WorkFailed, "")
	insertWork(b, s, "q", 10_000, storage.WorkReady, "")
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.TallyWork(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// insertExecutions inserts n finished executions with result (running
// ones when result is ""), each of its own Work.
func insertExecutions(t testing.TB, s storage.Store, prefix string, n int, result storage.ExecutionResult) {
	t.Helper()
	insertWork(t, s, "e"+prefix, n, storage.WorkRunning, "")
	ctx := context.Background()
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range n {
			id := fmt.Sprintf("exe_%s%d", prefix, i)
			_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: id, Work: fmt.Sprintf("wrk_e%s%d", prefix, i), Scope: "s", Binding: "b", Executor: "shell",
				Generation: 1, Owner: "dmn_1", LeaseExpiresAt: storagetest.T0.Add(time.Minute), Deadline: storagetest.T0.Add(time.Hour), CreatedAt: storagetest.T0})
			if err != nil || result == "" {
				return err
			}
			st := storage.ExecutionFinished
			if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: id, Epoch: 1, State: &st, Result: &result, Now: storagetest.T0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTallyExecutions(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	insertExecutions(t, s, "r", 1, "")
	insertExecutions(t, s, "s", 2, storage.ResultSucceeded)
	insertExecutions(t, s, "f", 3, storage.ResultFailed)
	got, err := s.TallyExecutions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []sqlite.ExecutionCount{
		{State: storage.ExecutionFinished, Result: storage.ResultFailed, Count: 3},
		{State: storage.ExecutionFinished, Result: storage.ResultSucceeded, Count: 2},
		{State: storage.ExecutionRunning, Count: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tally = %v, want %v", got, want)
	}
}

// BenchmarkTallyExecutions measures the scrape-time count over 100,000
// executions.
func BenchmarkTallyExecutions(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "state.db"))
	insertExecutions(b, s, "s", 60_000, storage.ResultSucceeded)
	insertExecutions(b, s, "f", 40_000, storage.ResultFailed)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.TallyExecutions(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
