package management_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// BenchmarkHealth measures one authenticated read over the real socket,
// through the client (token file read, digest lookup, route, JSON).
func BenchmarkHealth(b *testing.B) {
	h := mgmttest.Start(b, mgmttest.Options{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.Client.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIdempotentPost measures a mutation with a fresh
// Idempotency-Key (strict body, canonical hash, record) and its replay.
func BenchmarkIdempotentPost(b *testing.B) {
	f := &fixture{}
	h := mgmttest.Start(b, mgmttest.Options{Routes: f.routes()})
	f.h = h
	ctx := context.Background()
	body := map[string]string{"name": "bench"}
	b.Run("new", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, err := h.Client.Do(ctx, "POST", "/v1/test/things", body, &client.RequestOptions{IdempotencyKey: "k" + strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			resp, err := h.Client.Do(ctx, "POST", "/v1/test/things", body, &client.RequestOptions{IdempotencyKey: "k1"})
			if err != nil || !resp.Replayed {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkIdempotentEmit measures an operator's emit under a fresh
// Idempotency-Key over the socket on the real SQLite store (WAL,
// synchronous=FULL): acceptance, routing, and the key's record;
// commits/op counts the write transactions that committed.
func BenchmarkIdempotentEmit(b *testing.B) {
	var commits atomic.Int64
	s := mgmttest.StartStack(b, mgmttest.StackOptions{OnCommit: func(time.Duration) { commits.Add(1) }})
	ctx := context.Background()
	i := 0
	before := commits.Load()
	for b.Loop() {
		i++
		if _, err := s.Client.Emit(ctx, client.EmitRequest{Scope: "setup", Type: "note.added", Data: []byte(`{"n":1}`)}, &client.RequestOptions{IdempotencyKey: "e" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(commits.Load()-before)/float64(i), "commits/op")
}
