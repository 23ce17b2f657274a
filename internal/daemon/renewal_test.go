package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// gate blocks the daemon's scheduler round (in its ticked hook) while it is
// closed, and says when a round is held there.
type gate struct {
	mu     sync.Mutex
	open   chan struct{}
	inside chan struct{}
}

func (g *gate) ticked() {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if open == nil {
		return
	}
	select {
	case g.inside <- struct{}{}:
	default:
	}
	<-open
}

func (g *gate) close() {
	g.mu.Lock()
	g.open, g.inside = make(chan struct{}), make(chan struct{}, 1)
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
	g.mu.Unlock()
}

// Lease renewal does not wait behind a scheduler round: while a round is
// blocked (as one resolving a slow secret for a claim would be), a lease
// change still renews the running attempt at once.
func TestLeaseRenewalDoesNotWaitForASchedulerRound(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(state)
	mark := filepath.Join(dir, "mark")
	if err := os.WriteFile(filepath.Join(state, ConfigFile), heldJobConfig(t, dir, mark, map[string]any{"lease": "30s"}), 0o600); err != nil {
		t.Fatal(err)
	}
	g := &gate{}
	t.Cleanup(g.release)
	r := start(t, state, func(o *Options) { o.ticked = g.ticked })
	w := r.create("t", "job")
	t.Cleanup(func() {
		if f, err := os.OpenFile(filepath.Join(dir, w.ID), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.WriteString("0\n")
			f.Close()
		}
	})
	waitFile(t, mark, "started "+w.ID)

	// Hold the loop inside a scheduler round.
	g.close()
	r.d.Wake()
	select {
	case <-g.inside:
	case <-time.After(guard):
		t.Fatal("no scheduler round ran")
	}

	// The lease changes while the round is held: renewal must not wait.
	before := time.Now()
	lim := r.d.sched.Limits()
	lim.Lease = 10 * time.Minute
	r.d.sched.SetLimits(lim)
	select {
	case r.d.limitsApplied <- struct{}{}:
	default:
	}
	deadline := time.Now().Add(guard)
	for !strings.Contains(r.logs.String(), `"msg":"lease renewal re-paced"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no lease was renewed while a scheduler round was held\nlogs:\n%s", r.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	exe := r.executions(w.ID)[0]
	if exe.State != storage.ExecutionRunning || exe.LeaseExpiresAt.Before(before.Add(10*time.Minute)) {
		t.Fatalf("attempt %+v: want running with its lease renewed for 10m (after %v)", exe, before.Add(10*time.Minute))
	}
	g.release()
}
