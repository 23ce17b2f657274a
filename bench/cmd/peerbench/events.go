package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/client"
)

// The events list: one page of GET /v1/events unfiltered and with a type
// filter, at growing numbers of events seeded through the management API
// (POST /v1/events, one operator Event per request) into a scope without
// routes.

// eventType is the type of the i-th seeded event: one of ten common types
// in turn, and every 10,000th (from the 5,000th) the rare one.
func eventType(i int) string {
	if i%10000 == 5000 {
		return "bench.rare"
	}
	return fmt.Sprintf("bench.t%d", i%10)
}

type pageResult struct {
	size                     int
	unfiltered, common, rare time.Duration
}

type eventsResult struct {
	pages      []pageResult
	seeded     int
	seedTime   time.Duration
	seedPerSec float64
}

// runEvents seeds the daemon up to each size in turn (ascending) and
// measures pages at each.
func (d *daemon) runEvents(ctx context.Context, sizes []int, seeders, reps int, progress func(string)) (*eventsResult, error) {
	r := &eventsResult{}
	have := 0
	for _, size := range sizes {
		if size > have {
			t0 := time.Now()
			if err := d.seed(ctx, have, size, seeders, progress); err != nil {
				return nil, err
			}
			r.seedTime += time.Since(t0)
			r.seeded += size - have
			have = size
		}
		p := pageResult{size: size}
		var un, co, ra []time.Duration
		for range reps {
			for _, q := range []struct {
				typ string
				out *[]time.Duration
			}{{"", &un}, {"bench.t3", &co}, {"bench.rare", &ra}} {
				t0 := time.Now()
				l, err := d.c.ListEvents(ctx, client.EventFilter{Scope: "seed", Type: q.typ})
				if err != nil {
					return nil, fmt.Errorf("listing events (type %q): %w", q.typ, err)
				}
				*q.out = append(*q.out, time.Since(t0))
				// The rare type's first event is the 5,000th.
				if len(l.Items) == 0 && (q.typ != "bench.rare" || size > 5000) {
					return nil, fmt.Errorf("the page of type %q is empty at %d events", q.typ, size)
				}
			}
		}
		p.unfiltered, p.common, p.rare = p50(un), p50(co), p50(ra)
		r.pages = append(r.pages, p)
		progress(fmt.Sprintf("events at %d: unfiltered %s, type (1 in 10) %s, rare type %s", size, ms(p.unfiltered), ms(p.common), ms(p.rare)))
	}
	if r.seedTime > 0 {
		r.seedPerSec = float64(r.seeded) / r.seedTime.Seconds()
	}
	return r, nil
}

// seed accepts events from..to-1 with seeders concurrent requests.
func (d *daemon) seed(ctx context.Context, from, to, seeders int, progress func(string)) error {
	var next atomic.Int64
	next.Store(int64(from))
	errs := make(chan error, seeders)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range seeders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				data := fmt.Appendf(nil, `{"n":%d}`, i)
				if _, err := d.c.Emit(ctx, client.EmitRequest{Scope: "seed", Type: eventType(i), Data: data}, nil); err != nil {
					errs <- fmt.Errorf("seeding event %d: %w", i, err)
					return
				}
				if i > from && i%50000 == 0 {
					progress(fmt.Sprintf("seeded %d events (%.0f/s)", i, float64(i-from)/time.Since(t0).Seconds()))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
