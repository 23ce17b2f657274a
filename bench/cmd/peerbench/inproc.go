package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// Scheduling in process: the real store (SQLite, WAL, synchronous=FULL on
// a file), kernel and scheduler composed as the daemon composes them, with
// an executor whose segments succeed at once. The bench module's import
// path is under the main module's, so Go's internal rule lets it import
// these packages; nothing here is a public composition.

// instantExecutor ends every segment at once, succeeded.
type instantExecutor struct{}

func (instantExecutor) Info() executor.Info {
	return executor.Info{Name: "instant", Transport: executor.TransportNone, Dirless: true}
}
func (instantExecutor) Run(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (instantExecutor) Recover(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (instantExecutor) Resume(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (instantExecutor) Stop(context.Context, executor.RunRequest, time.Duration) error { return nil }

// runInProcess creates n Work, each in its own transaction
// (kernel.Control.CreateWork, as POST /v1/work does), from creators at
// once, while a loop runs scheduler rounds as the daemon's does (after a
// creation, whenever a segment reports, and on a 100 ms tick); it ends
// when every Work has finished. cpu is the whole process's CPU time over
// the round (the creators' and the loop's). profile, when not empty, is the
// new file the round's CPU profile is written to.
func runInProcess(ctx context.Context, dir string, n, creators int, profile string) (*schedResult, error) {
	if profile != "" {
		f, err := os.OpenFile(profile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "state.db"), Clock: clock.System{}})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	clk := clock.System{}
	gen := ids.NewGenerator(clk, rand.Reader)
	rt, err := kernel.New(kernel.Options{Clock: clk, IDs: gen, Routes: kernel.RouteTable{}})
	if err != nil {
		return nil, err
	}
	ctl := kernel.NewControl(kernel.ControlOptions{Runtime: rt, Store: store, Scopes: kernel.ScopeTable{
		"sched": {Active: true, Bindings: map[string]kernel.BindingView{"noop": {}}},
	}})
	arts, err := storage.NewArtifacts(store, filepath.Join(dir, "artifacts"))
	if err != nil {
		return nil, err
	}
	s, err := scheduler.New(scheduler.Options{
		Store: store, Runtime: rt, Clock: clk, IDs: gen, Owner: "peerbench",
		Limits:    scheduler.Limits{MaxRunning: creators, Lease: 30 * time.Second, AttemptTimeout: time.Hour},
		Executors: map[string]executor.Executor{"instant": instantExecutor{}},
		Bindings: func(context.Context, scheduler.BindingQuery) (scheduler.Binding, error) {
			return scheduler.Binding{Executor: "instant", Generation: 1, NoOperations: true, NoSecrets: true}, nil
		},
		ExecutionsDir: filepath.Join(dir, "executions"), Artifacts: arts,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	defer s.Close()

	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	loopErr := make(chan error, 1)
	go func() {
		ticks := time.NewTicker(100 * time.Millisecond)
		defer ticks.Stop()
		for {
			select {
			case <-loopCtx.Done():
				loopErr <- nil
				return
			case <-ticks.C:
			case <-wake:
			case <-s.Notify():
			}
			if err := s.Tick(loopCtx); err != nil && loopCtx.Err() == nil {
				loopErr <- err
				return
			}
		}
	}()

	cpu0 := selfCPU()
	actor := kernel.WithActor(ctx, "operator:peerbench")
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	start := time.Now()
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := ctl.CreateWork(actor, kernel.CreateWorkRequest{Scope: "sched", Binding: "noop"}); err != nil {
					errs <- fmt.Errorf("creating Work: %w", err)
					return
				}
				poke()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	err = poll(ctx, "every Work finished in process", 10*time.Minute, func() (bool, error) {
		select {
		case err := <-loopErr:
			return false, fmt.Errorf("scheduler round: %w", err)
		default:
		}
		done, _, err := tally(ctx, store)
		return done >= n, err
	})
	if err != nil {
		return nil, err
	}
	noticed := time.Since(start)
	cpu := selfCPU() - cpu0
	_, ok, err := tally(ctx, store)
	if err != nil {
		return nil, err
	}
	if ok != n {
		return nil, fmt.Errorf("in process: %d of %d Work succeeded", ok, n)
	}
	last, err := lastFinish(ctx, store)
	if err != nil {
		return nil, err
	}
	// As through the daemon (finishedSpan): the round ends at the last
	// Work's recorded finish, not when the poll noticed it.
	elapsed := last.Sub(start.Round(0))
	return &schedResult{n: n, elapsed: elapsed, lag: noticed - elapsed, perSec: float64(n) / elapsed.Seconds(), cpu: cpu}, nil
}

// lastFinish is the latest finish (updated_at) of the store's succeeded
// Work; the store holds one round's.
func lastFinish(ctx context.Context, store *sqlite.Store) (time.Time, error) {
	var last time.Time
	page := storage.Page{Limit: storage.MaxLimit}
	for {
		ws, err := store.ListWork(ctx, &storage.ListWorkParams{State: storage.WorkSucceeded, Page: page})
		if err != nil {
			return time.Time{}, err
		}
		for _, w := range ws {
			if w.UpdatedAt.After(last) {
				last = w.UpdatedAt
			}
		}
		if len(ws) < page.Limit {
			return last, nil
		}
		end := ws[len(ws)-1]
		page.After = &storage.Position{CreatedAt: end.CreatedAt, ID: end.ID}
	}
}

// tally counts the finished Work and those that succeeded.
func tally(ctx context.Context, store *sqlite.Store) (done, succeeded int, err error) {
	counts, err := store.TallyWork(ctx)
	for _, c := range counts {
		if c.State.Terminal() {
			done += c.Count
		}
		if c.State == storage.WorkSucceeded {
			succeeded += c.Count
		}
	}
	return done, succeeded, err
}

// selfCPU is this process's user plus system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
