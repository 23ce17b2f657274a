package management_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// BenchmarkListWorkPages pages through 2,000 Work over the socket, 50 at a
// time: the first page (which captures the listing's bound) and every
// following page through its cursor. One op is one page.
func BenchmarkListWorkPages(b *testing.B) {
	ctx := context.Background()
	s := mgmttest.StartStack(b, mgmttest.StackOptions{})
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 2000 {
			_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: fmt.Sprintf("wrk_bench_%05d", i), Scope: "setup", Binding: "shell",
				State: storage.WorkReady, CreatedAt: mgmttest.Epoch.Add(time.Duration(i) * time.Millisecond)})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	cursor := ""
	for b.Loop() {
		page, err := s.Client.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Limit: 50, Cursor: cursor}})
		if err != nil || len(page.Items) != 50 {
			b.Fatalf("page: %d items, %v", len(page.Items), err)
		}
		cursor = page.NextCursor
	}
}

// BenchmarkListEventsPages is the same over 2,000 Events, paged by
// acceptance sequence.
func BenchmarkListEventsPages(b *testing.B) {
	ctx := context.Background()
	s := mgmttest.StartStack(b, mgmttest.StackOptions{})
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		for i := range 2000 {
			id := fmt.Sprintf("evt_bench_%05d", i)
			_, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: id, Type: "bench.tick", Source: "core.manual", Scope: "setup",
				Data: []byte(`{"n":1}`), Root: id, AcceptedAt: mgmttest.Epoch})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	cursor := ""
	for b.Loop() {
		page, err := s.Client.ListEvents(ctx, client.EventFilter{Scope: "setup", Page: client.Page{Limit: 50, Cursor: cursor}})
		if err != nil || len(page.Items) != 50 {
			b.Fatalf("page: %d items, %v", len(page.Items), err)
		}
		cursor = page.NextCursor
	}
}
