package management_test

import (
	"context"
	"strconv"
	"testing"

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
