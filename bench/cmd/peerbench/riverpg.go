package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The peer on PostgreSQL: River with its riverpgxv5 driver over a pgx v5
// pool, its tables migrated by rivermigrate into a schema of its own,
// LISTEN/NOTIFY on (River's default on PostgreSQL), each job inserted in
// its own transaction, worked by the no-op worker of river.go, measured
// until every job is completed.

// runRiverPG runs one round of River on the database connString names, in
// a new schema named schema.
func runRiverPG(ctx context.Context, connString, schema string, o riverOptions) (*schedResult, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	// Enough connections that no inserter or worker waits for one: River
	// keeps one for LISTEN and a few for its producer, completer and
	// maintenance besides the inserters' and workers'.
	cfg.MaxConns = int32(o.inserters + o.workers + 8)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("river schema: %w", err)
	}
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema})
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
		Schema:            schema,
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
	defer wg.Wait()
	for range o.inserters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				// Outside a transaction of ours: River inserts the job
				// and notifies its queue in one transaction of its own.
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
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-guard.C:
			return nil, fmt.Errorf("river completed %d of %d jobs in 10 minutes", done, o.jobs)
		}
	}
	elapsed := time.Since(start)
	if failed > 0 {
		return nil, fmt.Errorf("%d river jobs failed", failed)
	}
	// River completes jobs in batches after its event: wait for the
	// table to say so too (a failure bound, not a measured wait).
	var completed int
	err = poll(ctx, "River's table showing every job completed", time.Minute, func() (bool, error) {
		err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "river_job"}.Sanitize()+" WHERE state = 'completed'").Scan(&completed)
		return err == nil && completed == o.jobs, err
	})
	if err != nil {
		return nil, fmt.Errorf("river reports %d jobs completed, the table %d: %w", o.jobs, completed, err)
	}
	return &schedResult{n: o.jobs, elapsed: elapsed, perSec: float64(o.jobs) / elapsed.Seconds()}, nil
}
