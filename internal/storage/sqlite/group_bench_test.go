package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// BenchmarkGroupCommit runs one event insert per write transaction from 1,
// 16 and 64 goroutines at once on a file database with synchronous=FULL,
// and reports writes per second and fsyncs per write (the commits the
// store timed through OnCommit: one per batch). It uses only what every
// release of the store offers, so that the same file measures the store
// before group commit.
func BenchmarkGroupCommit(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			var commits atomic.Int64
			ctx := context.Background()
			s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(b.TempDir(), "state.db"), Clock: clock.System{},
				OnCommit: func(time.Duration) { commits.Add(1) }})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := []byte(`{"repository":"open-conduit/open-conduit","number":42,"action":"opened"}`)
			var next atomic.Int64
			var failed atomic.Value
			commits.Store(0)
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						id := fmt.Sprint("evt_", i)
						err := s.WithTx(ctx, func(tx storage.Tx) error {
							_, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: id, Type: "github.pr_opened", Source: "github", Scope: "s1",
								Root: id, CorrelationKey: "pr/42", Data: data, DeliveryID: id, AcceptedAt: time.Unix(0, i)})
							return err
						})
						if err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			b.ReportMetric(float64(commits.Load())/float64(b.N), "fsyncs/write")
		})
	}
}
