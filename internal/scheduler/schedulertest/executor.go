// Package schedulertest holds a scripted executor for tests of the
// scheduler and of what is built on it: every Run, Recover and Resume
// becomes a Segment the test finishes with the result it chooses, and Stop
// ends the segment as a killed process would. It runs no process; it
// stands in for an executor only where a test drives the scheduler step by
// step.
//
// It must never be used outside tests.
package schedulertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// Segment is one executor call in progress.
type Segment struct {
	Kind string // run, recover or resume
	Req  executor.RunRequest
	end  chan outcome
	once sync.Once
	done atomic.Bool
}

// Done reports whether the segment was finished (or its call detached).
func (s *Segment) Done() bool { return s.done.Load() }

type outcome struct {
	res executor.Result
	err error
}

// Finish ends the segment with res (the call returns it).
func (s *Segment) Finish(res executor.Result) { s.end1(outcome{res: res}) }

// Fail ends the segment with an executor error.
func (s *Segment) Fail(err error) { s.end1(outcome{err: err}) }

func (s *Segment) end1(o outcome) {
	s.once.Do(func() {
		s.done.Store(true)
		s.end <- o
	})
}

// Executor is the scripted executor.
type Executor struct {
	info    executor.Info
	pulled  map[segKey]*Segment
	mu      sync.Mutex
	live    map[string]*Segment // by execution id
	started chan *Segment
	// gone marks executions whose segment Recover cannot find.
	gone  map[string]bool
	stops []executor.RunRequest
	calls []string
	// failStops Stop calls fail next with stopErr.
	failStops int
	stopErr   error
}

// New returns a scripted executor with the given description.
func New(info executor.Info) *Executor {
	return &Executor{info: info, pulled: map[segKey]*Segment{}, live: map[string]*Segment{}, started: make(chan *Segment, 1024), gone: map[string]bool{}}
}

// Info describes the executor.
func (e *Executor) Info() executor.Info { return e.info }

func (e *Executor) call(ctx context.Context, kind string, req executor.RunRequest) (executor.Result, error) {
	seg := &Segment{Kind: kind, Req: req, end: make(chan outcome, 1)}
	e.mu.Lock()
	e.live[req.ExecutionID] = seg
	e.calls = append(e.calls, fmt.Sprintf("%s %s@%d", kind, req.ExecutionID, req.Epoch))
	e.mu.Unlock()
	e.started <- seg
	select {
	case o := <-seg.end:
		e.mu.Lock()
		if e.live[req.ExecutionID] == seg {
			delete(e.live, req.ExecutionID)
		}
		e.mu.Unlock()
		return o.res, o.err
	case <-ctx.Done():
		seg.done.Store(true)
		e.mu.Lock()
		if e.live[req.ExecutionID] == seg {
			delete(e.live, req.ExecutionID)
		}
		e.mu.Unlock()
		return executor.Result{}, executor.ErrDetached
	}
}

// Run starts a segment.
func (e *Executor) Run(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	return e.call(ctx, "run", req)
}

// Recover re-attaches to a segment, or reports ErrGone for an execution
// marked with Gone.
func (e *Executor) Recover(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	e.mu.Lock()
	gone := e.gone[req.ExecutionID]
	e.mu.Unlock()
	if gone {
		return executor.Result{}, executor.ErrGone
	}
	return e.call(ctx, "recover", req)
}

// Resume continues a parked execution (only with the resume capability).
func (e *Executor) Resume(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	if !e.info.Has(executor.CapResume) {
		return executor.Result{}, errors.New("schedulertest: this executor cannot resume")
	}
	return e.call(ctx, "resume", req)
}

// Stop ends the execution's segment as a killed process: the call returns
// cancelled. A Stop made to fail (FailStops) leaves the segment running.
func (e *Executor) Stop(ctx context.Context, req executor.RunRequest, grace time.Duration) error {
	e.mu.Lock()
	e.stops = append(e.stops, req)
	seg := e.live[req.ExecutionID]
	if e.failStops > 0 {
		e.failStops--
		err := e.stopErr
		e.mu.Unlock()
		return err
	}
	e.mu.Unlock()
	if seg != nil {
		seg.Finish(executor.Result{Outcome: executor.Cancelled, ExitCode: -1, Message: "killed"})
	}
	return nil
}

// FailStops makes the next n Stop calls fail with err, as a stop that
// could not signal the process would.
func (e *Executor) FailStops(n int, err error) {
	e.mu.Lock()
	e.failStops, e.stopErr = n, err
	e.mu.Unlock()
}

// Gone makes Recover of the execution report ErrGone.
func (e *Executor) Gone(executionID string) {
	e.mu.Lock()
	e.gone[executionID] = true
	e.mu.Unlock()
}

// Next waits for the next segment to start. It fails the test after a
// generous bound (a failure guard, not a timing assertion).
func (e *Executor) Next(t testing) *Segment {
	t.Helper()
	select {
	case s := <-e.started:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("schedulertest: no segment started")
		return nil
	}
}

type segKey struct {
	exe   string
	epoch int64
}

// Await returns the segment started for the execution at epoch, waiting
// for it to start (with a generous failure guard). Segments started
// meanwhile for others are kept for their own Await.
func (e *Executor) Await(t testing, executionID string, epoch int64) *Segment {
	t.Helper()
	k := segKey{executionID, epoch}
	e.mu.Lock()
	if s, ok := e.pulled[k]; ok {
		e.mu.Unlock()
		return s
	}
	e.mu.Unlock()
	guard := time.After(10 * time.Second)
	for {
		select {
		case s := <-e.started:
			sk := segKey{s.Req.ExecutionID, s.Req.Epoch}
			e.mu.Lock()
			e.pulled[sk] = s
			e.mu.Unlock()
			if sk == k {
				return s
			}
		case <-guard:
			t.Fatalf("schedulertest: %s@%d did not start", executionID, epoch)
			return nil
		}
	}
}

// TryNext returns a segment that already started, or nil.
func (e *Executor) TryNext() *Segment {
	select {
	case s := <-e.started:
		return s
	default:
		return nil
	}
}

// Live returns the execution's segment in progress, or nil.
func (e *Executor) Live(executionID string) *Segment {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live[executionID]
}

// Stops lists the Stop calls so far.
func (e *Executor) Stops() []executor.RunRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]executor.RunRequest(nil), e.stops...)
}

// Calls lists the calls so far as "kind execution@epoch".
func (e *Executor) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

// testing is the part of testing.TB that Next uses.
type testing interface {
	Helper()
	Fatalf(format string, args ...any)
}
