package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
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
