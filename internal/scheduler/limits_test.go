package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// leased is how many attempts the harness's daemon holds leases for, as
// storage records them (claims are written before their segment starts).
func (h *harness) leased() int {
	h.t.Helper()
	n, err := h.store.CountLeased(context.Background(), h.owner)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func TestSetLimitsFillsDefaults(t *testing.T) {
	h := newHarness(t, nil)
	if got, want := h.s.Limits(), (scheduler.Limits{MaxRunning: 4, Lease: 30 * time.Second, AttemptTimeout: time.Hour}); got != want {
		t.Fatalf("limits at start = %+v, want %+v", got, want)
	}
	h.s.SetLimits(scheduler.Limits{MaxRunning: 2, AttemptTimeout: time.Minute})
	if got, want := h.s.Limits(), (scheduler.Limits{MaxRunning: 2, Lease: 30 * time.Second, AttemptTimeout: time.Minute}); got != want {
		t.Fatalf("limits after SetLimits = %+v, want %+v (zero fields take the defaults)", got, want)
	}
}

// Lowering MaxRunning stops no running attempt: no new one is claimed
// until the running ones are below the new bound. Raising it lets the next
// round claim more.
func TestSetLimitsMaxRunningAppliesAtTheNextClaim(t *testing.T) {
	h := newHarness(t, func(o *scheduler.Options) { o.Limits.MaxRunning = 3 })
	for range 6 {
		h.create("b1")
	}
	h.tick()
	segs := []*schedulertest.Segment{h.plain.Next(t), h.plain.Next(t), h.plain.Next(t)}
	if n := h.leased(); n != 3 {
		t.Fatalf("%d attempts leased, want 3", n)
	}

	h.s.SetLimits(scheduler.Limits{MaxRunning: 1, Lease: 30 * time.Second, AttemptTimeout: time.Hour})
	h.tick()
	if n := h.leased(); n != 3 {
		t.Fatalf("%d attempts leased after lowering MaxRunning to 1, want the 3 running ones kept", n)
	}
	for _, s := range segs {
		if got := h.execution(s.Req.ExecutionID); got.State != storage.ExecutionRunning || s.Done() {
			t.Fatalf("running attempt %s changed when MaxRunning dropped: %+v", s.Req.ExecutionID, got)
		}
	}
	if stops := h.plain.Stops(); len(stops) != 0 {
		t.Fatalf("lowering MaxRunning stopped %d attempts", len(stops))
	}
	// Two end: one is still running, which is the new bound, so nothing
	// new starts.
	h.finish(segs[0], executor.Result{Outcome: executor.Succeeded})
	h.finish(segs[1], executor.Result{Outcome: executor.Succeeded})
	if n := h.leased(); n != 1 {
		t.Fatalf("%d attempts leased with MaxRunning 1 and one still running, want 1", n)
	}
	// The last one ends: exactly one new attempt starts.
	h.finish(segs[2], executor.Result{Outcome: executor.Succeeded})
	if n := h.leased(); n != 1 {
		t.Fatalf("%d attempts leased after the running ones ended, want 1 (MaxRunning)", n)
	}
	fourth := h.plain.Next(t)

	// Raised again: the next round claims up to the new bound.
	h.s.SetLimits(scheduler.Limits{MaxRunning: 3, Lease: 30 * time.Second, AttemptTimeout: time.Hour})
	h.tick()
	if n := h.leased(); n != 3 {
		t.Fatalf("%d attempts leased after raising MaxRunning to 3, want 3", n)
	}
	started := map[string]bool{fourth.Req.WorkID: true}
	for range 2 {
		started[h.plain.Next(t).Req.WorkID] = true
	}
	for _, s := range segs {
		if started[s.Req.WorkID] {
			t.Fatalf("Work %s ran again", s.Req.WorkID)
		}
	}
	if len(started) != 3 {
		t.Fatalf("started %v, want three distinct Work", started)
	}
}

// A new Lease reaches the next lease taken and the next renewal; a new
// AttemptTimeout reaches the next claim and resume, while a running
// segment keeps its deadline, across renewal and recovery.
func TestSetLimitsLeaseAndTimeoutApplyToTheNextAttempt(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.create("b1")
	h.tick()
	first := h.plain.Next(t)
	before := h.execution(first.Req.ExecutionID)
	if !before.LeaseExpiresAt.Equal(t0.Add(30*time.Second)) || !before.Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("first attempt: lease %v, deadline %v", before.LeaseExpiresAt, before.Deadline)
	}

	h.s.SetLimits(scheduler.Limits{MaxRunning: 4, Lease: 2 * time.Minute, AttemptTimeout: 10 * time.Minute})
	if got := h.execution(first.Req.ExecutionID); !got.LeaseExpiresAt.Equal(before.LeaseExpiresAt) || !got.Deadline.Equal(before.Deadline) {
		t.Fatalf("SetLimits changed a running attempt: lease %v, deadline %v", got.LeaseExpiresAt, got.Deadline)
	}

	h.clock.Advance(10 * time.Second)
	h.create("b1")
	h.tick()
	second := h.plain.Next(t)
	now := t0.Add(10 * time.Second)
	if got := h.execution(second.Req.ExecutionID); !got.LeaseExpiresAt.Equal(now.Add(2*time.Minute)) || !got.Deadline.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("attempt claimed after SetLimits: lease %v, deadline %v; want %v and %v", got.LeaseExpiresAt, got.Deadline, now.Add(2*time.Minute), now.Add(10*time.Minute))
	}
	if !second.Req.Deadline.Equal(now.Add(10 * time.Minute)) {
		t.Fatalf("the executor was given deadline %v, want %v", second.Req.Deadline, now.Add(10*time.Minute))
	}

	// The next renewal of the first attempt takes the new lease; its
	// deadline stays.
	h.clock.Advance(5 * time.Second)
	now = now.Add(5 * time.Second)
	if lost, err := h.s.Heartbeat(ctx); err != nil || lost != 0 {
		t.Fatalf("heartbeat: %d lost, %v", lost, err)
	}
	if got := h.execution(first.Req.ExecutionID); !got.LeaseExpiresAt.Equal(now.Add(2*time.Minute)) || !got.Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("renewed first attempt: lease %v, deadline %v; want %v and its own deadline %v", got.LeaseExpiresAt, got.Deadline, now.Add(2*time.Minute), t0.Add(time.Hour))
	}

	// Its lease lapses: recovery takes it with the current lease and keeps
	// the deadline it started with.
	h.s.SetLimits(scheduler.Limits{MaxRunning: 4, Lease: 40 * time.Second, AttemptTimeout: time.Minute})
	h.clock.Advance(2*time.Minute + time.Second)
	now = now.Add(2*time.Minute + time.Second)
	h.tick()
	rec := h.plain.Await(t, first.Req.ExecutionID, 2)
	if rec.Kind != "recover" || !rec.Req.Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("recovery %s with deadline %v, want its own deadline %v", rec.Kind, rec.Req.Deadline, t0.Add(time.Hour))
	}
	if got := h.execution(first.Req.ExecutionID); !got.LeaseExpiresAt.Equal(now.Add(40*time.Second)) || !got.Deadline.Equal(t0.Add(time.Hour)) {
		t.Fatalf("recovered attempt: lease %v, deadline %v", got.LeaseExpiresAt, got.Deadline)
	}
}

// A parked execution resumed after SetLimits gets the new AttemptTimeout
// and Lease: a resume starts a new segment.
func TestSetLimitsReachesAResume(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	if got := h.execution(seg.Req.ExecutionID); got.State != storage.ExecutionParked {
		t.Fatalf("not parked: %+v", got)
	}
	h.s.SetLimits(scheduler.Limits{MaxRunning: 4, Lease: 90 * time.Second, AttemptTimeout: 15 * time.Minute})
	h.clock.Advance(time.Minute)
	now := t0.Add(time.Minute)
	if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done"}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	res := h.resumer.Next(t)
	if res.Kind != "resume" || !res.Req.Deadline.Equal(now.Add(15*time.Minute)) {
		t.Fatalf("resume %s with deadline %v, want %v", res.Kind, res.Req.Deadline, now.Add(15*time.Minute))
	}
	if got := h.execution(seg.Req.ExecutionID); !got.LeaseExpiresAt.Equal(now.Add(90 * time.Second)) {
		t.Fatalf("resumed lease expires %v, want %v", got.LeaseExpiresAt, now.Add(90*time.Second))
	}
}
