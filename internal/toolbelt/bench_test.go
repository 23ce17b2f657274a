package toolbelt_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// benchHarness is the real toolbelt with a causal rate no benchmark
// reaches (the fake clock never moves, so the window never ends).
var benchHarness = toolbelttest.Harness{Name: "bench", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
	env.Runtime.SetCausal(kernel.CausalLimits{MaxDepth: 8, PerMinute: 1 << 30})
	return toolbelt.New(env.Options())
}}

func benchFixture(b *testing.B) (*toolbelttest.Fixture, *toolbelttest.Attempt) {
	b.Helper()
	f, err := toolbelttest.NewFixture(b.TempDir(), benchHarness, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	noop := func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{{Name: "acme.echo", Summary: "No-op.", Handler: noop}}}); err != nil {
		b.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		b.Fatal(err)
	}
	return f, a
}

func benchCall(b *testing.B, op, input string, parallel bool) {
	f, a := benchFixture(b)
	ctx := context.Background()
	req := extension.CallRequest{Operation: op, Input: json.RawMessage(input)}
	b.ResetTimer()
	if !parallel {
		for b.Loop() {
			if _, err := f.TB.Call(ctx, a.Token, req); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(8) // 16 goroutines on the 2-core machine
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := f.TB.Call(ctx, a.Token, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkToolbeltEmit is an emit call in process: the whole check chain,
// acceptance under causal bounds, routing, and its call record, in one
// transaction.
func BenchmarkToolbeltEmit(b *testing.B) {
	b.Run("sequential", func(b *testing.B) { benchCall(b, "emit", `{"type":"bench.tick","data":{"n":1}}`, false) })
	b.Run("parallel16", func(b *testing.B) { benchCall(b, "emit", `{"type":"bench.tick","data":{"n":1}}`, true) })
}

// BenchmarkToolbeltEmptyCall is the floor of a call: a registered no-op
// handler through the same chain (a guarded read-write transaction before
// it and the call record's commit after it).
func BenchmarkToolbeltEmptyCall(b *testing.B) {
	b.Run("sequential", func(b *testing.B) { benchCall(b, "acme.echo", `{}`, false) })
	b.Run("parallel16", func(b *testing.B) { benchCall(b, "acme.echo", `{}`, true) })
}

// BenchmarkToolbeltBareCommit is the storage floor: one transaction that
// writes one call record and commits.
func BenchmarkToolbeltBareCommit(b *testing.B) {
	commit := func(f *toolbelttest.Fixture, n *int64) error {
		return f.Env.Store.WithTx(context.Background(), func(tx storage.Tx) error {
			*n++
			return tx.InsertToolbeltCall(context.Background(), &storage.ToolbeltCall{
				ID: "tbc_bench_" + strconv.FormatInt(*n, 10), Kind: storage.ToolbeltCalled, Operation: "bench", Result: "ok", At: f.Env.Clock.Now(),
			})
		})
	}
	b.Run("sequential", func(b *testing.B) {
		f, _ := benchFixture(b)
		var n int64
		for b.Loop() {
			if err := commit(f, &n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel16", func(b *testing.B) {
		f, _ := benchFixture(b)
		var n int64
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				// WithTx serialises, so n is only touched by one writer.
				if err := commit(f, &n); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
