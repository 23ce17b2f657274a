package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Heartbeat renews the lease of every attempt this scheduler observes, for
// the current Limits().Lease from now. A lease is renewed only while it is still valid for at least the runtime's
// LeaseMargin: past that the holder no longer trusts it, stops observing
// the segment (detaches) and leaves it to recovery, which takes it over
// with a new epoch once it has expired. A renewed attempt that an operator
// cancelled (stopping) is stopped. It returns how many leases were lost.
func (s *Scheduler) Heartbeat(ctx context.Context) (int, error) {
	s.mu.Lock()
	segs := make([]*segment, 0, len(s.segments))
	for _, seg := range s.segments {
		segs = append(segs, seg)
	}
	preps := make([]storage.Execution, 0, len(s.preparing))
	for _, p := range s.preparing {
		preps = append(preps, p.exe)
	}
	s.mu.Unlock()
	now, lease := s.now(), s.Limits().Lease
	lost := 0
	var errs []error
	// A claim being prepared holds its lease too: a slow secret must not
	// let it lapse into a recovery of a segment that never started.
	for _, exe := range preps {
		cur, err := s.renew(ctx, exe, now, lease)
		switch {
		case errors.Is(err, storage.ErrFenced), errors.Is(err, storage.ErrNotFound):
			lost++
			s.mu.Lock()
			if p := s.preparing[exe.ID]; p != nil {
				p.cancel()
			}
			s.mu.Unlock()
		case err != nil:
			errs = append(errs, err)
		case cur.State == storage.ExecutionStopping:
			s.mu.Lock()
			s.stopPreparing(exe.ID)
			s.mu.Unlock()
		}
	}
	for _, seg := range segs {
		exe, err := s.renew(ctx, seg.exe, now, lease)
		switch {
		case errors.Is(err, storage.ErrFenced), errors.Is(err, storage.ErrNotFound):
			lost++
			s.detach(seg)
			s.watchDetached(seg)
			s.o.Logger.Warn("lease lost; observation detached", "execution", seg.exe.ID, "epoch", seg.exe.Epoch)
		case err != nil:
			errs = append(errs, err)
		case exe.State == storage.ExecutionStopping:
			s.requestStop(seg)
		}
	}
	if err := s.checkDetached(ctx); err != nil {
		errs = append(errs, err)
	}
	return lost, errors.Join(errs...)
}

// renew renews the lease of exe's epoch for lease from now.
func (s *Scheduler) renew(ctx context.Context, exe storage.Execution, now time.Time, lease time.Duration) (storage.Execution, error) {
	var cur storage.Execution
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		cur, err = tx.RenewLease(ctx, &storage.RenewLeaseParams{
			ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, ValidAt: now.Add(s.rt.LeaseMargin()),
			LeaseExpiresAt: now.Add(lease), States: []storage.ExecutionState{storage.ExecutionRunning, storage.ExecutionStopping},
		})
		return err
	})
	if s.o.OnRenewal != nil {
		switch {
		case err == nil:
			s.o.OnRenewal(RenewalRenewed)
		case errors.Is(err, storage.ErrFenced), errors.Is(err, storage.ErrNotFound):
			s.o.OnRenewal(RenewalLost)
		default:
			s.o.OnRenewal(RenewalError)
		}
	}
	return cur, err
}

// The outcomes Options.OnRenewal is told.
const (
	RenewalRenewed = "renewed"
	RenewalLost    = "lost"
	RenewalError   = "error"
)

// detach stops observing a segment without stopping its process.
func (s *Scheduler) detach(seg *segment) {
	s.mu.Lock()
	if s.segments[seg.exe.ID] == seg {
		delete(s.segments, seg.exe.ID)
	}
	s.mu.Unlock()
	seg.cancel()
}

// Stop retries: a Stop that fails is tried again on a later round, no
// sooner than StopRetryDelay after the first failure, doubling after each
// one, up to StopAttempts calls in all. Past that the scheduler stops
// observing the attempt and renewing its lease: once the lease lapses,
// recovery takes it over with a new epoch and stops it again.
const (
	StopAttempts   = 5
	StopRetryDelay = time.Second
)

// requestStop stops a fenced attempt's process (one Stop call at a time,
// retried as StopAttempts says); its observed end is applied as the
// physical stop.
func (s *Scheduler) requestStop(seg *segment) {
	s.mu.Lock()
	if seg.stopping || s.closed || s.now().Before(seg.stopRetryAt) {
		s.mu.Unlock()
		return
	}
	seg.stopping = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		err := seg.ex.Stop(s.base, seg.req, s.o.StopGrace)
		if s.base.Err() != nil {
			return
		}
		if err != nil {
			s.stopFailed(seg, err)
			return
		}
		// The segment's own executor call sees the process end and
		// reports how (its result is applied as the stop, with the exit
		// code); only when it did not see the end is the stop confirmed
		// on its own.
		select {
		case <-seg.done:
		case <-s.base.Done():
			return
		}
		if !seg.ended {
			s.enqueue(result{executionID: seg.exe.ID, epoch: seg.exe.Epoch, kind: kindStop})
		}
	}()
}

// stopFailed records a failed Stop of seg: the next round tries again
// after a delay, or, after StopAttempts failures, the attempt is left to
// recovery.
func (s *Scheduler) stopFailed(seg *segment, err error) {
	s.mu.Lock()
	seg.stopFailures++
	n := seg.stopFailures
	retry := n < StopAttempts
	if retry {
		seg.stopping = false
		seg.stopRetryAt = s.now().Add(StopRetryDelay << (n - 1))
	}
	at := seg.stopRetryAt
	s.mu.Unlock()
	if retry {
		s.o.Logger.Warn("stop failed; retrying", "execution", seg.exe.ID, "epoch", seg.exe.Epoch, "attempt", n, "retry_at", at, "error", err)
		return
	}
	s.o.Logger.Error("stop failed; the attempt is left to recovery", "execution", seg.exe.ID, "epoch", seg.exe.Epoch, "attempts", n, "error", err)
	s.detach(seg)
	s.watchDetached(seg)
}

// StopFenced stops the processes of observed attempts that were fenced by
// a cancel.
func (s *Scheduler) StopFenced(ctx context.Context) error {
	stopping, err := s.store.ListExecutions(ctx, &storage.ListExecutionsParams{Owner: s.o.Owner, States: []storage.ExecutionState{storage.ExecutionStopping}, Page: storage.Page{Limit: storage.MaxLimit}})
	if err != nil {
		return err
	}
	for _, exe := range stopping {
		s.mu.Lock()
		seg := s.segments[exe.ID]
		if seg == nil {
			s.stopPreparing(exe.ID)
		}
		s.mu.Unlock()
		if seg != nil && seg.exe.Epoch == exe.Epoch {
			s.requestStop(seg)
		}
	}
	return nil
}

// stopPreparing cuts short the preparation of an attempt a cancel fenced:
// its segment is never started (start refuses it) and its stop is
// confirmed when the preparation ends. Called with s.mu held.
func (s *Scheduler) stopPreparing(executionID string) {
	if p := s.preparing[executionID]; p != nil && !p.stopAsked {
		p.stopAsked = true
		p.cancel()
	}
}

// RecoverExpired takes over every attempt whose lease has expired (held by
// anyone, this daemon included) with a new epoch, and Recovers it: a
// running one re-attaches to its segment (same Dir), a stopping one is
// stopped. Owner liveness is decided by lease expiry alone. Attempts of a
// held Work are left until a retry. An attempt another node launched
// cannot be adopted here (its process, if any, is on that node): it is
// recovered as lost (lostElsewhere). It runs only while this daemon holds
// DutyRecovery.
func (s *Scheduler) RecoverExpired(ctx context.Context) (int, error) {
	if !s.holds(DutyRecovery) {
		return 0, nil
	}
	exes, err := s.store.ListExecutions(ctx, &storage.ListExecutionsParams{
		States: []storage.ExecutionState{storage.ExecutionRunning, storage.ExecutionStopping}, LeaseExpiredBy: s.now(), Page: storage.Page{Limit: storage.MaxLimit},
	})
	if err != nil {
		return 0, err
	}
	return s.recover(ctx, exes, true)
}

// RecoverOrphans takes over, at once, every running or stopping attempt
// of this node held by another owner, and stops the processes of this
// node's attempts that another node recovered as lost meanwhile
// (stopLostElsewhere). The daemon calls it once at start:
// it holds the state directory's exclusive lock, so an earlier owner of
// the same state (the same node) is known to be dead and its attempts
// need not wait for their leases to expire. Attempts of other nodes (on
// a shared store, other daemons' live attempts) are left to their owners,
// or to RecoverExpired once their leases expire; an attempt without a
// node (written before nodes were recorded) counts as this node's.
func (s *Scheduler) RecoverOrphans(ctx context.Context) (int, error) {
	var nodes []string
	if s.o.Node != "" {
		nodes = []string{s.o.Node, ""}
	}
	exes, err := s.store.ListExecutions(ctx, &storage.ListExecutionsParams{
		States: []storage.ExecutionState{storage.ExecutionRunning, storage.ExecutionStopping}, NotOwner: s.o.Owner, Nodes: nodes, Page: storage.Page{Limit: storage.MaxLimit},
	})
	if err != nil {
		return 0, err
	}
	n, err := s.recover(ctx, exes, false)
	return n, errors.Join(err, s.stopLostElsewhere(ctx))
}

func (s *Scheduler) recover(ctx context.Context, exes []storage.Execution, expiredOnly bool) (int, error) {
	n := 0
	var errs []error
	for _, old := range exes {
		if s.stopped(ctx) {
			break
		}
		w, err := s.store.GetWork(ctx, old.Work)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// A running attempt of a held Work is left alone (the retry of
		// a system hold lets recovery adopt it again), except under an
		// operator's hold, which lets a running attempt go on.
		if old.State == storage.ExecutionRunning && w.Held() && w.BlockedReason != kernel.HoldOperator {
			continue
		}
		if s.elsewhere(old) && old.Launched() {
			switch err := s.lostElsewhere(ctx, old, expiredOnly); {
			case err == nil:
				n++
			case !errors.Is(err, storage.ErrFenced):
				errs = append(errs, err)
			}
			continue
		}
		now := s.now()
		var exe storage.Execution
		err = s.store.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			if exe, err = tx.AdvanceEpoch(ctx, s.takeOver(old, now, expiredOnly)); err != nil || !old.Launched() {
				return err
			}
			// The same segment, observed at the new epoch: it stays
			// launched.
			exe, err = tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, Launched: true, Now: now})
			return err
		})
		if errors.Is(err, storage.ErrFenced) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		if exe.LaunchedEpoch == 0 {
			// Claimed, then its daemon stopped before launch: nothing
			// ran, and the Work is simply claimed again.
			errs = append(errs, s.neverLaunched(ctx, exe))
			continue
		}
		s.o.Logger.Info("attempt recovered", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch, "from_owner", old.Owner)
		b, berr := s.o.Bindings(ctx, BindingQuery{Scope: exe.Scope, Binding: exe.Binding, Generation: exe.Generation})
		ex := s.executor(exe.Executor)
		if ex == nil && exe.State == storage.ExecutionStopping {
			errs = append(errs, s.abandonStop(ctx, exe))
			continue
		}
		if ex == nil {
			errs = append(errs, s.abort(ctx, exe, kindRecover, 0, kernel.HoldBindingUnavailable, fmt.Sprintf("executor %q is not available in this daemon to recover execution %s; fix the configuration and retry the Work", exe.Executor, exe.ID)))
			continue
		}
		if exe.State == storage.ExecutionStopping {
			if !s.start(exe, kindStop, executor.RunRequest{
				ExecutionID: exe.ID, WorkID: exe.Work, ScopeID: exe.Scope, BindingID: exe.Binding, Epoch: exe.Epoch,
				Config: b.Config, Dir: s.executionDir(ex, exe.ID), Deadline: exe.Deadline,
			}, ex) {
				errs = append(errs, s.giveBack(ctx, exe, kindStop, 0))
			}
			continue
		}
		if berr != nil {
			b = Binding{Executor: exe.Executor, Generation: exe.Generation}
		}
		if err := s.launch(ctx, exe, w, b, ex, kindRecover, 0, ""); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// takeOver is the new epoch a recovery takes old at, in old's state, under
// this daemon's owner and a fresh lease; only once old's lease expired
// when expiredOnly.
func (s *Scheduler) takeOver(old storage.Execution, now time.Time, expiredOnly bool) *storage.AdvanceEpochParams {
	p := &storage.AdvanceEpochParams{
		ID: old.ID, FromEpoch: old.Epoch, FromStates: []storage.ExecutionState{old.State}, State: old.State,
		Owner: s.o.Owner, LeaseExpiresAt: now.Add(s.Limits().Lease), Now: now,
	}
	if expiredOnly {
		p.ExpiredBy = now
	}
	return p
}

// neverLaunched ends a recovered attempt that was claimed but never handed
// to its executor (LaunchedEpoch 0: its daemon stopped between claim and
// launch, or its epoch was superseded before it launched), so no process
// of it ever started. The execution finishes cancelled and is not counted
// as an attempt; a Work that has not ended is ready again, unheld, and is
// given back the inputs the claim acknowledged (those after the last
// launched attempt's watermark). A stopping one (cancelled before launch)
// is confirmed stopped.
func (s *Scheduler) neverLaunched(ctx context.Context, exe storage.Execution) error {
	now := s.now()
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		if exe.State == storage.ExecutionStopping {
			_, err := s.rt.ConfirmStoppedInTx(ctx, tx, exe.ID, exe.Epoch, "stopped before it was launched: nothing ran", nil)
			return err
		}
		st, res, msg := storage.ExecutionFinished, storage.ResultCancelled, "not started: its daemon stopped between claim and launch, so the Work is claimed again"
		if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning}, State: &st, Result: &res, Message: &msg, Now: now,
		}); err != nil {
			return err
		}
		prev, err := lastLaunchedWatermark(ctx, tx, exe)
		if err != nil {
			return err
		}
		ready := storage.WorkReady
		_, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: exe.Work, FromStates: []storage.WorkState{storage.WorkRunning}, State: &ready, InputWatermark: &prev, AddAttempts: -1, Now: now})
		if errors.Is(err, storage.ErrFenced) {
			// The Work is no longer running (it ended, or was held
			// ready): nothing to give back.
			return nil
		}
		return err
	})
	if errors.Is(err, storage.ErrFenced) {
		return nil
	}
	if err == nil {
		s.o.Logger.Info("attempt never launched; the Work is claimed again", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch)
	}
	return err
}

// lastLaunchedWatermark is the input watermark of the Work's last attempt
// that was launched, other than exe (0: none): what the Work had
// acknowledged before exe's claim.
func lastLaunchedWatermark(ctx context.Context, tx storage.Tx, exe storage.Execution) (int64, error) {
	var mark int64
	var after *storage.Position
	for {
		page, err := tx.ListExecutions(ctx, &storage.ListExecutionsParams{Work: exe.Work, Page: storage.Page{Limit: storage.MaxLimit, After: after}})
		if err != nil {
			return 0, err
		}
		for _, e := range page {
			if e.ID != exe.ID && e.LaunchedEpoch > 0 {
				mark = max(mark, e.InputWatermark)
			}
		}
		if len(page) < storage.MaxLimit {
			return mark, nil
		}
		last := page[len(page)-1]
		after = &storage.Position{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// abandonStop ends a recovered stopping attempt whose executor this daemon
// does not have: nothing here can stop or observe its process, so waiting
// would only advance its epoch round after round. The execution finishes
// lost (its epoch can never act again), and its Work, unless it has ended,
// is held attempt_lost until an operator has checked that the process is
// gone and retries it: a new attempt must not start beside it unseen.
func (s *Scheduler) abandonStop(ctx context.Context, exe storage.Execution) error {
	now := s.now()
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		st, res := storage.ExecutionFinished, storage.ResultLost
		msg := fmt.Sprintf("not stopped: executor %q is not available in this daemon, so its process may still be running", exe.Executor)
		if exe.Message != "" {
			msg = exe.Message + "; " + msg
		}
		fin, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionStopping},
			State: &st, Result: &res, Message: &msg, Now: now,
		})
		if err != nil {
			return err
		}
		if err := storage.RevokeFinishedTokens(ctx, tx, fin, now); err != nil {
			return err
		}
		reason := kernel.HoldAttemptLost
		detail := fmt.Sprintf("cancelled execution %s could not be stopped: executor %q is not available in this daemon; stop its process by hand, then retry the Work", exe.ID, exe.Executor)
		_, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: exe.Work, FromStates: storage.NonterminalWorkStates, BlockedReason: &reason, BlockedDetail: &detail, Now: now})
		if errors.Is(err, storage.ErrFenced) {
			// The Work has ended (Work cancel): nothing to hold.
			return nil
		}
		return err
	})
	if errors.Is(err, storage.ErrFenced) {
		// The attempt moved on since it was recovered.
		return nil
	}
	if err == nil {
		s.o.Logger.Warn("stopping attempt abandoned: no executor to stop it", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch, "executor", exe.Executor)
	}
	return err
}

// FireDue fires the timers due by now: a wait's timeout makes its Work
// ready with a core.wait.timed_out input. It returns how many fired. It
// runs only while this daemon holds DutyTimers.
func (s *Scheduler) FireDue(ctx context.Context) (int, error) {
	if !s.holds(DutyTimers) {
		return 0, nil
	}
	now := s.now()
	due, err := s.store.ListDueTimers(ctx, now, storage.MaxLimit)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, t := range due {
		err := s.store.WithTx(ctx, func(tx storage.Tx) error {
			if err := tx.FireTimer(ctx, t.ID, now); err != nil {
				return err
			}
			switch t.Kind {
			case storage.TimerWaitTimeout:
				_, err := s.rt.TimeoutWaitInTx(ctx, tx, t.Target)
				return err
			}
			s.o.Logger.Warn("timer of an unknown kind fired without effect", "timer", t.ID, "kind", t.Kind)
			return nil
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, storage.ErrFenced):
		default:
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}
