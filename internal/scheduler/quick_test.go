package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// A binding whose preparation cannot block (no secret, an executor without
// a toolbelt endpoint) is held only to PrepareWorkers: one round claims
// several of its ready Work, in one transaction. The same binding with a
// secret is held to PreparePerBinding, one claim a round.
func TestAQuickBindingIsClaimedManyARound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noSecrets bool
		want      int
	}{
		{"no secrets", true, 6},
		{"secrets", false, scheduler.PreparePerBinding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cs *countingStore
			h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
				o.Limits.MaxRunning = 6
				lookup := o.Bindings
				o.Bindings = func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
					b, err := lookup(ctx, q)
					b.NoSecrets = tc.noSecrets
					return b, err
				}
			}, func(s storage.Store) storage.Store { cs = &countingStore{Store: s}; return cs })
			defer h.close()
			for range 8 {
				h.create("bn") // the silent executor: transport none
			}
			ctx := context.Background()
			before := cs.commits.Load()
			n, err := h.s.Claim(ctx)
			if err != nil {
				t.Fatal(err)
			}
			commits := cs.commits.Load() - before
			if n != tc.want || commits != 1 {
				t.Fatalf("one round claimed %d in %d transactions, want %d in 1", n, commits, tc.want)
			}
			h.s.WaitPrepared(ctx)
			for range tc.want {
				h.silent.Next(t)
			}
			if seg := h.silent.TryNext(); seg != nil {
				t.Fatalf("more segments started than claimed: %+v", seg.Req)
			}
		})
	}
}

// The Work of a binding at its preparation limit is passed over, and a
// round still reaches a claimable Work listed far behind them: the list
// grows past the first few times the free slots.
func TestARoundReachesWorkBehindABindingAtItsLimit(t *testing.T) {
	h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
		o.Limits.MaxRunning = scheduler.PreparePerBinding + 1
	}, nil)
	defer h.close()
	// More than 64 Work of a binding that needs its secrets (held to
	// PreparePerBinding a round), then one of a quick binding.
	for range 70 {
		h.create("b1")
		h.clock.Advance(time.Second)
	}
	behind := h.create("bn")
	ctx := context.Background()
	n, err := h.s.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != scheduler.PreparePerBinding+1 {
		t.Fatalf("one round claimed %d, want %d of the first binding and the Work behind them", n, scheduler.PreparePerBinding+1)
	}
	h.s.WaitPrepared(ctx)
	if seg := h.silent.Next(t); seg.Req.WorkID != behind.ID {
		t.Fatalf("the quick binding's segment is of %s, want %s", seg.Req.WorkID, behind.ID)
	}
}
