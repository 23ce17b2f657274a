package kernel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

func benchRuntime(b *testing.B, sync string, routes kernel.RouteTable) (*sqlite.Store, *kernel.Runtime) {
	b.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), "state.db"), Synchronous: sync, Clock: clock.System{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c := clock.NewFake(t0)
	rt, err := kernel.New(kernel.Options{Clock: c, IDs: ids.NewGenerator(c, rand.NewChaCha8([32]byte{9})), Routes: routes})
	if err != nil {
		b.Fatal(err)
	}
	return s, rt
}

// BenchmarkAccept is one event acceptance per transaction on a file
// database: validation, the delivery identity lookup and the insert with
// the next sequence number, then the commit (fsync with synchronous FULL).
func BenchmarkAccept(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, rt := benchRuntime(b, sync, nil)
			ctx := context.Background()
			data := []byte(`{"repository":"open-conduit/open-conduit","number":42,"action":"opened"}`)
			for i := 0; b.Loop(); i++ {
				err := s.WithTx(ctx, func(tx storage.Tx) error {
					_, err := rt.AcceptInTx(ctx, tx, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1",
						CorrelationKey: "pr/42", Data: data, DeliveryID: fmt.Sprint("d-", i)})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAcceptDerived adds the causal bounds: the parent lookup and the
// root's rate window.
func BenchmarkAcceptDerived(b *testing.B) {
	s, rt := benchRuntime(b, "FULL", nil)
	ctx := context.Background()
	var root storage.Event
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		root, err = rt.AcceptInTx(ctx, tx, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	limits := kernel.CausalLimits{MaxDepth: 4, PerMinute: 1 << 30}
	for b.Loop() {
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			_, err := rt.AcceptDerivedInTx(ctx, tx, storage.Event{Type: "agent.note", Source: kernel.SourceExecution, Scope: "s1", Parent: root.ID}, limits)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteAndStart accepts an event and routes it to a start in one
// transaction: three routes are matched, the key's owner is looked up, and
// a Work is created with its core.work.created, its keys and its first
// input.
func BenchmarkRouteAndStart(b *testing.B) {
	routes := kernel.RouteTable{"s1": {
		{ID: "noise", MatchType: "noise.*", Effect: kernel.EffectDrop},
		{ID: "comments", MatchType: "github.comment", Effect: kernel.EffectQueue},
		{ID: "open", MatchType: "github.pr_opened", Binding: "reviewer", Effect: kernel.EffectStart},
	}}
	s, rt := benchRuntime(b, "FULL", routes)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			ev, err := rt.AcceptInTx(ctx, tx, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: fmt.Sprint("pr/", i)})
			if err != nil {
				return err
			}
			d, err := rt.Route(ctx, tx, ev)
			if err == nil && d.Started == "" {
				err = fmt.Errorf("not started: %+v", d)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrace is a route trace of an event whose key a Work owns, on the
// reader pool.
func BenchmarkTrace(b *testing.B) {
	routes := kernel.RouteTable{"s1": {{ID: "open", MatchType: "github.*", Binding: "reviewer", Effect: kernel.EffectStart}}}
	s, rt := benchRuntime(b, "FULL", routes)
	ctx := context.Background()
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		ev, err := rt.AcceptInTx(ctx, tx, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/1"})
		if err != nil {
			return err
		}
		_, err = rt.Route(ctx, tx, ev)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := rt.Trace(ctx, s, storage.Event{Type: "github.comment", Source: "github", Scope: "s1", CorrelationKey: "pr/1"}); err != nil {
			b.Fatal(err)
		}
	}
}
