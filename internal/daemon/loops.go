package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Serve runs the daemon until ctx ends: it adopts the attempts an earlier
// daemon on this state directory left (the lock proves that daemon is
// gone), serves the management API, and runs the loops: a scheduler round
// on every tick, at once after a write that could start or wake Work
// (scheduler.WakeOnWrites) and whenever a segment reports; lease renewal every third of the current
// lease (re-paced when an apply changes it), on a goroutine of its own so
// that a long scheduler round (a start gate, a recovery's
// preparation) never delays it into the lease margin; and the sweeps (toolbelt
// records, Idempotency-Key history, run directories of ended or unknown
// executions). It returns nil when ctx ends and an error when the
// management server fails, in both cases after the renewal goroutine has
// ended.
func (d *Daemon) Serve(ctx context.Context) error {
	go func() {
		err := d.http.Serve(d.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		d.served <- err
	}()
	d.serveMetrics()
	d.notify("STATUS=starting: adopting the attempts of an earlier daemon, first round and sweep")
	// The duties first: the first round fires timers and recovers
	// expired leases only under them.
	d.renewDuties(ctx)
	if n, err := d.sched.RecoverOrphans(ctx); err != nil {
		d.log.Error("adopting the attempts of an earlier daemon failed", "adopted", n, "error", err)
	} else if n > 0 {
		d.log.Info("adopted the attempts of an earlier daemon", "adopted", n)
	}
	d.tick(ctx)
	d.sweep(ctx)
	d.ingress.start(ctx)
	d.ready.Store(true)
	info := d.Info()
	d.log.Info("daemon ready", "state", info.StateDir, "socket", info.Socket, "owner", info.Owner, "node", info.Node, "generation", info.Generation, "version", d.opts.Version)
	// The service manager hears READY only now: adoption, the first
	// round and the first sweep are done, and the management socket (and
	// every adopted toolbelt socket) serves.
	d.notify("READY=1", fmt.Sprintf("STATUS=ready: generation %d, serving the management socket", info.Generation))
	if d.opts.Ready != nil {
		d.opts.Ready(info)
	}

	renewCtx, stopRenewal := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		d.renewLeases(renewCtx)
	}()
	defer func() {
		stopRenewal()
		<-renewed
	}()
	followCtx, stopFollowing := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		d.followStore(followCtx)
	}()
	defer func() {
		stopFollowing()
		<-followed
	}()

	ticks := time.NewTicker(d.opts.TickInterval)
	defer ticks.Stop()
	sweeps := time.NewTicker(d.opts.SweepInterval)
	defer sweeps.Stop()
	for {
		select {
		case <-ctx.Done():
			d.log.Info("shutting down", "reason", context.Cause(ctx))
			d.notify("STOPPING=1", "STATUS=stopping: detaching from running attempts, which keep running")
			return nil
		case err := <-d.served:
			if err == nil {
				return nil
			}
			return fmt.Errorf("the management server stopped: %w", err)
		case <-ticks.C:
			d.tick(ctx)
		case <-d.wake:
			d.round(ctx)
		case <-d.sched.Notify():
			// A segment reported: apply it, then let its run directory go.
			d.round(ctx)
			d.sweepRuns(ctx)
		case <-sweeps.C:
			d.sweep(ctx)
		}
	}
}

// renewLeases renews the leases this daemon holds every third of the
// current lease until ctx ends. It runs beside the scheduler rounds, never
// behind one: a round that blocks (a slow secret, a start gate) must not
// let the running attempts' leases drift into the margin, where the
// toolbelt refuses their calls and Heartbeat gives them up to recovery.
func (d *Daemon) renewLeases(ctx context.Context) {
	beat := d.heartbeatInterval()
	beats := time.NewTicker(beat)
	defer beats.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beats.C:
			d.heartbeat(ctx)
		case <-d.limitsApplied:
			// A new lease: renew every lease held now for the new length
			// (a longer one must not wait a longer interval on the old
			// length), then renew every third of it.
			if next := d.heartbeatInterval(); next != beat {
				d.heartbeat(ctx)
				beat = next
				beats.Reset(beat)
				d.log.Info("lease renewal re-paced", "lease", d.sched.Limits().Lease, "every", beat)
			}
		}
	}
}

// heartbeatInterval is a third of the scheduler's current lease.
func (d *Daemon) heartbeatInterval() time.Duration {
	return max(d.sched.Limits().Lease/3, 100*time.Millisecond)
}

// heartbeat renews the leases this daemon holds, its duties' included.
func (d *Daemon) heartbeat(ctx context.Context) {
	if lost, err := d.sched.Heartbeat(ctx); err != nil {
		d.log.Error("renewing leases failed", "error", err)
	} else if lost > 0 {
		d.log.Warn("leases lost", "count", lost)
	}
	d.renewDuties(ctx)
}

// renewDuties takes or renews the store-wide duties for the current lease
// and logs when the set this daemon holds changes.
func (d *Daemon) renewDuties(ctx context.Context) {
	held, err := d.duties.Renew(ctx, d.sched.Limits().Lease)
	if err != nil && ctx.Err() == nil {
		d.log.Error("renewing the store-wide duties failed", "error", err)
	}
	now := strings.Join(held, ",")
	if prev, _ := d.dutiesHeld.Swap(now).(string); prev != now {
		d.log.Info("store-wide duties held", "duties", now)
	}
}

// releaseDuties gives up the duties at shutdown, so another daemon of the
// store takes them at once rather than at their expiry.
func (d *Daemon) releaseDuties() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := d.duties.Release(ctx); err != nil {
		d.log.Warn("releasing the store-wide duties failed; they pass to another daemon when they expire", "error", err)
	}
	return nil
}

// tick runs one scheduler round with its timed steps (Scheduler.Tick):
// at start and every tick interval.
func (d *Daemon) tick(ctx context.Context) { d.ran(ctx, d.sched.Tick(ctx)) }

// round runs one scheduler round without them (Scheduler.Round): when a
// write wakes the scheduler or a segment reports.
func (d *Daemon) round(ctx context.Context) { d.ran(ctx, d.sched.Round(ctx)) }

// ran logs a round's failure and tells the tests' hook.
func (d *Daemon) ran(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		d.log.Error("scheduler round failed", "error", err)
	}
	if d.opts.ticked != nil {
		d.opts.ticked()
	}
}

// sweep runs every retention pass. A pass cut off because the daemon is
// shutting down (ctx ended) is not a failure: the next daemon sweeps
// again.
func (d *Daemon) sweep(ctx context.Context) {
	if d.duties.Held(scheduler.DutySweeps) {
		d.sweepStore(ctx)
	}
	d.sweepRuns(ctx)
	d.sweepWorkspaces(ctx)
	d.sweepExecutionDirs(ctx)
}

// sweepStore runs the sweeps of store rows (toolbelt records,
// Idempotency-Key history): a store-wide duty, run by one daemon of the
// store at a time.
func (d *Daemon) sweepStore(ctx context.Context) {
	if res, err := d.tb.SweepToolbelt(ctx); err != nil {
		d.sweepFailed(ctx, "toolbelt sweep failed", err)
	} else if res.Tokens+res.Replays+res.Calls+res.Egress > 0 {
		d.log.Info("toolbelt records swept", "tokens", res.Tokens, "replays", res.Replays, "calls", res.Calls, "egress", res.Egress)
	}
	if n, err := d.srv.SweepIdempotency(ctx); err != nil {
		d.sweepFailed(ctx, "idempotency sweep failed", err)
	} else if n > 0 {
		d.log.Info("idempotency records swept", "records", n)
	}
}

// sweepWorkspaces removes the agent executors' checkouts of Work that has
// ended, keeping a failed Work's for agentrun.DefaultKeepFailed after it
// ended (its last update).
func (d *Daemon) sweepWorkspaces(ctx context.Context) {
	n, err := agentrun.SweepWorkspaces(ctx, filepath.Join(d.state, WorkspacesDir), d.clock.Now(), 0, d.workEnd)
	if err != nil {
		d.sweepFailed(ctx, "workspace sweep failed", err)
	} else if n > 0 {
		d.log.Info("workspaces swept", "workspaces", n)
	}
}

// sweepExecutionDirs removes the executions' own directories a day after
// they finished (scheduler.SweepExecutionDirs).
func (d *Daemon) sweepExecutionDirs(ctx context.Context) {
	n, err := d.sched.SweepExecutionDirs(ctx)
	if err != nil {
		d.sweepFailed(ctx, "execution directory sweep failed", err)
	} else if n > 0 {
		d.log.Info("execution directories swept", "directories", n)
	}
}

// workEnd tells the workspace sweep how a Work stands.
func (d *Daemon) workEnd(ctx context.Context, id string) (agentrun.WorkEnd, error) {
	w, err := d.store.GetWork(ctx, id)
	if storage.IsNotFound(err) {
		return agentrun.WorkEnd{}, nil
	}
	if err != nil {
		return agentrun.WorkEnd{}, err
	}
	switch w.State {
	case storage.WorkSucceeded, storage.WorkCancelled:
		return agentrun.WorkEnd{Known: true, Ended: true, EndedAt: w.UpdatedAt}, nil
	case storage.WorkFailed:
		return agentrun.WorkEnd{Known: true, Ended: true, Failed: true, EndedAt: w.UpdatedAt}, nil
	}
	return agentrun.WorkEnd{Known: true}, nil
}

// sweepRuns removes the run directory (and closes the socket) of every
// execution that has ended or is unknown, including those an earlier
// daemon left, and revokes an ended execution's tokens. Running, stopping
// and parked executions keep theirs.
func (d *Daemon) sweepRuns(ctx context.Context) {
	swept, err := d.dirs.Sweep(func(id string) bool {
		exe, err := d.store.GetExecution(ctx, id)
		switch {
		case storage.IsNotFound(err):
			return false
		case err != nil:
			return true // keep what cannot be judged now
		case exe.Live():
			return true
		}
		// Revoke first, so that no token of an ended execution outlives
		// its socket.
		if _, err := d.tb.RevokeExecution(ctx, id); err != nil {
			d.log.Error("revoking an ended execution's tokens failed", "execution", id, "error", err)
			return true
		}
		return false
	})
	if err != nil {
		d.sweepFailed(ctx, "run directory sweep failed", err)
	}
	for _, s := range swept {
		// Its egress socket has closed; so do the tunnels it had open.
		d.egress.CloseExecution(s.ExecutionID)
		d.log.Info("run directory removed", "execution", s.ExecutionID, "key", s.Key)
	}
}

// sweepFailed logs a failed sweep: an ERROR, unless shutdown cut it off.
func (d *Daemon) sweepFailed(ctx context.Context, msg string, err error) {
	if ctx.Err() != nil {
		d.log.Info(msg+"; cut off by shutdown", "error", err)
		return
	}
	d.log.Error(msg, "error", err)
}
