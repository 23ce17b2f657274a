package scheduler_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Once an attempt's completion commits, the daemon's log says at INFO what
// became of it and of its Work, with their ids: a succeeded Work and a
// failed one, each with the attempt's result and exit status.
func TestAttemptOutcomesAreLogged(t *testing.T) {
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	h := newHarness(t, func(o *scheduler.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	})
	ok := h.create("b1")
	h.tick()
	h.finish(h.plain.Next(t), executor.Result{Outcome: executor.Succeeded, ExitCode: 0})
	bad := h.create("b1")
	h.tick()
	h.finish(h.plain.Next(t), executor.Result{Outcome: executor.Failed, ExitCode: 7, Message: "the command exited with status 7"})

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	line := func(work string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "attempt ended") && strings.Contains(l, "work="+work) {
				return l
			}
		}
		t.Fatalf("no outcome line for %s in:\n%s", work, out)
		return ""
	}
	if l := line(ok.ID); !strings.Contains(l, "level=INFO") || !strings.Contains(l, "work succeeded") || !strings.Contains(l, "exit_code=0") || !strings.Contains(l, "execution=exe_") {
		t.Errorf("succeeded Work's line: %s", l)
	}
	if l := line(bad.ID); !strings.Contains(l, "work failed") || !strings.Contains(l, "exit_code=7") || !strings.Contains(l, "result=failed") {
		t.Errorf("failed Work's line: %s", l)
	}
}

// readCounter counts the reads of executions and Work made on the store,
// outside any transaction.
type readCounter struct {
	storage.Store
	mu    sync.Mutex
	reads map[string]int
}

func (r *readCounter) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	r.mu.Lock()
	r.reads[id]++
	r.mu.Unlock()
	return r.Store.GetExecution(ctx, id)
}

func (r *readCounter) GetWork(ctx context.Context, id string) (storage.Work, error) {
	r.mu.Lock()
	r.reads[id]++
	r.mu.Unlock()
	return r.Store.GetWork(ctx, id)
}

// The outcome line comes from the rows the completion's transaction
// wrote and kept: logging it reads neither the execution nor the Work
// again.
func TestOutcomeLineReadsNothingAgain(t *testing.T) {
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	var rc *readCounter
	h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	}, func(s storage.Store) storage.Store { rc = &readCounter{Store: s, reads: map[string]int{}}; return rc })
	t.Cleanup(h.close)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	rc.mu.Lock()
	clear(rc.reads)
	rc.mu.Unlock()
	h.finish(seg, executor.Result{Outcome: executor.Succeeded, ExitCode: 0})
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "attempt ended; work succeeded") || !strings.Contains(out, "work="+w.ID) {
		t.Fatalf("no outcome line for %s in:\n%s", w.ID, out)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if n := rc.reads[seg.Req.ExecutionID] + rc.reads[w.ID]; n != 0 {
		t.Fatalf("the completion read its execution and Work %d times outside its transaction, want 0", n)
	}
}
