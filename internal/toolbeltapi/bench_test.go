package toolbeltapi_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
	"github.com/open-conduit/open-conduit/osclient"
)

// socketBench serves n executions, each on its own socket, and returns an
// os client of each.
func socketBench(b *testing.B, n int) []*osclient.Client {
	b.Helper()
	h := toolbelttest.Harness{Name: "bench", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		env.Runtime.SetCausal(kernel.CausalLimits{MaxDepth: 8, PerMinute: 1 << 30})
		return toolbelt.New(env.Options())
	}}
	f, err := toolbelttest.NewFixture(b.TempDir(), h, false)
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
	srv := mgmttest.Start(b, mgmttest.Options{Clock: f.Env.Clock})
	dirs, err := runs.New(srv.StateDir, runs.Options{Logger: mgmttest.DiscardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dirs.CloseAll)
	handler := srv.Server.ExecutionHandler(f.TB)
	var clients []*osclient.Client
	for range n {
		a, err := f.Start()
		if err != nil {
			b.Fatal(err)
		}
		ep, err := dirs.Prepare(a.Execution.ID, a.Token)
		if err != nil {
			b.Fatal(err)
		}
		if err := dirs.Serve(a.Execution.ID, ep, handler); err != nil {
			b.Fatal(err)
		}
		c, err := osclient.New(ep.Socket, ep.TokenFile)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		clients = append(clients, c)
	}
	return clients
}

func benchSocket(b *testing.B, op, input string, executions int) {
	clients := socketBench(b, executions)
	req := osclient.CallRequest{Operation: op, Input: json.RawMessage(input)}
	ctx := context.Background()
	b.ResetTimer()
	if executions == 1 {
		for b.Loop() {
			if _, err := clients[0].Call(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	// Every execution calls its own socket at once; b.N calls in all.
	work := make(chan struct{}, b.N)
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if _, err := c.Call(ctx, req); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkToolbeltSocketEmit is an emit over a real execution socket
// with the os client (token file re-read per call), one execution
// sequentially and 16 executions at once; its floor is a no-op operation
// over the same path.
func BenchmarkToolbeltSocketEmit(b *testing.B) {
	b.Run("sequential", func(b *testing.B) { benchSocket(b, "emit", `{"type":"bench.tick","data":{"n":1}}`, 1) })
	b.Run("executions16", func(b *testing.B) { benchSocket(b, "emit", `{"type":"bench.tick","data":{"n":1}}`, 16) })
}

// BenchmarkToolbeltSocketEmptyCall is the socket floor.
func BenchmarkToolbeltSocketEmptyCall(b *testing.B) {
	b.Run("sequential", func(b *testing.B) { benchSocket(b, "acme.echo", `{}`, 1) })
	b.Run("executions16", func(b *testing.B) { benchSocket(b, "acme.echo", `{}`, 16) })
}
