package group

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a Batch that writes down what the committer asked of it;
// the stores' own tests run the committer on their engines.
type recorder struct {
	mu    *sync.Mutex
	log   *[]string
	name  string
	fails string // the call that fails
}

func (r *recorder) call(what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, r.name+" "+what)
	if what == r.fails {
		return errors.New(what + " failed")
	}
	return nil
}

func (r *recorder) Savepoint() error          { return r.call("savepoint") }
func (r *recorder) Release(func(error)) error { return r.call("release") }
func (r *recorder) Undo() error               { return r.call("undo") }
func (r *recorder) Commit() error             { return r.call("commit") }
func (r *recorder) Rollback()                 { _ = r.call("rollback") }

func newRecorded(fails string) (*Committer[*recorder], func() string) {
	var mu sync.Mutex
	var log []string
	n := 0
	c := New(Options[*recorder]{Engine: "test", Begin: func() (*recorder, error) {
		n++
		return &recorder{mu: &mu, log: &log, name: "b" + string(rune('0'+n)), fails: fails}, nil
	}})
	return c, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(log, ", ")
	}
}

// TestQueuedCallersShareABatch: callers queued while one runs join its
// batch, a failing one is undone without the others, and one COMMIT
// answers every kept caller.
func TestQueuedCallersShareABatch(t *testing.T) {
	c, log := newRecorded("")
	ctx := context.Background()
	hold, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = c.Run(ctx, func(*recorder) error { close(hold); <-release; return nil })
	}()
	<-hold
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Run(ctx, func(*recorder) error {
				if i == 2 {
					return errors.New("caller 2 fails")
				}
				return nil
			})
		}()
		for deadline := time.Now().Add(60 * time.Second); c.Queued() != i; {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for caller %d to queue", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(release)
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || errs[2] == nil || errs[2].Error() != "caller 2 fails" {
		t.Fatalf("outcomes %v, want nil, nil and caller 2's own error", errs)
	}
	want := "b1 savepoint, b1 release, b1 savepoint, b1 release, b1 savepoint, b1 undo, b1 commit"
	if got := log(); got != want {
		t.Fatalf("the batch was asked: %s\nwant: %s", got, want)
	}
}

// TestCommitFailureReachesEveryCaller: a failed COMMIT is every kept
// caller's error, and a lone failing caller's batch is rolled back, not
// committed.
func TestCommitFailureReachesEveryCaller(t *testing.T) {
	c, log := newRecorded("commit")
	err := c.Run(context.Background(), func(*recorder) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "test: commit: commit failed") {
		t.Fatalf("got %v, want the commit's failure", err)
	}
	if err := c.Run(context.Background(), func(*recorder) error { return errors.New("no") }); err == nil || err.Error() != "no" {
		t.Fatalf("got %v, want the caller's own error", err)
	}
	if got, want := log(), "b1 savepoint, b1 release, b1 commit, b2 savepoint, b2 undo, b2 rollback"; got != want {
		t.Fatalf("the batches were asked: %s\nwant: %s", got, want)
	}
}

// TestClosedRefuses: after Close, Run refuses without running anything.
func TestClosedRefuses(t *testing.T) {
	c, log := newRecorded("")
	if !c.Close() || c.Close() {
		t.Fatal("Close reported the wrong state")
	}
	ran := false
	err := c.Run(context.Background(), func(*recorder) error { ran = true; return nil })
	if !errors.Is(err, ErrClosed) || ran || log() != "" {
		t.Fatalf("after Close: %v, ran %v, batch asked %q", err, ran, log())
	}
}

// lateBatch is a Batch whose callers' writes fail after their turn: the
// late writes of the caller before fail at the next Savepoint, those of
// the last caller at the Commit.
type lateBatch struct {
	lates   []func(error)
	commits int
}

func (b *lateBatch) Savepoint() error {
	if n := len(b.lates); n == 1 {
		b.lates[0](errors.New("caller 0's late write failed"))
	}
	return nil
}
func (b *lateBatch) Release(late func(error)) error { b.lates = append(b.lates, late); return nil }
func (b *lateBatch) Undo() error                    { return nil }
func (b *lateBatch) Rollback()                      {}
func (b *lateBatch) Commit() error {
	b.lates[len(b.lates)-1](errors.New("the last caller's late write failed"))
	b.lates[len(b.lates)-1](errors.New("told twice")) // at most once: ignored
	b.commits++
	return nil
}

// TestLateFailureReachesItsCallerAlone: a kept caller whose writes fail
// after its turn returns that failure, once, and the batch goes on to
// commit the others.
func TestLateFailureReachesItsCallerAlone(t *testing.T) {
	var lb *lateBatch
	c := New(Options[*lateBatch]{Engine: "test", Begin: func() (*lateBatch, error) {
		lb = &lateBatch{}
		return lb, nil
	}})
	ctx := context.Background()
	hold, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = c.Run(ctx, func(*lateBatch) error { close(hold); <-release; return nil })
	}()
	<-hold
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Run(ctx, func(*lateBatch) error { return nil })
		}()
		for deadline := time.Now().Add(60 * time.Second); c.Queued() != i; {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting for caller %d to queue", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(release)
	wg.Wait()
	if errs[0] == nil || errs[0].Error() != "caller 0's late write failed" || errs[1] != nil ||
		errs[2] == nil || errs[2].Error() != "the last caller's late write failed" {
		t.Fatalf("outcomes %v, want caller 0's late failure, nil and the last caller's", errs)
	}
	if lb.commits != 1 || len(lb.lates) != 3 {
		t.Fatalf("%d commits and %d releases, want one batch of three", lb.commits, len(lb.lates))
	}
}
