package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// instant is an executor whose segments succeed at once.
type instant struct{}

func (instant) Info() executor.Info {
	return executor.Info{Name: "instant", Transport: executor.TransportNone}
}
func (instant) Run(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (instant) Recover(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (instant) Resume(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (instant) Stop(context.Context, executor.RunRequest, time.Duration) error { return nil }

// BenchmarkClaimComplete is one Work's claim → complete cycle on a file
// database, as the daemon's loop runs it: a Tick claims the ready Work
// (new execution, lease, epoch 1) and starts its segment on a goroutine;
// the segment reports; the next Tick applies the result (execution
// finished, Work succeeded, keys released, core.work.finished accepted and
// routed). The Work is created before the timer starts.
func BenchmarkClaimComplete(b *testing.B) {
	h := buildHarness(b, b.TempDir(), func(o *scheduler.Options) {
		o.Limits.MaxRunning = 1
		o.Executors["instant"] = instant{}
		o.Toolbelt, o.ToolbeltEndpoints = nil, nil
		lookup := o.Bindings
		o.Bindings = func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			if q.Binding == "bi" {
				return scheduler.Binding{Executor: "instant", Generation: 1}, nil
			}
			return lookup(ctx, q)
		}
	}, nil)
	defer h.close()
	ctx := context.Background()
	works := make([]string, 0, 1024)
	for b.Loop() {
		b.StopTimer()
		res, err := h.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: "bi"})
		if err != nil {
			b.Fatal(err)
		}
		works = append(works, res.Work.ID)
		b.StartTimer()
		if n, err := h.s.Claim(ctx); err != nil || n != 1 {
			b.Fatalf("claimed %d: %v", n, err)
		}
		// The claim is prepared off the round; the next claim of the
		// binding waits for it, as the daemon's next round does.
		if err := h.s.WaitPrepared(ctx); err != nil {
			b.Fatal(err)
		}
		for _, ts := range h.s.Tracked() {
			if err := h.s.WaitSegment(ctx, ts.ExecutionID, ts.Epoch); err != nil {
				b.Fatal(err)
			}
		}
		if err := h.s.Tick(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if w := h.work(works[len(works)-1]); !w.State.Terminal() {
		b.Fatalf("the last Work is %s", w.State)
	}
}

// countingStore counts the write transactions that committed.
type countingStore struct {
	storage.Store
	commits atomic.Int64
}

func (c *countingStore) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	err := c.Store.WithTx(ctx, fn)
	if err == nil {
		c.commits.Add(1)
	}
	return err
}

// BenchmarkClaimCompleteRound is one scheduler round's worth of Work: four
// ready Work of four bindings (a round prepares at most one claim per
// binding whose preparation can block), claimed by one Tick, their segments
// run by a no-op executor, and the next Tick applying the four results.
// One op is one round; commits/work is the write transactions that
// committed per Work (claims, launches, completions).
func BenchmarkClaimCompleteRound(b *testing.B) {
	claimCompleteRound(b, instant{}, scheduler.Binding{Executor: "instant", Generation: 1})
}

// BenchmarkClaimCompleteRoundAtClaim is BenchmarkClaimCompleteRound with
// a binding that selects no secret on a Dirless executor: each segment is
// prepared before its claim, which inserts it launched (no launch mark).
func BenchmarkClaimCompleteRoundAtClaim(b *testing.B) {
	claimCompleteRound(b, dirlessInstant{}, scheduler.Binding{Executor: "instant", Generation: 1, NoSecrets: true})
}

// dirlessInstant is instant, keeping nothing on disk.
type dirlessInstant struct{ instant }

func (dirlessInstant) Info() executor.Info {
	return executor.Info{Name: "instant", Transport: executor.TransportNone, Dirless: true}
}

func claimCompleteRound(b *testing.B, ex executor.Executor, binding scheduler.Binding) {
	const per = 4
	var cs *countingStore
	h := buildHarness(b, b.TempDir(), func(o *scheduler.Options) {
		o.Limits.MaxRunning = per
		o.Executors["instant"] = ex
		o.Toolbelt, o.ToolbeltEndpoints = nil, nil
		o.Bindings = func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			return binding, nil
		}
	}, func(s storage.Store) storage.Store { cs = &countingStore{Store: s}; return cs })
	defer h.close()
	ctx := context.Background()
	bindings := []string{"b1", "br", "bn", "bs"}
	var commits, works int64
	var last string
	for b.Loop() {
		b.StopTimer()
		for i := range per {
			res, err := h.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: bindings[i%len(bindings)]})
			if err != nil {
				b.Fatal(err)
			}
			last = res.Work.ID
		}
		before := cs.commits.Load()
		b.StartTimer()
		if n, err := h.s.Claim(ctx); err != nil || n != per {
			b.Fatalf("claimed %d: %v", n, err)
		}
		if err := h.s.WaitPrepared(ctx); err != nil {
			b.Fatal(err)
		}
		for _, ts := range h.s.Tracked() {
			if err := h.s.WaitSegment(ctx, ts.ExecutionID, ts.Epoch); err != nil {
				b.Fatal(err)
			}
		}
		if err := h.s.Tick(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		commits += cs.commits.Load() - before
		works += per
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(commits)/float64(works), "commits/work")
	if w := h.work(last); !w.State.Terminal() {
		b.Fatalf("the last Work is %s", w.State)
	}
}
