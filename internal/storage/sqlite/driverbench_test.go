//go:build driverbench

// The driver comparison: the same event acceptance transactions on a file
// database through the pure Go driver (modernc.org/sqlite) and the cgo one
// (github.com/mattn/go-sqlite3). It is behind the driverbench build tag so
// that the normal build and CI never compile cgo SQLite:
//
//	go test -tags driverbench -run '^$' -bench Driver -count 6 ./internal/storage/sqlite
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	msqlite3 "github.com/mattn/go-sqlite3"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

func init() {
	extraConstraint = func(err error) bool {
		var se msqlite3.Error
		return errors.As(err, &se) && se.Code == msqlite3.ErrConstraint
	}
}

var drivers = []struct{ name, driver string }{
	{"modernc", "sqlite"},
	{"mattn", "sqlite3"},
}

func BenchmarkDriverAccept(b *testing.B) {
	for _, d := range drivers {
		for _, sync := range []string{"FULL", "NORMAL"} {
			b.Run(fmt.Sprintf("driver=%s/synchronous=%s", d.name, sync), func(b *testing.B) {
				s, err := Open(context.Background(), Options{Path: filepath.Join(b.TempDir(), "state.db"), Driver: d.driver, Synchronous: sync, Clock: clock.System{}})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				c := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
				rt, err := kernel.New(kernel.Options{Clock: c, IDs: ids.NewGenerator(c, rand.NewChaCha8([32]byte{3}))})
				if err != nil {
					b.Fatal(err)
				}
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
}

// BenchmarkDriverRead reads events by id on the reader pool.
func BenchmarkDriverRead(b *testing.B) {
	for _, d := range drivers {
		b.Run("driver="+d.name, func(b *testing.B) {
			s, err := Open(context.Background(), Options{Path: filepath.Join(b.TempDir(), "state.db"), Driver: d.driver, Clock: clock.System{}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const n = 1000
			if err := s.WithTx(ctx, func(tx storage.Tx) error {
				for i := range n {
					id := fmt.Sprint("evt_", i)
					if _, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: id, Type: "a.b", Source: "x", Scope: "s1", Root: id, Data: []byte(`{"n":1}`)}); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				if _, err := s.GetEvent(ctx, fmt.Sprint("evt_", i%n)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDriverConformance runs the storage conformance suite on the cgo
// driver too, so that the comparison measures two working stores.
func TestDriverConformance(t *testing.T) {
	storagetest.Exercise(t, func(t *testing.T) storage.Store {
		s, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "state.db"), Driver: "sqlite3", Clock: clock.System{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		mode, err := s.Pragma(context.Background(), "journal_mode")
		if err != nil || mode != "wal" {
			t.Fatalf("journal_mode = %s, %v", mode, err)
		}
		return s
	})
}
