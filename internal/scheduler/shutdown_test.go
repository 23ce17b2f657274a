package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// notStarted checks that a claim made while the scheduler shut down left
// nothing that looks like an attempt: its execution (if any) finished
// without counting, and the Work is ready, unheld, with every input still
// to be given.
func notStarted(t *testing.T, h *harness, w storage.Work) {
	t.Helper()
	exes, err := h.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exes {
		if e.State != storage.ExecutionFinished || e.Result != storage.ResultCancelled || !strings.Contains(e.Message, "shutting down") {
			t.Fatalf("execution left by a claim at shutdown: %+v", e)
		}
	}
	got := h.work(w.ID)
	if got.State != storage.WorkReady || got.Held() || got.Attempts != 0 || got.InputWatermark != 0 {
		t.Fatalf("work after a claim at shutdown = %+v", got)
	}
	if seg := h.plain.TryNext(); seg != nil {
		t.Fatalf("a segment started: %+v", seg.Req)
	}
}

// The next daemon claims the Work afresh: nothing is adopted, nothing is
// lost, and the first real attempt is attempt 1.
func claimedAfresh(t *testing.T, h *harness, w storage.Work) {
	t.Helper()
	h.restart("daemon-2")
	if n, err := h.s.RecoverOrphans(context.Background()); err != nil || n != 0 {
		t.Fatalf("the next daemon adopted %d, %v", n, err)
	}
	h.tick()
	seg := h.plain.Next(t)
	if seg.Kind != "run" || seg.Req.Epoch != 1 {
		t.Fatalf("the next daemon started %s %+v", seg.Kind, seg.Req)
	}
	if got := h.work(w.ID); got.State != storage.WorkRunning || got.Attempts != 1 || got.Held() || got.InputWatermark != got.InputCount {
		t.Fatalf("work claimed by the next daemon = %+v", got)
	}
}

func TestClaimAfterCloseClaimsNothing(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.s.Close()
	if n, err := h.s.Claim(context.Background()); err != nil || n != 0 {
		t.Fatalf("claim after close: %d, %v", n, err)
	}
	notStarted(t, h, w)
	claimedAfresh(t, h, w)
}

// Close while a committed claim is still being prepared (its secrets are
// being resolved): the claim is given back instead of being left running
// with nothing started.
func TestCloseDuringAClaimGivesItBack(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := newHarness(t, func(o *scheduler.Options) {
		o.Secrets = func(ctx context.Context, _ scheduler.SecretsRequest) (map[string]string, error) {
			once.Do(func() {
				close(entered)
				// Close cuts the resolution short (it waits for it).
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
			return nil, nil
		}
	})
	w := h.create("b1")
	done := make(chan error, 1)
	go func() { done <- h.s.Tick(context.Background()) }()
	<-entered
	h.s.Close()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	notStarted(t, h, w)
	claimedAfresh(t, h, w)
}

// The daemon's round context ends while a claim is prepared (a secret's
// resolution is cut short): the claim is given back, not held as if the
// secret were unavailable.
func TestShutdownOfTheRoundGivesTheClaimBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, func(o *scheduler.Options) {
		o.Secrets = func(ctx context.Context, _ scheduler.SecretsRequest) (map[string]string, error) {
			cancel()
			return nil, errors.Join(errors.New("resolving api_key"), ctx.Err())
		}
	})
	w := h.create("b1")
	h.s.Tick(ctx)
	h.s.WaitPrepared(context.Background())
	notStarted(t, h, w)
	h.mod = nil
	claimedAfresh(t, h, w)
}

// A resume or a recovery cut short by Close is given back too: the
// resumed execution is parked again with the Work ready for the next
// daemon, and the recovered one keeps running with its lease expired, for
// the next daemon to adopt.
func TestCloseDuringAResumeOrRecoveryGivesItBack(t *testing.T) {
	var block atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	// The round is held in the toolbelt endpoint's setup, which a resume
	// and a recovery both make (a recovery resolves no secret).
	mod := func(o *scheduler.Options) {
		endpoints := o.ToolbeltEndpoints
		o.ToolbeltEndpoints = func(ctx context.Context, executionID, token string) (scheduler.Endpoint, error) {
			if block.Load() {
				entered <- struct{}{}
				// A resume's preparation is cut short by Close (which
				// waits for it); a recovery's by the release.
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return endpoints(ctx, executionID, token)
		}
	}
	closeDuring := func(h *harness, round func() error) {
		t.Helper()
		block.Store(true)
		done := make(chan error, 1)
		go func() { done <- round() }()
		<-entered
		h.s.Close()
		block.Store(false)
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		release = make(chan struct{})
	}
	ctx := context.Background()

	h := newHarness(t, mod)
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done"}); err != nil {
		t.Fatal(err)
	}
	before := h.work(w.ID)
	closeDuring(h, func() error { return h.s.Tick(ctx) })
	exe := h.execution(seg.Req.ExecutionID)
	if got := h.work(w.ID); exe.State != storage.ExecutionParked || got.State != storage.WorkReady || got.Held() || got.InputWatermark != before.InputWatermark {
		t.Fatalf("after a resume given back: execution %+v, work %+v", exe, got)
	}
	h.restart("daemon-2")
	h.tick()
	if res := h.resumer.Next(t); res.Kind != "resume" || res.Req.ExecutionID != exe.ID {
		t.Fatalf("the next daemon started %s %+v", res.Kind, res.Req)
	}

	h = newHarness(t, mod)
	h.create("b1")
	h.tick()
	run := h.plain.Next(t)
	h.clock.Advance(time.Minute)
	closeDuring(h, func() error { _, err := h.s.RecoverExpired(ctx); return err })
	h.settle(run)
	exe = h.execution(run.Req.ExecutionID)
	if exe.State != storage.ExecutionRunning || exe.Epoch != 2 || exe.LeaseExpiresAt.After(h.clock.Now()) {
		t.Fatalf("after a recovery given back: %+v", exe)
	}
	h.restart("daemon-2")
	if n, err := h.s.RecoverOrphans(ctx); err != nil || n != 1 {
		t.Fatalf("the next daemon adopted %d, %v", n, err)
	}
	if rec := h.plain.Next(t); rec.Kind != "recover" || rec.Req.Epoch != 3 {
		t.Fatalf("the next daemon started %s %+v", rec.Kind, rec.Req)
	}
}
