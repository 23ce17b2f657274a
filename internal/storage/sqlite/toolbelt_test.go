package sqlite_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

func TestToolbeltRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := open(t, path)
	t0 := storagetest.T0
	d1, d2 := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	tok := func(id string, d [32]byte, epoch int64) *storage.Token {
		return &storage.Token{ID: id, Digest: d[:], Execution: "exe_1", Scope: "s", Work: "wrk_1", Binding: "b", Generation: 3,
			Epoch: epoch, Operations: []string{"emit", "wait"}, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	}
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.InsertToken(ctx, tok("tok_1", d1, 1)); err != nil {
			return err
		}
		if err := tx.InsertToken(ctx, tok("tok_1", d2, 1)); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("second token with the same id: %v", err)
		}
		if err := tx.InsertToken(ctx, tok("tok_x", d1, 1)); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("second token with the same digest: %v", err)
		}
		if err := tx.InsertToken(ctx, tok("tok_2", d2, 2)); err != nil {
			return err
		}
		n, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: "exe_1", BelowEpoch: 2, At: t0.Add(time.Minute)})
		if err != nil || n != 1 {
			t.Errorf("revoke below epoch 2: %d, %v", n, err)
		}
		if err := tx.InsertReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Operation: "x.y", InputHash: "h", State: storage.ReplayClaimed, CreatedAt: t0}); err != nil {
			return err
		}
		if err := tx.InsertReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Operation: "x.y", InputHash: "h", State: storage.ReplayClaimed, CreatedAt: t0}); !errors.Is(err, storage.ErrDuplicate) {
			t.Errorf("second claim: %v", err)
		}
		if err := tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", Result: []byte(`{"ok":true}`), UpdatedAt: t0}); err != nil {
			return err
		}
		if err := tx.FinishReplay(ctx, &storage.Replay{Execution: "exe_1", RequestID: "r1", UpdatedAt: t0}); !errors.Is(err, storage.ErrFenced) {
			t.Errorf("finishing a done record: %v", err)
		}
		if err := tx.DeleteReplay(ctx, "exe_1", "r1"); !errors.Is(err, storage.ErrFenced) {
			t.Errorf("deleting a done record: %v", err)
		}
		return tx.InsertToolbeltCall(ctx, &storage.ToolbeltCall{ID: "tbc_1", Kind: storage.ToolbeltRejected, Operation: "emit", Execution: "exe_1", Epoch: 1, Token: "tok_1", Result: "forbidden", At: t0})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, path)

	got, err := s.GetTokenByDigest(ctx, d1[:])
	if err != nil || got.ID != "tok_1" || !got.Revoked() || got.Epoch != 1 || len(got.Operations) != 2 || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("token by digest after reopen = %+v, %v", got, err)
	}
	if got, err := s.GetToken(ctx, "tok_2"); err != nil || got.Revoked() {
		t.Fatalf("tok_2 = %+v, %v", got, err)
	}
	if toks, err := s.ListExecutionTokens(ctx, "exe_1"); err != nil || len(toks) != 2 || toks[0].ID != "tok_1" {
		t.Fatalf("list = %+v, %v", toks, err)
	}
	r, err := s.GetReplay(ctx, "exe_1", "r1")
	if err != nil || r.State != storage.ReplayDone || string(r.Result) != `{"ok":true}` {
		t.Fatalf("replay = %+v, %v", r, err)
	}
	calls, err := s.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: "exe_1"})
	if err != nil || len(calls) != 1 || calls[0].Result != "forbidden" || calls[0].Kind != storage.ToolbeltRejected {
		t.Fatalf("calls = %+v, %v", calls, err)
	}

	// Retention: the revoked token goes once its revocation is old enough;
	// the live one stays; the request record stays while its execution is
	// unknown (not finished).
	var res storage.SweepToolbeltResult
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		res, err = tx.SweepToolbelt(ctx, &storage.SweepToolbeltParams{TokensBefore: t0.Add(2 * time.Minute), ReplaysBefore: t0.Add(time.Hour)})
		return err
	})
	if err != nil || res.Tokens != 1 || res.Replays != 0 {
		t.Fatalf("sweep = %+v, %v", res, err)
	}
	if _, err := s.GetTokenByDigest(ctx, d1[:]); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("swept token still found: %v", err)
	}
	if _, err := s.GetToken(ctx, "tok_2"); err != nil {
		t.Fatalf("live token swept: %v", err)
	}
}
