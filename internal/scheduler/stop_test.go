package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// logTap is a slog handler that hands every record to a channel, so that a
// test can wait for what the scheduler reports instead of polling.
type logTap chan slog.Record

func (l logTap) Enabled(context.Context, slog.Level) bool { return true }
func (l logTap) Handle(_ context.Context, r slog.Record) error {
	l <- r.Clone()
	return nil
}
func (l logTap) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logTap) WithGroup(string) slog.Handler      { return l }

// await waits for the next record with msg, skipping others, with a
// generous bound as a failure guard.
func (l logTap) await(t *testing.T, msg string) slog.Record {
	t.Helper()
	guard := time.After(10 * time.Second)
	for {
		select {
		case r := <-l:
			if r.Message == msg {
				return r
			}
		case <-guard:
			t.Fatalf("the scheduler never logged %q", msg)
			return slog.Record{}
		}
	}
}

func tapped(logs logTap) func(*scheduler.Options) {
	return func(o *scheduler.Options) { o.Logger = slog.New(logs) }
}

// A Stop that fails is tried again on later rounds, paced by the injected
// clock, until it succeeds: a transient failure does not leave the
// attempt stopping for as long as its process runs.
func TestFailedStopIsRetried(t *testing.T) {
	logs := make(logTap, 256)
	h := newHarness(t, tapped(logs))
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.plain.FailStops(2, errors.New("signal refused"))
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	logs.await(t, "stop failed; retrying")
	for i := range 2 {
		h.clock.Advance(scheduler.StopRetryDelay << i)
		h.tick()
		if i == 0 {
			logs.await(t, "stop failed; retrying")
		}
	}
	h.settle(seg)
	h.tick()
	if n := len(h.plain.Stops()); n != 3 {
		t.Fatalf("%d Stop calls, want 3 (two failed, one succeeded)", n)
	}
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled || exe.Epoch != 1 {
		t.Fatalf("execution = %+v", exe)
	}
	if got := h.work(w.ID); got.BlockedReason != kernel.HoldOperatorCancelled {
		t.Fatalf("work = %+v", got)
	}
}

// Retries are bounded: after StopAttempts failures the scheduler stops
// renewing the attempt's lease and leaves it to recovery, which stops it
// again under a new epoch once the lease has lapsed.
func TestFailedStopsGiveTheAttemptToRecovery(t *testing.T) {
	logs := make(logTap, 256)
	h := newHarness(t, tapped(logs))
	ctx := context.Background()
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.plain.FailStops(scheduler.StopAttempts, errors.New("signal refused"))
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	for i := range scheduler.StopAttempts - 1 {
		logs.await(t, "stop failed; retrying")
		h.clock.Advance(scheduler.StopRetryDelay << i)
		h.tick()
	}
	logs.await(t, "stop failed; the attempt is left to recovery")
	h.settle(seg)
	if tr := h.s.Tracked(); len(tr) != 0 {
		t.Fatalf("still observing %+v", tr)
	}
	lease := h.execution(seg.Req.ExecutionID).LeaseExpiresAt
	if _, err := h.s.Heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.execution(seg.Req.ExecutionID); !got.LeaseExpiresAt.Equal(lease) {
		t.Fatalf("the abandoned attempt's lease was renewed to %v", got.LeaseExpiresAt)
	}
	h.clock.Advance(lease.Sub(h.clock.Now()))
	h.tick() // recovery: a new epoch, stopped by a segment of its own
	h.waitEpoch(seg.Req.ExecutionID, 2)
	h.tick()
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled || exe.Epoch != 2 {
		t.Fatalf("execution = %+v", exe)
	}
	if n := len(h.plain.Stops()); n != scheduler.StopAttempts+1 {
		t.Fatalf("%d Stop calls, want %d", n, scheduler.StopAttempts+1)
	}
}

// The record of a cancelled attempt is honest about its exit: the code the
// executor observed when the stop ended the segment is kept; a stop whose
// end nobody observed (an adopted stopping attempt, or one whose executor
// lost sight of it) records none, never a made-up 0; and an executor
// error is not taken for the process being gone.
func TestStoppedAttemptsRecordOnlyAnObservedExit(t *testing.T) {
	t.Run("observed", func(t *testing.T) {
		h := newHarness(t, nil)
		h.create("b1")
		h.tick()
		seg := h.plain.Next(t)
		if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
			t.Fatal(err)
		}
		h.tick()
		h.settle(seg)
		h.tick()
		exe := h.execution(seg.Req.ExecutionID)
		if exe.Result != storage.ResultCancelled || exe.ExitCode == nil || *exe.ExitCode != -1 || exe.Message != "cancelled by operator:ann; stopped: killed" {
			t.Fatalf("execution = %+v (exit %v)", exe, exe.ExitCode)
		}
	})
	t.Run("adopted", func(t *testing.T) {
		h := newHarness(t, nil)
		w := h.create("b1")
		h.tick()
		seg := h.plain.Next(t)
		if _, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
			t.Fatal(err)
		}
		h.restart("daemon-2")
		h.settle(seg)
		if _, err := h.s.RecoverOrphans(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.waitEpoch(seg.Req.ExecutionID, 2)
		h.tick()
		exe := h.execution(seg.Req.ExecutionID)
		if exe.Result != storage.ResultCancelled || exe.ExitCode != nil || !strings.HasPrefix(exe.Message, "cancelled with its Work by operator:ann; stopped by the host") {
			t.Fatalf("execution = %+v (exit %v)", exe, exe.ExitCode)
		}
	})
	t.Run("executor error", func(t *testing.T) {
		logs := make(logTap, 256)
		h := newHarness(t, tapped(logs))
		h.create("b1")
		h.tick()
		seg := h.plain.Next(t)
		id := seg.Req.ExecutionID
		if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: id}); err != nil {
			t.Fatal(err)
		}
		seg.Fail(errors.New("lost the pipe"))
		h.settle(seg)
		h.tick()
		logs.await(t, "the executor failed to observe a stopping attempt; its stop is confirmed once its process is seen gone")
		if exe := h.execution(id); exe.State != storage.ExecutionStopping {
			t.Fatalf("an executor error confirmed the stop: %+v", exe)
		}
		// Nobody observes it any more: once its lease lapses, recovery
		// stops it with a new epoch.
		h.clock.Advance(31 * time.Second)
		h.tick()
		h.waitEpoch(id, 2)
		h.tick()
		exe := h.execution(id)
		if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled || exe.Epoch != 2 || exe.ExitCode != nil || len(h.plain.Stops()) != 1 {
			t.Fatalf("execution = %+v (exit %v), stops %d", exe, exe.ExitCode, len(h.plain.Stops()))
		}
	})
}
