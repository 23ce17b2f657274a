package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// The peer: River on SQLite (its riversqlite driver over modernc.org/sqlite,
// WAL, synchronous=FULL), each job inserted in its own transaction, worked
// by a no-op worker, measured until every job is completed.

type noopArgs struct{}

func (noopArgs) Kind() string { return "peerbench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverOptions are the River settings the benchmark passes.
type riverOptions struct {
	jobs, inserters, workers int
	fetchCooldown, fetchPoll time.Duration
}

type schedResult struct {
	n       int
	elapsed time.Duration
	// lag is how much later than the last recorded finish the round's
	// poll noticed that every Work had finished (not counted in elapsed;
	// 0 for River, whose end is its last completion event).
	lag     time.Duration
	perSec  float64
	cpu     time.Duration // server CPU, where it has a process of its own
	commits float64       // write transactions the daemon committed (its batches), where known
	// children is the CPU of the daemon's descendant processes that
	// ran through the round (a package's process), where known.
	children time.Duration
}

// runRiver runs one round of River in dir.
func runRiver(ctx context.Context, dir string, o riverOptions) (*schedResult, error) {
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "river.db")))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// riversqlite's own advice: SQLite allows one writer, and River's
	// parallel internals otherwise meet SQLITE_BUSY.
	db.SetMaxOpenConns(1)
	driver := riversqlite.New(db)
	mig, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	rc, err := river.NewClient(driver, &river.Config{
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		Workers:           workers,
		FetchCooldown:     o.fetchCooldown,
		FetchPollInterval: o.fetchPoll,
	})
	if err != nil {
		return nil, err
	}
	events, cancelSub := rc.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}, ChanSize: o.jobs + 16})
	defer cancelSub()
	if err := rc.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rc.Stop(sctx)
	}()

	jobs := make(chan struct{}, o.jobs)
	for range o.jobs {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, o.inserters)
	start := time.Now()
	var wg sync.WaitGroup
	for range o.inserters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				// Insert outside a transaction of ours: River runs it in
				// its own, one job per transaction.
				if _, err := rc.Insert(ctx, noopArgs{}, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done, failed := 0, 0
	guard := time.NewTimer(10 * time.Minute)
	defer guard.Stop()
	for done+failed < o.jobs {
		select {
		case ev := <-events:
			if ev.Kind == river.EventKindJobCompleted {
				done++
			} else {
				failed++
			}
		case err := <-errs:
			return nil, fmt.Errorf("river insert: %w", err)
		case <-guard.C:
			return nil, fmt.Errorf("river completed %d of %d jobs in 10 minutes", done, o.jobs)
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	if failed > 0 {
		return nil, fmt.Errorf("%d river jobs failed", failed)
	}
	var completed int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return nil, err
	}
	if completed != o.jobs {
		return nil, fmt.Errorf("river reports %d jobs completed, the table %d", o.jobs, completed)
	}
	return &schedResult{n: o.jobs, elapsed: elapsed, perSec: float64(o.jobs) / elapsed.Seconds()}, nil
}
