package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// writeOne is one caller's write: an event and the Work it created, two
// rows that commit together or not at all.
func writeOne(ctx context.Context, tx storage.Tx, id string) (storage.Event, error) {
	ev, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: "evt_" + id, Type: "t.write", Source: "test", Scope: "s", Root: "evt_" + id, Data: []byte(`{}`), AcceptedAt: storagetest.T0})
	if err != nil {
		return ev, err
	}
	_, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_" + id, Scope: "s", Binding: "b", State: storage.WorkReady, CreatedEvent: ev.ID, CreatedAt: storagetest.T0})
	return ev, err
}

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

// TestGroupCommitOneBatch: callers queued together share one batch and
// each gets its own outcome (storagetest.GroupCommitOneBatch); the file is
// then reopened to check what is durable.
func TestGroupCommitOneBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	storagetest.GroupCommitOneBatch(t, storagetest.Batching{
		Store: s, Queued: s.QueuedForTest, Batches: s.BatchesForTest,
		Durable: func() storage.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, path)
		},
	}, 64)
}

// TestGroupCommitFailureFailsTheBatch makes COMMIT itself fail (a deferred
// foreign key one caller broke): every caller of the batch gets the error,
// nothing of it is in the file, and the next batch works.
func TestGroupCommitFailureFailsTheBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		fn := func(tx storage.Tx) error {
			if i == 0 {
				close(holding)
				<-release
			}
			if i == 3 {
				// Checked at COMMIT only: the savepoint releases fine.
				if err := sqlite.ExecForTest(ctx, tx, `PRAGMA defer_foreign_keys = ON`); err != nil {
					return err
				}
				_, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: "evt_orphan", Type: "t.write", Source: "test", Scope: "s", Root: "evt_orphan", Parent: "evt_missing", Data: []byte(`{}`)})
				return err
			}
			if _, err := writeOne(ctx, tx, fmt.Sprint("c", i)); err != nil {
				return err
			}
			// Reading the batch's events inside it, its own and an
			// earlier caller's, must not put them in the store's cache
			// of committed events: this batch never commits.
			for j := range n {
				_, _ = tx.GetEvent(ctx, fmt.Sprint("evt_c", j))
			}
			return nil
		}
		go func() { defer wg.Done(); errs[i] = s.WithTx(ctx, fn) }()
		if i == 0 {
			<-holding
		}
	}
	waitFor(t, "every caller to queue", func() bool { return s.QueuedForTest() == n-1 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "sqlite: commit") {
			t.Errorf("caller %d got %v, want the commit's failure", i, err)
		}
	}
	for j := range n {
		if ev, err := s.GetEvent(ctx, fmt.Sprint("evt_c", j)); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("after the failed batch, GetEvent(evt_c%d) = %+v, %v; want not found", j, ev, err)
		}
	}
	if err := s.WithTx(ctx, func(tx storage.Tx) error { _, err := writeOne(ctx, tx, "after"); return err }); err != nil {
		t.Fatalf("the store does not work after a failed commit: %v", err)
	}
	s.Close()
	s2 := open(t, path)
	evs := allEvents(t, s2)
	if len(evs) != 1 || evs[0].ID != "evt_after" || evs[0].Seq != 1 {
		t.Fatalf("after a failed batch the file holds %+v, want only evt_after at seq 1", evs)
	}
}

// allEvents reads every event, page by page.
func allEvents(t *testing.T, s storage.Store) []storage.Event {
	t.Helper()
	var out []storage.Event
	for {
		page, err := s.ListEvents(context.Background(), &storage.ListEventsParams{AfterSeq: int64(len(out)), Limit: storage.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < storage.MaxLimit {
			return out
		}
	}
}

// TestGroupCommitCancelledAfterItsTurn: a caller whose function ran and
// whose context ends while its batch commits gets the batch's real outcome
// (nil: its write is durable), never a context error for a write that
// committed.
func TestGroupCommitCancelledAfterItsTurn(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := context.Background()
	holding, release := make(chan struct{}), make(chan struct{})
	cctx, cancel := context.WithCancel(ctx)
	firstIn, firstGo := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.WithTx(cctx, func(tx storage.Tx) error {
			close(firstIn)
			<-firstGo
			_, err := writeOne(ctx, tx, "first")
			return err
		})
	}()
	<-firstIn
	// The second caller queues behind the first, so it joins its batch
	// and holds it open while the first caller waits for the COMMIT; the
	// first caller's context ends meanwhile.
	second := make(chan error, 1)
	go func() {
		second <- s.WithTx(ctx, func(tx storage.Tx) error {
			close(holding)
			<-release
			_, err := writeOne(ctx, tx, "second")
			return err
		})
	}()
	waitFor(t, "the second caller to queue", func() bool { return s.QueuedForTest() == 1 })
	close(firstGo)
	<-holding
	cancel()
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the cancelled caller whose write committed got %v", err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"wrk_first", "wrk_second"} {
		if _, err := s.GetWork(ctx, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// The crash test's child: GROUPCOMMIT_CRASH_CHILD names the database.
const crashChildEnv = "OPEN_CONDUIT_GROUPCOMMIT_CRASH_CHILD"

// TestGroupCommitCrash runs the test binary again as a child that writes
// from 16 goroutines at once (so batches form) and acknowledges each
// write on its stdout once WithTx returned nil; some writes fail on
// purpose. The parent kills it with SIGKILL in mid-run, reopens the file
// and checks that every acknowledged write is there, that no caller's
// write is there in part, that no failed write is there, and that the
// sequence has no gap.
func TestGroupCommitCrash(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestGroupCommitCrash$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	acked := map[string]bool{}
	lines := bufio.NewScanner(out)
	const killAfter = 400
	killed := false
	for lines.Scan() {
		line := lines.Text()
		id, ok := strings.CutPrefix(line, "ok ")
		if !ok {
			t.Fatalf("the child said %q", line)
		}
		acked[id] = true
		if len(acked) == killAfter && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("the child ended before it was killed (%d acknowledged): %v", len(acked), err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, want SIGKILL", err)
	}

	s := open(t, path)
	ctx := context.Background()
	evs := allEvents(t, s)
	present := map[string]bool{}
	for k, ev := range evs {
		if ev.Seq != int64(k+1) {
			t.Fatalf("event %d has seq %d: the sequence has a gap", k, ev.Seq)
		}
		id := strings.TrimPrefix(ev.ID, "evt_")
		present[id] = true
		if strings.HasSuffix(id, "-fail") {
			t.Errorf("the failed write %s is in the file", id)
		}
		if _, err := s.GetWork(ctx, "wrk_"+id); err != nil {
			t.Errorf("write %s is in the file in part: its event without its Work (%v)", id, err)
		}
	}
	tally, err := s.TallyWork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	works := 0
	for _, c := range tally {
		works += c.Count
	}
	if works != len(evs) {
		t.Errorf("the file holds %d Work and %d events: some write is there in part", works, len(evs))
	}
	for id := range acked {
		if !present[id] {
			t.Errorf("acknowledged write %s is not in the file", id)
		}
	}
	t.Logf("%d writes acknowledged, %d in the file after SIGKILL", len(acked), len(evs))
}

func crashChild(path string) {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx := context.Background()
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	for g := range 16 {
		go func() {
			for k := 0; ; k++ {
				id, fail := fmt.Sprintf("c%d-%d", g, k), k%7 == 6
				if fail {
					id += "-fail"
				}
				err := s.WithTx(ctx, func(tx storage.Tx) error {
					if _, err := writeOne(ctx, tx, id); err != nil {
						return err
					}
					if fail {
						return errors.New("fails on purpose")
					}
					return nil
				})
				mu.Lock()
				switch {
				case fail && err == nil:
					fmt.Fprintf(out, "a failing write committed: %s\n", id)
				case !fail && err != nil:
					fmt.Fprintf(out, "write %s: %v\n", id, err)
				case !fail:
					fmt.Fprintf(out, "ok %s\n", id)
				}
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {} // until killed
}
