package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// Segment kinds: how a segment was started.
const (
	kindRun     = "claim"
	kindResume  = "resume"
	kindRecover = "recover"
	kindStop    = "stop"
)

// Scheduler claims ready Work, runs its segments on executors, renews the
// leases it holds, applies what the segments report, fires timers and
// recovers expired attempts. The daemon drives it with Tick (on a ticker and
// whenever Notify fires) and Heartbeat; tests drive it step by step.
type Scheduler struct {
	o     Options
	rt    *kernel.Runtime
	store storage.Store

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	notify chan struct{}
	// limits are the current limits, defaults applied; each decision
	// loads them once (SetLimits).
	limits atomic.Pointer[Limits]

	mu       sync.Mutex
	segments map[string]*segment
	results  []result
	closed   bool

	// preparing are the claims whose segment is being prepared (token,
	// endpoint, secrets) off the round, by execution id (see prepare).
	preparing map[string]*preparation
	// prepared is closed (and replaced) whenever a preparation ends.
	prepared chan struct{}
	// detached are the segments whose lease this scheduler lost, watched
	// until another daemon takes them over (see watchDetached).
	detached map[string]*segment

	// marks writes the launch marks of concurrent preparations together.
	marks launchMarks
}

// Preparation bounds: at most PrepareWorkers claims are prepared at once,
// at most PreparePerBinding of them for one binding whose preparation can
// block (it resolves secrets or makes a toolbelt endpoint). A claim is
// taken only when its preparation can start at once, so one binding whose
// secret hangs holds at most PreparePerBinding slots and never queues
// another binding's Work behind it. A binding whose preparation cannot
// block (quick: no secret, no endpoint) is held only to PrepareWorkers, so
// a round claims up to PrepareWorkers of its Work in one transaction.
const (
	PrepareWorkers    = 16
	PreparePerBinding = 1
)

// preparation is a committed claim or resume whose segment is being
// prepared on a goroutine of its own.
type preparation struct {
	exe    storage.Execution
	key    string // scope and binding
	quick  bool   // its preparation cannot block (see quickPrepare)
	cancel context.CancelFunc
	// stopAsked: the attempt was fenced by a cancel while being prepared;
	// start refuses it and its stop is confirmed once preparing ends.
	stopAsked bool
}

func bindingKey(scope, binding string) string { return scope + "\x00" + binding }

// segment is one executor call the scheduler tracks.
type segment struct {
	exe    storage.Execution
	kind   string
	req    executor.RunRequest
	ex     executor.Executor
	cancel context.CancelFunc
	done   chan struct{}
	// stopping: a Stop call is in flight or has succeeded (requestStop);
	// stopFailures counts the ones that failed, and a retry waits until
	// stopRetryAt.
	stopping     bool
	stopFailures int
	stopRetryAt  time.Time
	// ended: the executor call returned the segment's result (it saw the
	// segment end); set before done is closed.
	ended bool
}

type result struct {
	executionID string
	epoch       int64
	kind        string
	res         executor.Result
	err         error
}

// New checks the options and returns a Scheduler. It refuses a
// Toolbelt without ToolbeltEndpoints.
func New(o Options) (*Scheduler, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	s := &Scheduler{
		o: o, rt: o.Runtime, store: o.Store, base: base, cancel: cancel,
		notify: make(chan struct{}, 1), segments: map[string]*segment{}, preparing: map[string]*preparation{}, prepared: make(chan struct{}),
	}
	s.SetLimits(o.Limits)
	return s, nil
}

// SetLimits replaces the limits while the scheduler runs (the daemon calls
// it when a new configuration generation becomes active); zero fields take
// the defaults. Nothing already decided changes; each limit applies at the
// next decision that uses it:
//   - MaxRunning at the next Claim: attempts already running are never
//     stopped when it drops, so until enough of them end no new one
//     starts;
//   - Lease at the next lease taken or renewed: a claim, resume or
//     recovery, and each Heartbeat renewal (the caller paces Heartbeat
//     by Limits().Lease);
//   - AttemptTimeout at the next claim or resume: a running segment keeps
//     the deadline it was started with, and recovery keeps it as well.
func (s *Scheduler) SetLimits(l Limits) {
	l = l.withDefaults()
	s.limits.Store(&l)
}

// Limits returns the current limits, defaults applied.
func (s *Scheduler) Limits() Limits { return *s.limits.Load() }

// Notify signals (without blocking the sender) when a segment reported
// and Tick has something to apply, or a claim's preparation ended and
// Tick may claim Work that waited for its binding's turn.
func (s *Scheduler) Notify() <-chan struct{} { return s.notify }

// Owner is the daemon instance id the scheduler takes leases as.
func (s *Scheduler) Owner() string { return s.o.Owner }

// Close stops observing: every executor call is cancelled (executors return
// ErrDetached and leave their processes running for a later daemon to
// recover) and Close waits for the scheduler's goroutines. Results that
// arrive are not applied. From the moment Close begins nothing more is
// claimed, resumed or recovered, and a claim already committed whose
// segment had not started yet is given back (see giveBack), so that no
// attempt is left recorded as running that never ran.
func (s *Scheduler) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Tick runs one round: apply the results segments reported, fire due
// timers, recover expired leases, stop fenced attempts, claim ready Work.
func (s *Scheduler) Tick(ctx context.Context) error { return s.round(ctx, true) }

// Round is Tick without the steps the clock alone makes necessary (firing
// due timers, recovering expired leases): the round a write that can
// start or wake Work, or a segment's report, calls for. Those steps are
// due by time, not by what was written, and read the store for nothing
// on every such round; a daemon runs them on its periodic Tick, so a
// timer or an expired lease waits at most one tick interval, as it does
// on an idle daemon.
func (s *Scheduler) Round(ctx context.Context) error { return s.round(ctx, false) }

// round is Tick, or Round without timed steps.
func (s *Scheduler) round(ctx context.Context, timed bool) error {
	var errs []error
	if _, err := s.ApplyResults(ctx); err != nil {
		errs = append(errs, err)
	}
	if timed {
		if _, err := s.FireDue(ctx); err != nil {
			errs = append(errs, err)
		}
		if _, err := s.RecoverExpired(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.StopFenced(ctx); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.Claim(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Scheduler) now() time.Time { return s.o.Clock.Now() }

// stopped reports whether nothing new may start: the scheduler is closing,
// or the round's context ended (the daemon is shutting down).
func (s *Scheduler) stopped(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed || ctx.Err() != nil
}

// ---- claim ----

// Claim claims ready, unheld Work up to MaxRunning and starts a segment
// for each: a new execution at epoch 1, or the next epoch of the Work's
// parked execution (resume). The segment is prepared (token, endpoint,
// secrets) and started off the round (see prepare), so Claim never waits
// for a secret; it takes a Work only when its preparation can start at
// once (PrepareWorkers, PreparePerBinding) and passes over the Work of a
// binding at its limit. It returns how many it claimed. It claims nothing
// once the scheduler is closing or ctx has ended.
func (s *Scheduler) Claim(ctx context.Context) (int, error) {
	if s.stopped(ctx) {
		return 0, nil
	}
	leased, err := s.store.CountLeased(ctx, s.o.Owner)
	if err != nil {
		return 0, err
	}
	slots := s.Limits().MaxRunning - leased
	if slots <= 0 {
		return 0, nil
	}
	var errs []error
	var plans []*claimPlan
	// A claim is planned only when its preparation can start at once
	// (prepareRoom); the plans of this round count as preparing.
	planned := map[string]int{}
	// quick: the bindings this round found quick to prepare.
	quick := map[string]bool{}
	// More candidates than slots: the Work of a binding at its
	// preparation limit is passed over, and what follows it must still be
	// reached. A few times the slots are listed first (listing, and on
	// PostgreSQL locking, the whole ready backlog every round was most of
	// a round's cost), and more, up to storage.MaxLimit, only when those
	// were passed over with slots left.
	seen := map[string]bool{}
	for limit := min(max(4*slots, 8), storage.MaxLimit); ; limit = min(4*limit, storage.MaxLimit) {
		cands, err := s.store.ListClaimable(ctx, limit)
		if err != nil {
			errs = append(errs, err)
			break
		}
		stop := false
		for _, w := range cands {
			if s.stopped(ctx) || len(plans) >= slots {
				stop = true
				break
			}
			if seen[w.ID] {
				continue
			}
			seen[w.ID] = true
			key := bindingKey(w.Scope, w.Binding)
			if room, full := s.prepareRoom(key, len(plans), planned[key], quick[key]); full {
				stop = true
				break
			} else if !room {
				continue
			}
			p, err := s.planClaim(ctx, w)
			if err != nil {
				errs = append(errs, fmt.Errorf("claim %s: %w", w.ID, err))
			}
			if p != nil {
				plans = append(plans, p)
				planned[key]++
				quick[key] = quickPrepare(p.ex, p.b)
			}
		}
		if stop || len(plans) >= slots || len(cands) < limit || limit >= storage.MaxLimit {
			break
		}
	}
	for _, p := range plans {
		s.prepareAtClaim(ctx, p)
	}
	started := 0
	for _, p := range s.claimAll(ctx, plans) {
		if p.err != nil {
			errs = append(errs, fmt.Errorf("claim %s: %w", p.w.ID, p.err))
			continue
		}
		if !p.claimed {
			continue
		}
		started++
		kind := kindRun
		if p.resume {
			kind = kindResume
		}
		s.o.Logger.Info("attempt claimed", "work", p.w.ID, "execution", p.exe.ID, "epoch", p.exe.Epoch, "kind", kind)
		if p.atClaim {
			// The deadline is the claim's own.
			req := p.req
			req.Epoch, req.Deadline = p.exe.Epoch, p.exe.Deadline
			if s.stopped(ctx) || !s.start(p.exe, kindRun, req, p.ex) {
				if err := s.giveBack(ctx, p.exe, kindRun, p.w.InputWatermark); err != nil {
					errs = append(errs, fmt.Errorf("claim %s: %w", p.w.ID, err))
				}
			}
			continue
		}
		if err := s.prepare(ctx, p.exe, p.w, p.b, p.ex, kind, p.w.InputWatermark, p.token); err != nil {
			errs = append(errs, fmt.Errorf("claim %s: %w", p.w.ID, err))
		}
	}
	return started, errors.Join(errs...)
}

func (s *Scheduler) hold(ctx context.Context, workID, reason, detail string) error {
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := s.rt.HoldInTx(ctx, tx, workID, reason, detail)
		return err
	})
	if err == nil {
		s.o.Logger.Warn("work held", "work", workID, "reason", reason, "detail", detail)
	}
	return err
}

// claimPlan is a ready Work the round will claim, with what was decided
// before the claim's transaction: its binding, executor, live execution
// and whether it resumes it.
type claimPlan struct {
	w       storage.Work
	b       Binding
	ex      executor.Executor
	live    storage.Execution
	hasLive bool
	resume  bool
	// issue: the attempt's token is issued inside the claim's
	// transaction (the toolbelt can, the executor uses it and its
	// preflight passed).
	issue bool
	// atClaim: the segment was prepared before the claim (req, with the
	// execution id exeID), and the claim inserts its execution launched;
	// once it commits the segment starts at once (see prepareAtClaim).
	atClaim bool
	exeID   string
	req     executor.RunRequest

	// What the claim's transaction made of it.
	claimed bool
	exe     storage.Execution
	token   string
	err     error
}

// planClaim decides, outside any transaction, whether and how w is
// claimed: nil when it is not (its execution is still live, its binding
// or executor is unavailable and it was held, or a start gate parked or
// refused it).
func (s *Scheduler) planClaim(ctx context.Context, w storage.Work) (*claimPlan, error) {
	// A Work no attempt has claimed yet has no execution, so its live
	// one is not read (a read that finds nothing, per new Work). Were
	// one there all the same, the claim's insert would be refused by
	// the one-live-execution-per-Work index and the Work skipped, as a
	// Work with a running execution is skipped here.
	var live storage.Execution
	var hasLive bool
	if w.Attempts > 0 {
		var err error
		live, err = s.store.GetLiveExecution(ctx, w.ID)
		hasLive = err == nil
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
	}
	if hasLive && live.State != storage.ExecutionParked {
		return nil, nil
	}
	var gen int64
	if hasLive {
		gen = live.Generation
	}
	b, err := s.o.Bindings(ctx, BindingQuery{Scope: w.Scope, Binding: w.Binding, Generation: gen})
	if err != nil {
		return nil, s.hold(ctx, w.ID, kernel.HoldBindingUnavailable, fmt.Sprintf("binding %s of scope %s is not available; fix the configuration and retry the Work", w.Binding, w.Scope))
	}
	ex := s.executor(b.Executor)
	if ex == nil {
		return nil, s.hold(ctx, w.ID, kernel.HoldBindingUnavailable, fmt.Sprintf("executor %q of binding %s is not available in this daemon; fix the configuration and retry the Work", b.Executor, w.Binding))
	}
	if !hasLive && w.Attempts == 0 {
		if pass, err := s.askStartGates(ctx, w, b.Generation); !pass {
			return nil, err
		}
	}
	p := &claimPlan{w: w, b: b, ex: ex, live: live, hasLive: hasLive, resume: hasLive && ex.Info().Has(executor.CapResume)}
	if _, ok := s.o.Toolbelt.(toolbelt.TxTokenIssuer); ok && usesToolbelt(ex, b) {
		// The token is issued in the claim's own transaction only once
		// the executor said it can run the binding here: a binding it
		// cannot run is held before any token exists (see launch).
		p.issue = true
		if pf, ok := ex.(executor.Preflighter); ok && pf.Preflight(b.Config) != nil {
			p.issue = false
		}
	}
	return p, nil
}

// claimAll claims the plans in one transaction, the tokens of those that
// issue one included. When any claim fails (its Work or execution moved
// since it was listed), that transaction is rolled back whole and each
// plan is claimed again in a transaction of its own, as it would have
// been alone, so one Work that moved never costs the others their claim.
func (s *Scheduler) claimAll(ctx context.Context, plans []*claimPlan) []*claimPlan {
	if len(plans) > 1 {
		err := s.store.WithTx(ctx, func(tx storage.Tx) error {
			claimed, err := s.claimWorkInTx(ctx, tx, plans)
			if err != nil {
				return err
			}
			if err := s.insertExecutionsInTx(ctx, tx, plans, claimed); err != nil {
				return err
			}
			for _, p := range plans {
				if err := s.claimRestInTx(ctx, tx, p, claimed[p.w.ID]); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for _, p := range plans {
				p.claimed = true
			}
			return plans
		}
	}
	for _, p := range plans {
		err := s.store.WithTx(ctx, func(tx storage.Tx) error { return s.claimInTx(ctx, tx, p) })
		switch {
		case errors.Is(err, storage.ErrFenced) || errors.Is(err, storage.ErrDuplicate):
			// The Work or its execution moved since it was listed.
		case err != nil:
			p.err = err
		default:
			p.claimed = true
		}
	}
	return plans
}

// claimInTx is one plan's claim inside tx: the Work running, and a new
// execution at epoch 1 or the parked one's next epoch, with its token
// when the plan issues one.
func (s *Scheduler) claimInTx(ctx context.Context, tx storage.Tx, p *claimPlan) error {
	return s.claimRestInTx(ctx, tx, p, false)
}

// claimWorkInTx moves the Work of the round's new attempts to running in
// one statement (storage.Tx.ClaimWork, all or none of the rows as they
// were listed) and returns the ids it moved; a resumed Work counts no
// attempt and is left to claimRestInTx. storage.ErrFenced, here or from
// a later statement of the transaction, when one of them moved since it
// was listed: the round then claims plan by plan.
func (s *Scheduler) claimWorkInTx(ctx context.Context, tx storage.Tx, plans []*claimPlan) (map[string]bool, error) {
	var list []storage.Work
	for _, p := range plans {
		if !p.resume {
			list = append(list, p.w)
		}
	}
	if len(list) < 2 {
		return nil, nil
	}
	ws, err := tx.ClaimWork(ctx, &storage.ClaimWorkParams{Listed: list, Now: s.now()})
	if err != nil {
		return nil, err
	}
	moved := make(map[string]bool, len(ws))
	for _, w := range ws {
		moved[w.ID] = true
	}
	return moved, nil
}

// insertExecutionsInTx inserts the new executions of the plans whose Work
// claimWorkInTx moved (none of them has a parked execution to end first)
// in one statement (storage.Tx.InsertExecutions), and sets each plan's
// exe. storage.ErrDuplicate when one was refused: the round then claims
// plan by plan.
func (s *Scheduler) insertExecutionsInTx(ctx context.Context, tx storage.Tx, plans []*claimPlan, moved map[string]bool) error {
	var batch []*claimPlan
	for _, p := range plans {
		if moved[p.w.ID] && !p.hasLive {
			batch = append(batch, p)
		}
	}
	if len(batch) < 2 {
		return nil
	}
	now, lim := s.now(), s.Limits()
	ps := make([]storage.InsertExecutionParams, len(batch))
	for i, p := range batch {
		ps[i] = s.newExecution(p, now, lim)
	}
	es, err := tx.InsertExecutions(ctx, ps)
	if err != nil {
		return err
	}
	if len(es) != len(ps) {
		return fmt.Errorf("%w: an execution of the round's claims was refused", storage.ErrDuplicate)
	}
	byWork := make(map[string]storage.Execution, len(es))
	for _, e := range es {
		byWork[e.Work] = e
	}
	for _, p := range batch {
		p.exe = byWork[p.w.ID]
	}
	return nil
}

// newExecution is the new execution of a plan's attempt, claimed at now:
// launched already when the plan's segment was prepared before its claim.
func (s *Scheduler) newExecution(p *claimPlan, now time.Time, lim Limits) storage.InsertExecutionParams {
	w := p.w
	id := p.exeID
	if id == "" {
		id = s.o.IDs.New(ids.Execution)
	}
	return storage.InsertExecutionParams{
		ID: id, Work: w.ID, Scope: w.Scope, Binding: w.Binding, Executor: p.b.Executor,
		Generation: p.b.Generation, Owner: s.o.Owner, Node: s.o.Node, LeaseExpiresAt: now.Add(lim.Lease), Deadline: now.Add(lim.AttemptTimeout),
		InputWatermark: w.InputCount, Launched: p.atClaim, CreatedAt: now,
	}
}

// prepareAtClaim prepares, before its claim, the segment of a new attempt
// whose preparation has nothing that can wait or be cut short: no token,
// no endpoint, no secret the binding selects (quickPrepare), no directory
// (a Dirless executor), a preflight that passes. It reads the inputs the
// segment answers (those up to the listed Work's input count, which the
// claim's revision fence keeps) and resolves its environment, and marks
// the plan atClaim: its claim then inserts the execution launched, so the
// claim is the last write before the segment starts, as the launch mark
// is otherwise (see markLaunched), and no preparation, mark transaction
// or commit wait stands between claim and start. Anything that fails here
// leaves the plan to the usual preparation, which holds the Work if it
// fails again.
func (s *Scheduler) prepareAtClaim(ctx context.Context, p *claimPlan) {
	if p.resume || p.hasLive || p.issue || !quickPrepare(p.ex, p.b) || !p.ex.Info().Dirless {
		return
	}
	if pf, ok := p.ex.(executor.Preflighter); ok && pf.Preflight(p.b.Config) != nil {
		return
	}
	w := p.w
	id := s.o.IDs.New(ids.Execution)
	events, err := s.segmentEvents(ctx, storage.Execution{Work: w.ID, InputWatermark: w.InputCount}, kindRun, 0)
	if err != nil {
		return
	}
	req := s.runRequest(storage.Execution{ID: id, Work: w.ID, Scope: w.Scope, Binding: w.Binding, Epoch: 1}, p.b, "")
	req.Events = events
	if s.o.Secrets != nil {
		env, err := s.o.Secrets(ctx, SecretsRequest{ExecutionID: id, WorkID: w.ID, ScopeID: w.Scope, BindingID: w.Binding, Generation: p.b.Generation})
		if err != nil {
			return
		}
		req.Env = env
	}
	p.atClaim, p.exeID, p.req = true, id, req
}

// claimRestInTx is claimInTx with the plan's Work already moved to
// running when moved (claimWorkInTx), and its execution already inserted
// when p.exe is set too (insertExecutionsInTx).
func (s *Scheduler) claimRestInTx(ctx context.Context, tx storage.Tx, p *claimPlan, moved bool) error {
	w, live := p.w, p.live
	now, lim := s.now(), s.Limits()
	if moved && p.exe.ID != "" {
		return s.issueInTx(ctx, tx, p, kindRun)
	}
	if !moved {
		running := storage.WorkRunning
		add := 0
		if !p.resume {
			add = 1
		}
		cur, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{
			ID: w.ID, FromStates: []storage.WorkState{storage.WorkReady}, Revision: w.Revision, State: &running,
			InputWatermark: &w.InputCount, AddAttempts: add, Now: now,
		})
		if err != nil {
			return err
		}
		if cur.Held() {
			return storage.ErrFenced
		}
	}
	var err error
	deadline := now.Add(lim.AttemptTimeout)
	kind := kindRun
	if p.resume {
		kind = kindResume
		p.exe, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{
			ID: live.ID, FromEpoch: live.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionParked},
			State: storage.ExecutionRunning, Owner: s.o.Owner, Node: s.o.Node, LeaseExpiresAt: now.Add(lim.Lease),
			Deadline: &deadline, InputWatermark: &w.InputCount, Now: now,
		})
	} else {
		if p.hasLive {
			// The binding's executor can no longer resume the parked
			// execution: it ends and a new attempt starts.
			st, res, msg := storage.ExecutionFinished, storage.ResultCancelled, "superseded: the binding's executor cannot resume it"
			fin, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
				ID: live.ID, Epoch: live.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionParked}, State: &st, Result: &res, Message: &msg, Now: now,
			})
			if err != nil {
				return err
			}
			if err := storage.RevokeFinishedTokens(ctx, tx, fin, now); err != nil {
				return err
			}
		}
		ne := s.newExecution(p, now, lim)
		p.exe, err = tx.InsertExecution(ctx, &ne)
	}
	if err != nil {
		return err
	}
	return s.issueInTx(ctx, tx, p, kind)
}

// issueInTx issues the token of a claimed plan's attempt in the claim's
// transaction, when the plan issues one.
func (s *Scheduler) issueInTx(ctx context.Context, tx storage.Tx, p *claimPlan, kind string) error {
	if !p.issue {
		return nil
	}
	var err error
	p.token, err = s.o.Toolbelt.(toolbelt.TxTokenIssuer).IssueInTx(ctx, tx, tokenRequest(p.exe, p.w, kind))
	if err != nil {
		return fmt.Errorf("issue the attempt's token: %w", err)
	}
	return nil
}

// tokenRequest asks for the token of exe's epoch.
func tokenRequest(exe storage.Execution, w storage.Work, kind string) toolbelt.TokenRequest {
	return toolbelt.TokenRequest{
		ExecutionID: exe.ID, WorkID: exe.Work, ScopeID: exe.Scope, BindingID: exe.Binding, Generation: exe.Generation,
		Epoch: exe.Epoch, Grants: w.Grants, ExpiresAt: exe.Deadline, Reason: kind,
	}
}

// prepareRoom reports whether a claim of the binding key can be prepared
// now (room), and whether no claim at all can be (full). quick says this
// round found the binding quick to prepare (quickPrepare); the per-binding
// limit then counts only its preparations that can block.
func (s *Scheduler) prepareRoom(key string, planned, plannedKey int, quick bool) (room, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.preparing)+planned >= PrepareWorkers {
		return false, true
	}
	n := 0
	if !quick {
		n = plannedKey
	}
	for _, p := range s.preparing {
		if p.key == key && !p.quick {
			n++
		}
	}
	return n < PreparePerBinding, false
}

// quickPrepare says whether preparing an attempt of b on ex cannot block:
// it resolves no secret and makes no toolbelt endpoint.
func quickPrepare(ex executor.Executor, b Binding) bool {
	return b.NoSecrets && !usesToolbelt(ex, b)
}

// prepare launches a committed claim or resume on a goroutine the
// scheduler tracks, so that a slow secret, token or endpoint delays
// neither the round (other Work, stops, recoveries) nor another binding.
// Its lease is renewed by Heartbeat meanwhile; a cancel meanwhile stops
// its preparation (see StopFenced); Close cuts it short and gives the
// claim back. A failure is logged: no round waits for it.
func (s *Scheduler) prepare(ctx context.Context, exe storage.Execution, w storage.Work, b Binding, ex executor.Executor, kind string, prevWatermark int64, token string) error {
	pctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.base, cancel)
	p := &preparation{exe: exe, key: bindingKey(exe.Scope, exe.Binding), quick: quickPrepare(ex, b), cancel: cancel}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		unhook()
		cancel()
		return s.giveBack(ctx, exe, kind, prevWatermark)
	}
	s.preparing[exe.ID] = p
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer unhook()
		err := s.launch(pctx, exe, w, b, ex, kind, prevWatermark, token)
		for confirmed := false; ; confirmed = true {
			s.mu.Lock()
			if !p.stopAsked || confirmed {
				delete(s.preparing, exe.ID)
				close(s.prepared)
				s.prepared = make(chan struct{})
				s.mu.Unlock()
				// A round now claims what waited for this binding's turn.
				s.poke()
				break
			}
			s.mu.Unlock()
			// start refused it: nothing ran, so the stop is confirmed now
			// rather than after its lease lapses.
			err = errors.Join(err, s.confirmUnstarted(context.WithoutCancel(ctx), exe))
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			s.o.Logger.Error("preparing an attempt failed", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch, "error", err)
		}
	}()
	return nil
}

// confirmUnstarted records the stop of a cancelled attempt whose segment
// never started.
func (s *Scheduler) confirmUnstarted(ctx context.Context, exe storage.Execution) error {
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		cur, err := tx.GetExecution(ctx, exe.ID)
		if err != nil || cur.State != storage.ExecutionStopping || cur.Owner != s.o.Owner {
			return err
		}
		_, err = s.rt.ConfirmStoppedInTx(ctx, tx, exe.ID, cur.Epoch, "stopped before its segment started", nil)
		return err
	})
	if errors.Is(err, kernel.ErrExecutionState) {
		return nil
	}
	return err
}

// ---- launching segments ----

// executionDir is the directory the host owns for execution id under
// ex: "" for a Dirless executor, which gets none.
func (s *Scheduler) executionDir(ex executor.Executor, id string) string {
	if ex.Info().Dirless {
		return ""
	}
	return filepath.Join(s.o.ExecutionsDir, id)
}

// launch prepares and starts a segment: token, endpoint, secrets, then the
// executor call on a goroutine the scheduler owns. A failure before the
// executor is called holds the Work (see abort), unless the scheduler is
// closing or ctx ended meanwhile: then the segment is given back (see
// giveBack), as it is when the scheduler closed before the call started.
// token, when not empty, is the attempt's token, issued with its claim
// after its executor's preflight passed (see planClaim).
func (s *Scheduler) launch(ctx context.Context, exe storage.Execution, w storage.Work, b Binding, ex executor.Executor, kind string, prevWatermark int64, token string) error {
	abort := func(reason, detail string) error {
		if s.stopped(ctx) {
			return s.giveBack(ctx, exe, kind, prevWatermark)
		}
		return s.abort(ctx, exe, kind, prevWatermark, reason, detail)
	}
	dir := s.executionDir(ex, exe.ID)
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return abort(kernel.HoldBindingUnavailable, "the execution directory could not be created; check the state directory and retry the Work")
		}
	}
	req := s.runRequest(exe, b, dir)
	if kind == kindResume || kind == kindRecover {
		req.Session = exe.Session
	}
	events, err := s.segmentEvents(ctx, exe, kind, prevWatermark)
	if err != nil {
		return abort(kernel.HoldBindingUnavailable, "the Work's input Events could not be read for the attempt; check the state directory and retry the Work")
	}
	req.Events = events
	// An executor that can tell it cannot run the binding here (a sandbox
	// this machine cannot make) holds the Work before any token exists.
	if pf, ok := ex.(executor.Preflighter); ok && kind != kindRecover && token == "" {
		if err := pf.Preflight(b.Config); err != nil {
			reason, detail := kernel.HoldBindingUnavailable, "the executor cannot run the binding on this machine; fix it and retry the Work"
			var ue *executor.UnavailableError
			if errors.As(err, &ue) && ue.Reason != "" {
				reason, detail = ue.Reason, safeMessage(ue.Detail)
			}
			return abort(reason, detail)
		}
	}
	if s.o.Toolbelt != nil && usesToolbelt(ex, b) {
		if token == "" {
			var err error
			token, err = s.o.Toolbelt.Issue(ctx, tokenRequest(exe, w, kind))
			if err != nil {
				return abort(kernel.HoldToolbeltFailed, "no toolbelt token could be issued for the attempt; retry the Work")
			}
		}
		ep, err := s.o.ToolbeltEndpoints(ctx, exe.ID, token)
		if err != nil {
			return abort(kernel.HoldToolbeltFailed, "toolbelt endpoint unavailable: "+err.Error())
		}
		req.Context.Token, req.Context.ToolbeltEndpoint, req.Context.ToolbeltTokenFile = token, ep.Socket, ep.TokenFile
	}
	// Recovery starts nothing: the process it adopts has its environment
	// already, so recovery never resolves a secret (a secret source that
	// is briefly unreadable must not leave a running attempt unobserved).
	if s.o.Secrets != nil && kind != kindRecover {
		env, err := s.o.Secrets(ctx, SecretsRequest{ExecutionID: exe.ID, WorkID: exe.Work, ScopeID: exe.Scope, BindingID: exe.Binding, Generation: exe.Generation})
		if err != nil {
			detail := "a secret of binding " + exe.Binding + " could not be resolved; fix it and retry the Work"
			var se *SecretError
			if errors.As(err, &se) {
				detail = fmt.Sprintf("secret %s of binding %s could not be resolved (%s); fix it and retry the Work", se.Name, exe.Binding, se.Code)
			}
			return abort(kernel.HoldSecretUnavailable, detail)
		}
		req.Env = env
	}
	if s.stopped(ctx) {
		return s.giveBack(ctx, exe, kind, prevWatermark)
	}
	if kind != kindRecover {
		launched, err := s.markLaunched(ctx, exe)
		if err != nil || !launched {
			// Not marked, so not started: a later recovery finds the
			// attempt never launched and gives it back.
			return err
		}
	}
	if !s.start(exe, kind, req, ex) {
		return s.giveBack(ctx, exe, kind, prevWatermark)
	}
	return nil
}

// runRequest is the request of a segment of exe under binding b in dir,
// before its inputs, session, token and environment.
func (s *Scheduler) runRequest(exe storage.Execution, b Binding, dir string) executor.RunRequest {
	return executor.RunRequest{
		ExecutionID: exe.ID, WorkID: exe.Work, ScopeID: exe.Scope, BindingID: exe.Binding, Epoch: exe.Epoch,
		Config: b.Config, Dir: dir, Deadline: exe.Deadline,
		Context: executor.ExecutionContext{ToolbeltDir: s.o.ToolbeltDir, PlaybookDir: s.o.PlaybookDir},
	}
}

// usesToolbelt says whether a segment of binding b on ex gets a token and
// an endpoint: not when the executor's transport is none, nor when the
// binding grants no operation and the executor can run its config without
// the endpoint (executor.EndpointOptional).
func usesToolbelt(ex executor.Executor, b Binding) bool {
	if ex.Info().Transport == executor.TransportNone {
		return false
	}
	opt, ok := ex.(executor.EndpointOptional)
	return !b.NoOperations || !ok || opt.NeedsEndpoint(b.Config)
}

// MaxSegmentEvents bounds the input Events one segment is given
// (RunRequest.Events): of the inputs it answers, the newest
// MaxSegmentEvents, oldest first. An older input is still the Work's
// (work inputs, events list); the segment is not handed it.
const MaxSegmentEvents = 100

// segmentEvents are the input Events a segment answers, oldest first and
// at most the newest MaxSegmentEvents: for a new attempt (kindRun) every
// input up to its watermark; for a resume the inputs after prevWatermark
// (what the Work had acknowledged before the resume: the inputs that woke
// it) up to the new watermark; none for a recovery, whose process has its
// prompt already.
func (s *Scheduler) segmentEvents(ctx context.Context, exe storage.Execution, kind string, prevWatermark int64) ([]executor.Event, error) {
	var after int64
	switch kind {
	case kindRun:
	case kindResume:
		after = prevWatermark
	default:
		return nil, nil
	}
	until := exe.InputWatermark
	if until <= after {
		return nil, nil
	}
	// Positions count from 1 without gaps: the newest inputs are the
	// last MaxSegmentEvents positions.
	after = max(after, until-MaxSegmentEvents)
	ins, err := s.store.ListInputs(ctx, &storage.ListInputsParams{Work: exe.Work, AfterPosition: after, UntilPosition: until, Limit: MaxSegmentEvents})
	if err != nil {
		return nil, err
	}
	out := make([]executor.Event, 0, len(ins))
	for _, in := range ins {
		ev, err := s.store.GetEvent(ctx, in.Event)
		if err != nil {
			return nil, err
		}
		out = append(out, segmentEvent(ev))
	}
	return out, nil
}

// segmentEvent is what a segment sees of an input Event.
func segmentEvent(ev storage.Event) executor.Event {
	data := ev.Data
	if len(data) == 0 {
		data = []byte("null")
	}
	return executor.Event{
		ID: ev.ID, Seq: ev.Seq, Type: ev.Type, Source: ev.Source, Scope: ev.Scope, CorrelationKey: ev.CorrelationKey,
		Data: append([]byte(nil), data...), AcceptedAt: ev.AcceptedAt,
	}
}

// abort undoes a claim, resume or recovery whose segment could not start,
// and holds the Work with reason: a new execution finishes failed; a
// resumed one goes back to parked; a recovered one was not adopted: its
// process may still run, unobserved, so it stays running with its lease
// expired and the Work stays running, held, until a retry lets recovery
// adopt it again (a retry of a running Work starts nothing: see
// kernel.Runtime.RetryInTx). Inputs a new or resumed segment was to be
// given are given again next time.
func (s *Scheduler) abort(ctx context.Context, exe storage.Execution, kind string, prevWatermark int64, reason, detail string) error {
	now := s.now()
	return s.store.WithTx(ctx, func(tx storage.Tx) error {
		fence := &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning}, Now: now}
		switch kind {
		case kindRun:
			st, res := storage.ExecutionFinished, storage.ResultFailed
			fence.State, fence.Result, fence.Message = &st, &res, &detail
		case kindResume:
			st := storage.ExecutionParked
			fence.State = &st
		case kindRecover:
			fence.LeaseExpiresAt = &now
		}
		fin, err := tx.UpdateExecution(ctx, fence)
		if err != nil {
			return err
		}
		if err := storage.RevokeFinishedTokens(ctx, tx, fin, now); err != nil {
			return err
		}
		ready := storage.WorkReady
		upd := &storage.UpdateWorkParams{ID: exe.Work, FromStates: storage.NonterminalWorkStates, BlockedReason: &reason, BlockedDetail: &detail, Now: now}
		if kind != kindRecover {
			upd.State, upd.InputWatermark = &ready, &prevWatermark
		}
		_, err = tx.UpdateWork(ctx, upd)
		switch {
		case err == nil && kind == kindRecover:
			s.o.Logger.Warn("attempt not adopted; its process may still run; work held", "work", exe.Work, "execution", exe.ID, "reason", reason)
		case err == nil:
			s.o.Logger.Warn("attempt not started; work held", "work", exe.Work, "execution", exe.ID, "reason", reason)
		}
		return err
	})
}

// giveBack undoes a claim, resume or recovery whose segment was never
// started because the scheduler is closing (or the round's context ended):
// nothing ran, so nothing is held and nothing counts. A new execution
// finishes cancelled and is not counted as an attempt; a resumed one is
// parked again; a recovered one (running or stopping) keeps its state with
// its lease expired, for the next daemon to adopt at once. The Work is
// ready again and gets the inputs the segment was to be given. It writes
// even though ctx ended: a claim left half done would be taken for an
// attempt that vanished.
func (s *Scheduler) giveBack(ctx context.Context, exe storage.Execution, kind string, prevWatermark int64) error {
	ctx = context.WithoutCancel(ctx)
	now := s.now()
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		fence := &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{exe.State}, Now: now}
		switch kind {
		case kindRun:
			st, res, msg := storage.ExecutionFinished, storage.ResultCancelled, "not started: the daemon was shutting down, so the Work is claimed again"
			fence.State, fence.Result, fence.Message = &st, &res, &msg
		case kindResume:
			st := storage.ExecutionParked
			fence.State = &st
		default:
			fence.LeaseExpiresAt = &now
		}
		fin, err := tx.UpdateExecution(ctx, fence)
		if err != nil {
			return err
		}
		if err := storage.RevokeFinishedTokens(ctx, tx, fin, now); err != nil {
			return err
		}
		if kind != kindRun && kind != kindResume {
			return nil
		}
		ready := storage.WorkReady
		upd := &storage.UpdateWorkParams{ID: exe.Work, FromStates: []storage.WorkState{storage.WorkRunning}, State: &ready, InputWatermark: &prevWatermark, Now: now}
		if kind == kindRun {
			upd.AddAttempts = -1
		}
		_, err = tx.UpdateWork(ctx, upd)
		return err
	})
	if errors.Is(err, storage.ErrFenced) {
		// A cancel fenced the attempt meanwhile; recovery stops it.
		return nil
	}
	if err == nil {
		s.o.Logger.Info("segment not started while shutting down; given back", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch, "kind", kind)
	}
	return err
}

// start runs the executor call on a goroutine the scheduler tracks. A
// segment already tracked for the execution (an older epoch) is detached.
// It starts nothing and returns false once the scheduler is closing.
func (s *Scheduler) start(exe storage.Execution, kind string, req executor.RunRequest, ex executor.Executor) bool {
	segCtx, cancel := context.WithCancel(s.base)
	seg := &segment{exe: exe, kind: kind, req: req, ex: ex, cancel: cancel, done: make(chan struct{}), stopping: kind == kindStop}
	s.mu.Lock()
	if p := s.preparing[exe.ID]; s.closed || (p != nil && p.stopAsked) {
		s.mu.Unlock()
		cancel()
		return false
	}
	if old := s.segments[exe.ID]; old != nil {
		old.cancel()
	}
	s.segments[exe.ID] = seg
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer close(seg.done)
		var res executor.Result
		var err error
		switch kind {
		case kindRun:
			res, err = ex.Run(segCtx, req)
		case kindResume:
			res, err = ex.Resume(segCtx, req)
		case kindRecover:
			res, err = ex.Recover(segCtx, req)
		case kindStop:
			err = ex.Stop(segCtx, req, s.o.StopGrace)
			if err == nil && segCtx.Err() != nil {
				err = executor.ErrDetached
			}
		}
		seg.ended = err == nil && kind != kindStop
		s.enqueue(result{executionID: exe.ID, epoch: exe.Epoch, kind: kind, res: res, err: err})
	}()
	return true
}

func (s *Scheduler) enqueue(r result) {
	s.mu.Lock()
	if seg := s.segments[r.executionID]; seg != nil && seg.exe.Epoch == r.epoch && seg.kind == r.kind {
		delete(s.segments, r.executionID)
	}
	if !s.closed {
		s.results = append(s.results, r)
	}
	s.mu.Unlock()
	s.poke()
}

// poke signals Notify without blocking.
func (s *Scheduler) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// WaitSegment blocks until the segment the scheduler runs for the
// execution at epoch has reported (its result is queued for the next
// Tick), or ctx ends. It returns at once when no such segment is tracked.
func (s *Scheduler) WaitSegment(ctx context.Context, executionID string, epoch int64) error {
	s.mu.Lock()
	seg := s.segments[executionID]
	s.mu.Unlock()
	if seg == nil || seg.exe.Epoch != epoch {
		return nil
	}
	select {
	case <-seg.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitPrepared blocks until no claim is being prepared (every claim made
// so far has started its segment, been held or been given back), or ctx
// ends.
func (s *Scheduler) WaitPrepared(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := len(s.preparing), s.prepared
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// TrackedSegment is an executor call the scheduler observes.
type TrackedSegment struct {
	ExecutionID string
	Epoch       int64
	// Kind is claim, resume, recover, or stop (an adopted stopping
	// attempt).
	Kind string
	// Stopping: the scheduler asked the executor to stop it.
	Stopping bool
}

// Tracked lists the executor calls this scheduler observes.
func (s *Scheduler) Tracked() []TrackedSegment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TrackedSegment, 0, len(s.segments))
	for id, seg := range s.segments {
		out = append(out, TrackedSegment{ExecutionID: id, Epoch: seg.exe.Epoch, Kind: seg.kind, Stopping: seg.stopping})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ExecutionID < out[j].ExecutionID })
	return out
}

// ---- results ----

// ApplyResults applies what segments reported since the last call and
// returns how many it applied. A detached observation (ErrDetached) is
// dropped: the process keeps running and is recovered when its lease
// expires. A result refused for a superseded epoch is dropped too.
//
// The results are applied in the order they were reported; consecutive
// completions (a segment's end, observed or not) are applied together in
// one transaction, one after the other inside it, so a round that
// applies many results commits once (see completeAll).
func (s *Scheduler) ApplyResults(ctx context.Context) (int, error) {
	s.mu.Lock()
	rs := s.results
	s.results = nil
	s.mu.Unlock()
	outcomes := make([]error, len(rs))
	var batch []*completion
	var at []int
	flush := func() {
		for j, err := range s.completeAll(ctx, batch) {
			outcomes[at[j]] = err
		}
		batch, at = nil, nil
	}
	for i, r := range rs {
		if c := s.completionOf(r); c != nil {
			batch, at = append(batch, c), append(at, i)
			continue
		}
		flush()
		outcomes[i] = s.applyResult(ctx, r)
	}
	flush()
	n := 0
	var errs []error
	for i, r := range rs {
		err := outcomes[i]
		switch {
		case err == nil:
			n++
		case errors.Is(err, kernel.ErrStaleEpoch), errors.Is(err, kernel.ErrExecutionState):
			s.o.Logger.Info("result of a superseded attempt dropped", "execution", r.executionID, "epoch", r.epoch, "error", err)
		case errors.Is(err, errUnobservedStop):
			s.o.Logger.Warn("the executor failed to observe a stopping attempt; its stop is confirmed once its process is seen gone", "execution", r.executionID, "epoch", r.epoch, "error", r.err)
		default:
			errs = append(errs, fmt.Errorf("apply result of %s epoch %d: %w", r.executionID, r.epoch, err))
		}
	}
	return n, errors.Join(errs...)
}

// completionOf stages the completion a result is (a segment's end,
// observed or not, see applyResult), or returns nil for a result that is
// something else: a detached observation, a recovered attempt's stop, a
// recovered segment gone.
func (s *Scheduler) completionOf(r result) *completion {
	switch {
	case errors.Is(r.err, executor.ErrDetached), r.kind == kindStop, r.kind == kindRecover && errors.Is(r.err, executor.ErrGone):
		return nil
	case r.err != nil:
		res := executor.Result{Outcome: executor.Failed, Message: safeMessage("the executor failed to observe the segment: " + r.err.Error())}
		return s.stageCompletion(r.executionID, r.epoch, res, false)
	}
	return s.stageCompletion(r.executionID, r.epoch, r.res, true)
}

// completeAll applies staged completions, in order, in one transaction,
// and returns each one's error. When any of them fails, that transaction
// is rolled back whole and each is applied again in a transaction of its
// own, exactly as it would have been alone: one result refused (a
// superseded epoch) or failing never takes the others with it.
func (s *Scheduler) completeAll(ctx context.Context, cs []*completion) []error {
	errs := make([]error, len(cs))
	s.syncStaged(cs)
	if len(cs) > 1 {
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.executionID
		}
		err := s.store.WithTx(ctx, func(tx storage.Tx) error {
			// Each completion reads its guard first: read them all now
			// (one statement on PostgreSQL instead of one each).
			if err := tx.ReadCallGuardsAhead(ctx, ids); err != nil {
				return err
			}
			for _, c := range cs {
				if err := s.completeInTx(ctx, tx, c); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for _, c := range cs {
				c.done()
				s.logOutcome(ctx, c)
			}
			return errs
		}
	}
	for i, c := range cs {
		errs[i] = s.store.WithTx(ctx, func(tx storage.Tx) error { return s.completeInTx(ctx, tx, c) })
		if errs[i] != nil {
			c.discard()
			continue
		}
		c.done()
		s.logOutcome(ctx, c)
	}
	return errs
}

// applyResult applies a result alone (in its own transaction).
func (s *Scheduler) applyResult(ctx context.Context, r result) error {
	switch {
	case errors.Is(r.err, executor.ErrDetached):
		return nil
	case r.kind == kindStop:
		if r.err != nil {
			// Its lease is no longer renewed: once it lapses, recovery
			// stops the attempt again with a new epoch.
			s.o.Logger.Warn("stop of a recovered attempt failed; it is stopped again once its lease lapses", "execution", r.executionID, "epoch", r.epoch, "error", r.err)
			return nil
		}
		// The host saw the process gone, but not how it ended: no exit
		// code is recorded.
		return s.store.WithTx(ctx, func(tx storage.Tx) error {
			_, err := s.rt.ConfirmStoppedInTx(ctx, tx, r.executionID, r.epoch, "stopped by the host; how the process ended was not observed", nil)
			return err
		})
	case r.kind == kindRecover && errors.Is(r.err, executor.ErrGone):
		return s.lost(ctx, r.executionID, r.epoch)
	case r.err != nil:
		res := executor.Result{Outcome: executor.Failed, Message: safeMessage("the executor failed to observe the segment: " + r.err.Error())}
		return s.complete(ctx, r.executionID, r.epoch, res, false)
	}
	return s.Complete(ctx, r.executionID, r.epoch, r.res)
}

func safeMessage(m string) string {
	const max = 512
	if len(m) > max {
		return m[:max] + "…"
	}
	return m
}

// lost records that a recovered segment left nothing behind: the
// execution finishes lost and the Work is held with attempt_lost, since
// nobody can tell what the segment did.
func (s *Scheduler) lost(ctx context.Context, executionID string, epoch int64) error {
	now := s.now()
	return s.store.WithTx(ctx, func(tx storage.Tx) error {
		st, res, msg := storage.ExecutionFinished, storage.ResultLost, "the segment vanished without a status"
		exe, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: executionID, Epoch: epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning}, State: &st, Result: &res, Message: &msg, Now: now,
		})
		if errors.Is(err, storage.ErrFenced) {
			return kernel.ErrStaleEpoch
		}
		if err != nil {
			return err
		}
		if err := storage.RevokeFinishedTokens(ctx, tx, exe, now); err != nil {
			return err
		}
		ready, reason := storage.WorkReady, kernel.HoldAttemptLost
		detail := "execution " + executionID + " vanished without a status after a restart; check what it did, then retry the Work"
		_, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: exe.Work, FromStates: storage.NonterminalWorkStates, State: &ready, BlockedReason: &reason, BlockedDetail: &detail, Now: now})
		return err
	})
}
