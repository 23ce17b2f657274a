package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// TestUpdateFromAKeptRowFailsWhenTheRowMoved: an update answered from a
// row the transaction read is still fenced when its statement runs. A
// write outside every batch (by hand, on the database) moves the row
// between the read and the update: the transaction fails, whether the
// update travels with the caller's next statement or is its last write,
// and nothing of it is committed.
func TestUpdateFromAKeptRowFailsWhenTheRowMoved(t *testing.T) {
	_, _, ss := daemons(t, 1)
	s := ss[0]
	ctx := context.Background()
	running := storage.WorkRunning
	for _, last := range []bool{false, true} {
		id := "wrk_next"
		if last {
			id = "wrk_last"
		}
		seeded, err := storagetest.SeedWork(ctx, s, id)
		if err != nil {
			t.Fatal(err)
		}
		var returned storage.Work
		err = s.WithTx(ctx, func(tx storage.Tx) error {
			w, err := tx.GetWork(ctx, id)
			if err != nil {
				return err
			}
			if err := s.ExecOutsideBatchForTest(ctx, `UPDATE work SET revision = revision + 1 WHERE id = $1`, id); err != nil {
				return err
			}
			returned, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: id, FromStates: []storage.WorkState{storage.WorkReady}, Revision: w.Revision, State: &running, Now: storagetest.T0.Add(time.Second)})
			if err != nil || last {
				return err
			}
			// A statement: the update travels with it.
			_, err = tx.ListInputs(ctx, &storage.ListInputsParams{Work: id, Limit: 1})
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "moved on") {
			t.Fatalf("last write %v: the transaction returned %v; want its update refused as moved on", last, err)
		}
		if returned.State != running {
			t.Fatalf("last write %v: the update of the kept row returned %+v, not the running Work it computed", last, returned)
		}
		got, err := s.GetWork(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != storage.WorkReady || got.Revision != seeded.Revision+1 {
			t.Fatalf("last write %v: the Work reads %s at revision %d; want ready at %d, the outside write only", last, got.State, got.Revision, seeded.Revision+1)
		}
	}
}
