package toolbelt_test

import (
	"context"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// A token's revoke offers its transaction to the result recorder on its
// context, told the token's id once the token is revoked in it; the
// recorder's error rolls the revoke back, so an operator's revoke and its
// Idempotency-Key record commit together.
func TestRevokeOffersItsTransactionToTheResultRecorder(t *testing.T) {
	f := fixture(t, false)
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	var told []any
	fail := errors.New("the record's write failed")
	failing := true
	ctx := kernel.WithResultRecorder(context.Background(), func(ctx context.Context, tx storage.Tx, result any) error {
		if tok, err := tx.GetToken(ctx, a.TokenID); err != nil || tok.RevokedAt.IsZero() {
			t.Fatalf("the recorder's transaction holds the token %+v (%v), want it revoked", tok, err)
		}
		told = append(told, result)
		if failing {
			return fail
		}
		return nil
	})
	if err := f.TB.Revoke(ctx, a.TokenID); !errors.Is(err, fail) || len(told) != 1 || told[0] != a.TokenID {
		t.Fatalf("revoke with a failing recorder = %v, recorder told %v; want its error and the token's id", err, told)
	}
	if tok, err := f.Env.Store.GetToken(context.Background(), a.TokenID); err != nil || !tok.RevokedAt.IsZero() {
		t.Fatalf("after the rolled-back revoke the token is %+v (%v), want it live", tok, err)
	}
	failing = false
	if err := f.TB.Revoke(ctx, a.TokenID); err != nil || len(told) != 2 {
		t.Fatalf("revoke = %v, recorder ran %d times", err, len(told))
	}
	if tok, err := f.Env.Store.GetToken(context.Background(), a.TokenID); err != nil || tok.RevokedAt.IsZero() {
		t.Fatalf("after the revoke the token is %+v (%v), want it revoked", tok, err)
	}
}
