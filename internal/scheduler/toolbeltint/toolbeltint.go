// Package toolbeltint runs the toolbelt conformance suite
// (internal/runtime/toolbelttest) on attempts the real scheduler runs: the
// Harness here is the production toolbelt.Toolbelt as the scheduler's
// Options.Toolbelt, with a Driver whose scheduler claims every
// Work (Tick), recovers expired leases (RecoverExpired), adopts another
// daemon's attempts (RecoverOrphans), resumes parked executions and
// applies every segment's end (ApplyResults, so Complete). Every token a
// case uses is the one the scheduler issued and handed to the scripted
// executor (schedulertest) in its RunRequest, and the driver checks that
// it is also the one the scheduler gave ToolbeltEndpoints.
//
// It lives below internal/scheduler because it needs both the scheduler
// and the runtime's suite; it must never be imported by production code.
package toolbeltint

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// Harness is the production toolbelt with every attempt run by the real
// scheduler.
var Harness = Scheduled(toolbelttest.Real)

// Scheduled returns base with its attempts run by the real scheduler.
func Scheduled(base toolbelttest.Harness) toolbelttest.Harness {
	base.Name += " under the scheduler"
	base.Driver = func() toolbelttest.Driver { return NewDriver() }
	return base
}

// Executor names: the binding toolbelttest.Binding runs on plain (not
// resume-capable), toolbelttest.Resumable on resumer.
const (
	Plain   = "plain"
	Resumer = "resumer"
)

// Issue is one ToolbeltEndpoints call: the execution, the token the
// scheduler handed it, and the endpoint it answered.
type Issue struct {
	Execution string
	Token     string
	Endpoint  scheduler.Endpoint
}

// Driver runs a fixture's attempts through a scheduler. Its scripted
// executors and its record of endpoint calls outlive every restart of the
// scheduler (reopen and adoption), as the executions' processes and run
// directories do.
type Driver struct {
	execs map[string]*schedulertest.Executor

	mu     sync.Mutex
	issued []Issue

	s *scheduler.Scheduler
}

var _ toolbelttest.Scheduled = (*Driver)(nil)

// NewDriver returns a driver with no scheduler running yet.
func NewDriver() *Driver {
	return &Driver{execs: map[string]*schedulertest.Executor{
		Plain: schedulertest.New(executor.Info{Name: Plain, Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}}),
		Resumer: schedulertest.New(executor.Info{Name: Resumer, Transport: executor.TransportOS,
			Capabilities: []executor.Capability{executor.CapToolbelt, executor.CapResume}}),
	}}
}

// Issued lists the endpoint calls so far, in order.
func (d *Driver) Issued() []Issue {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Issue(nil), d.issued...)
}

// endpoints is the scheduler's ToolbeltEndpoints: it records what it was
// given and answers the execution's endpoint in the fixture's directory.
func (d *Driver) endpoints(dir string) scheduler.ToolbeltEndpoints {
	return func(_ context.Context, executionID, token string) (scheduler.Endpoint, error) {
		ep := scheduler.Endpoint{
			Socket:    filepath.Join(dir, "runs", executionID, "toolbelt.sock"),
			TokenFile: filepath.Join(dir, "runs", executionID, "token", "token"),
		}
		d.mu.Lock()
		d.issued = append(d.issued, Issue{Execution: executionID, Token: token, Endpoint: ep})
		d.mu.Unlock()
		return ep, nil
	}
}

// Open starts a scheduler as f's current owner, with f.TB as its token
// issuer.
func (d *Driver) Open(f *toolbelttest.Fixture) error {
	execs := map[string]executor.Executor{}
	for name, ex := range d.execs {
		execs[name] = ex
	}
	s, err := scheduler.New(scheduler.Options{
		Store: f.Env.Store, Runtime: f.Env.Runtime, Owner: f.Env.Owner,
		Limits:    scheduler.Limits{MaxRunning: 64, Lease: toolbelttest.Lease, AttemptTimeout: toolbelttest.Deadline},
		Executors: execs,
		Bindings: func(_ context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			name := map[string]string{toolbelttest.Binding: Plain, toolbelttest.Resumable: Resumer}[q.Binding]
			if q.Scope != toolbelttest.Scope || name == "" {
				return scheduler.Binding{}, fmt.Errorf("no binding %s in scope %s", q.Binding, q.Scope)
			}
			return scheduler.Binding{Executor: name, Config: json.RawMessage(`{}`), Generation: 1}, nil
		},
		Toolbelt: f.TB, ToolbeltEndpoints: d.endpoints(f.Dir()),
		ExecutionsDir: filepath.Join(f.Dir(), "executions"),
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	d.s = s
	return nil
}

// Close stops the scheduler: its executor calls detach, as at a daemon's
// shutdown.
func (d *Driver) Close() error {
	if d.s == nil {
		return nil
	}
	err := d.s.Close()
	d.s = nil
	return err
}

// Claim runs a scheduler round (Tick), which claims w, and returns the
// attempt its executor's Run received.
func (d *Driver) Claim(f *toolbelttest.Fixture, w storage.Work) (*toolbelttest.Attempt, error) {
	ctx := context.Background()
	if err := d.s.Tick(ctx); err != nil {
		return nil, err
	}
	// The claim's segment is prepared and started off the round.
	if err := d.s.WaitPrepared(ctx); err != nil {
		return nil, err
	}
	exe, err := f.Env.Store.GetLiveExecution(ctx, w.ID)
	if err != nil {
		return nil, fmt.Errorf("the scheduler did not claim Work %s: %w", w.ID, err)
	}
	return d.attempt(f, exe.ID, exe.Epoch, "run")
}

// Recover moves the clock past the lease and has the scheduler take the
// attempt over (RecoverExpired); it returns the attempt its executor's
// Recover received.
func (d *Driver) Recover(f *toolbelttest.Fixture, a *toolbelttest.Attempt) (*toolbelttest.Attempt, error) {
	f.Env.Clock.Advance(toolbelttest.Lease + time.Minute)
	if _, err := d.s.RecoverExpired(context.Background()); err != nil {
		return nil, err
	}
	return d.attempt(f, a.Execution.ID, a.Execution.Epoch+1, "recover")
}

// Adopt has the freshly started scheduler of another owner adopt every
// attempt of earlier owners at once (RecoverOrphans); it returns a's, as
// its executor's Recover received it.
func (d *Driver) Adopt(f *toolbelttest.Fixture, a *toolbelttest.Attempt) (*toolbelttest.Attempt, error) {
	if _, err := d.s.RecoverOrphans(context.Background()); err != nil {
		return nil, err
	}
	return d.attempt(f, a.Execution.ID, a.Execution.Epoch+1, "recover")
}

// Resume runs a scheduler round (Tick: due timers fire, the woken Work is
// claimed) and returns the attempt its executor's Resume received.
func (d *Driver) Resume(f *toolbelttest.Fixture, a *toolbelttest.Attempt) (*toolbelttest.Attempt, error) {
	if err := d.s.Tick(context.Background()); err != nil {
		return nil, err
	}
	if err := d.s.WaitPrepared(context.Background()); err != nil {
		return nil, err
	}
	return d.attempt(f, a.Execution.ID, a.Execution.Epoch+1, "resume")
}

// Finish ends the attempt's segment with res and applies it
// (ApplyResults). A segment this scheduler does not observe (it was
// restarted since) is recovered first.
func (d *Driver) Finish(f *toolbelttest.Fixture, a *toolbelttest.Attempt, res executor.Result) (*toolbelttest.Attempt, error) {
	ctx := context.Background()
	if !d.observes(a.Execution.ID, a.Execution.Epoch) {
		next, err := d.Recover(f, a)
		if err != nil {
			return nil, fmt.Errorf("recover the segment the restarted daemon does not observe: %w", err)
		}
		a = next
	}
	seg, err := d.await(a.Execution.Executor, a.Execution.ID, a.Execution.Epoch)
	if err != nil {
		return nil, err
	}
	seg.Finish(res)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a failure guard
	defer cancel()
	if err := d.s.WaitSegment(wctx, a.Execution.ID, a.Execution.Epoch); err != nil {
		return nil, fmt.Errorf("segment %s@%d did not report: %w", a.Execution.ID, a.Execution.Epoch, err)
	}
	if _, err := d.s.ApplyResults(ctx); err != nil {
		return nil, err
	}
	done := *a
	if done.Execution, err = f.Env.Store.GetExecution(ctx, a.Execution.ID); err != nil {
		return nil, err
	}
	if done.Work, err = f.Env.Store.GetWork(ctx, a.Work.ID); err != nil {
		return nil, err
	}
	if done.Execution.Epoch == a.Execution.Epoch && done.Execution.State == storage.ExecutionRunning {
		return nil, fmt.Errorf("the scheduler did not apply the end of %s@%d", a.Execution.ID, a.Execution.Epoch)
	}
	return &done, nil
}

func (d *Driver) observes(executionID string, epoch int64) bool {
	for _, t := range d.s.Tracked() {
		if t.ExecutionID == executionID && t.Epoch == epoch {
			return true
		}
	}
	return false
}

// attempt returns the attempt whose segment the scheduler started for the
// execution at epoch, with the token its executor received. It checks
// that the scheduler handed the executor the token and endpoint it gave
// ToolbeltEndpoints last for that execution.
func (d *Driver) attempt(f *toolbelttest.Fixture, executionID string, epoch int64, kind string) (*toolbelttest.Attempt, error) {
	ctx := context.Background()
	exe, err := f.Env.Store.GetExecution(ctx, executionID)
	if err != nil {
		return nil, err
	}
	w, err := f.Env.Store.GetWork(ctx, exe.Work)
	if err != nil {
		return nil, err
	}
	if exe.Epoch != epoch || !d.observes(executionID, epoch) {
		return nil, fmt.Errorf("the scheduler started no segment for %s@%d (it is at epoch %d, %s; Work held %q: %s)",
			executionID, epoch, exe.Epoch, exe.State, w.BlockedReason, w.BlockedDetail)
	}
	seg, err := d.await(exe.Executor, executionID, epoch)
	if err != nil {
		return nil, err
	}
	if seg.Kind != kind {
		return nil, fmt.Errorf("the executor's call for %s@%d is %s, want %s", executionID, epoch, seg.Kind, kind)
	}
	rc := seg.Req.Context
	if rc.Token == "" {
		return nil, fmt.Errorf("the executor's %s of %s@%d got no token", kind, executionID, epoch)
	}
	var last *Issue
	for _, is := range d.Issued() {
		if is.Execution == executionID {
			last = &is
		}
	}
	if last == nil || last.Token != rc.Token || last.Endpoint.Socket != rc.ToolbeltEndpoint || last.Endpoint.TokenFile != rc.ToolbeltTokenFile {
		return nil, fmt.Errorf("the executor's %s of %s@%d got a token or endpoint the scheduler did not give ToolbeltEndpoints", kind, executionID, epoch)
	}
	digest := bearer.DigestOf(rc.Token)
	tok, err := f.Env.Store.GetTokenByDigest(ctx, digest[:])
	if err != nil {
		return nil, fmt.Errorf("the token the executor got is not stored: %w", err)
	}
	return &toolbelttest.Attempt{Work: w, Execution: exe, Token: rc.Token, TokenID: tok.ID, Kind: kind}, nil
}

// await returns the segment of the executor's call for the execution at
// epoch, waiting for the call (a generous failure guard, not a timing
// assertion).
func (d *Driver) await(executorName, executionID string, epoch int64) (seg *schedulertest.Segment, err error) {
	ex := d.execs[executorName]
	if ex == nil {
		return nil, fmt.Errorf("execution %s runs on executor %q, which this driver does not have", executionID, executorName)
	}
	defer func() {
		if r := recover(); r != nil {
			af, ok := r.(awaitFailed)
			if !ok {
				panic(r)
			}
			err = af.error
		}
	}()
	return ex.Await(guard{}, executionID, epoch), nil
}

// guard turns schedulertest's test failure into an error of the case.
type guard struct{}

type awaitFailed struct{ error }

func (guard) Helper() {}

func (guard) Fatalf(format string, args ...any) {
	panic(awaitFailed{fmt.Errorf(format, args...)})
}
