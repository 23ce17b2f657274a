package scheduler_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
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
