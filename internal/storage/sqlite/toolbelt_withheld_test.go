package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// A sensitive operation's request record is finished withheld: it reads
// back withheld, with its input hash and no result. Neither the store nor
// the table (migration 0040's CHECK) takes a withheld record that carries
// a result or a refusal.
func TestToolbeltWithheldReplay(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	t0 := storagetest.T0
	claim := &storage.Replay{Execution: "exe_1", RequestID: "r1", Operation: "x.cred", InputHash: "h1", State: storage.ReplayClaimed, CreatedAt: t0, UpdatedAt: t0}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.InsertReplay(ctx, claim); err != nil {
			return err
		}
		if err := tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Withheld: true, Result: []byte(`{"password":"p"}`), UpdatedAt: t0}); err == nil {
			t.Error("a withheld finish carrying a result was taken")
		}
		if err := tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Withheld: true, ErrorCode: "no", UpdatedAt: t0}); err == nil {
			t.Error("a withheld finish carrying a refusal was taken")
		}
		return tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Withheld: true, UpdatedAt: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	rp, err := s.GetReplay(ctx, "exe_1", "r1")
	if err != nil || !rp.Withheld || rp.State != storage.ReplayDone || rp.Result != nil || rp.InputHash != "h1" {
		t.Fatalf("withheld record = %+v (%v)", rp, err)
	}
	plain := *claim
	plain.RequestID, plain.State, plain.Result = "r2", storage.ReplayDone, []byte(`{"ok":true}`)
	if err := s.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertReplay(ctx, &plain) }); err != nil {
		t.Fatal(err)
	}
	if rp, err := s.GetReplay(ctx, "exe_1", "r2"); err != nil || rp.Withheld || string(rp.Result) != `{"ok":true}` {
		t.Fatalf("plain record = %+v (%v)", rp, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The table itself refuses a withheld row with a result, whoever
	// writes it.
	db, err := sqlite.RawForTest(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `UPDATE toolbelt_replays SET result = '{"password":"p"}' WHERE request_id = 'r1'`); err == nil {
		t.Fatal("the table took a result on a withheld record")
	}
	if _, err := db.ExecContext(ctx, `UPDATE toolbelt_replays SET withheld = 1 WHERE request_id = 'r2'`); err == nil {
		t.Fatal("the table marked a record holding a result withheld")
	}
}
