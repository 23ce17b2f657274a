package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The toolbelt's execution tokens: stored by digest only, pinned to the
// authority they were issued for, revoked by id or by execution and epoch,
// swept once revoked or expired long enough.

func tokenCases() []Case {
	return []Case{
		{Name: "token_round_trip", Run: plain(tokenRoundTrip), Control: dropsTokenOperations},
		{Name: "token_identity_unique", Run: plain(tokenIdentityUnique), Control: swallowsDuplicateTokens},
		{Name: "token_revocation", Run: plain(tokenRevocation), Control: revokeIgnoresBelowEpoch},
		{Name: "token_list_by_execution", Run: plain(tokenListByExecution), Control: tokensListedByID},
		{Name: "token_sweep", Run: plain(tokenSweep), Control: tokenSweepExclusive},
		{Name: "token_revocation_survives_reopen", Run: tokenRevocationSurvivesReopen, Control: forgetsRevocationsOnReopen},
		{Name: "token_revocation_needs_a_time", Run: plain(tokenRevocationNeedsATime), Control: revokeWithoutATimeReportsSuccess},
	}
}

// A revocation without its time is refused, and the token stays what it
// was: a store must never report tokens revoked that it left live.
func tokenRevocationNeedsATime(ctx context.Context, s storage.Store) error {
	if err := insertTokens(ctx, s, token("tok_a", "exe_1", 1)); err != nil {
		return err
	}
	var n int
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: "exe_1"})
		return err
	})
	if err := want(err != nil && n == 0, "RevokeTokens without a time = %d, %v; want it refused", n, err); err != nil {
		return err
	}
	tok, err := s.GetToken(ctx, "tok_a")
	if err != nil {
		return err
	}
	if err := want(!tok.Revoked(), "a refused revocation left the token revoked at %v", tok.RevokedAt); err != nil {
		return err
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: "exe_1", At: at(5)})
		return err
	})
	if err != nil {
		return err
	}
	tok, err = s.GetToken(ctx, "tok_a")
	if err != nil {
		return err
	}
	if err := want(n == 1 && tok.Revoked() && tok.RevokedAt.Equal(at(5)), "RevokeTokens at a time = %d, token %+v", n, tok); err != nil {
		return err
	}
	// Uncounted: the same rules, and the revocation is seen by the
	// transaction's next read and after its commit.
	if err := insertTokens(ctx, s, token("tok_b", "exe_2", 1)); err != nil {
		return err
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: "exe_2", Uncounted: true})
		return err
	})
	if err := want(err != nil, "an uncounted RevokeTokens without a time was not refused"); err != nil {
		return err
	}
	var inside storage.Token
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: "exe_2", At: at(6), Uncounted: true}); err != nil {
			return err
		}
		inside, err = tx.GetToken(ctx, "tok_b")
		return err
	})
	if err != nil {
		return err
	}
	tok, err = s.GetToken(ctx, "tok_b")
	if err != nil {
		return err
	}
	return first(
		want(inside.Revoked() && inside.RevokedAt.Equal(at(6)), "inside its transaction an uncounted revocation is not seen: %+v", inside),
		want(tok.Revoked() && tok.RevokedAt.Equal(at(6)), "after its commit an uncounted revocation is not seen: %+v", tok))
}

// digest is the SHA-256 of a token's text, as the toolbelt stores it.
func digest(text string) []byte {
	d := sha256.Sum256([]byte(text))
	return d[:]
}

func token(id, exe string, epoch int64) *storage.Token {
	return &storage.Token{ID: id, Digest: digest("text of " + id), Execution: exe, Scope: "s1", Work: "wrk_1", Binding: "b1", Generation: 3,
		Epoch: epoch, Operations: []string{"emit", "wait"}, IssuedAt: T0, ExpiresAt: at(3600)}
}

func insertTokens(ctx context.Context, s storage.Store, toks ...*storage.Token) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		for _, t := range toks {
			if err := tx.InsertToken(ctx, t); err != nil {
				return err
			}
		}
		return nil
	})
}

func tokenRoundTrip(ctx context.Context, s storage.Store) error {
	in := token("tok_1", "exe_1", 2)
	in.Operations = []string{"wait", "emit", "acme.count"}
	in.IssuedAt, in.ExpiresAt = at(1), at(61)
	if err := insertTokens(ctx, s, in); err != nil {
		return err
	}
	byID, err := s.GetToken(ctx, "tok_1")
	if err != nil {
		return err
	}
	byDigest, err := s.GetTokenByDigest(ctx, digest("text of tok_1"))
	if err != nil {
		return err
	}
	_, missing := s.GetToken(ctx, "tok_none")
	_, unknown := s.GetTokenByDigest(ctx, digest("another text"))
	return first(
		want(byID.ID == "tok_1" && bytes.Equal(byID.Digest, in.Digest) && byID.Execution == "exe_1" && byID.Scope == "s1" && byID.Work == "wrk_1" &&
			byID.Binding == "b1" && byID.Generation == 3 && byID.Epoch == 2 && fmt.Sprint(byID.Operations) == "[wait emit acme.count]" &&
			byID.IssuedAt.Equal(at(1)) && byID.ExpiresAt.Equal(at(61)) && !byID.Revoked(), "token = %+v", byID),
		want(same(byDigest, byID), "token by digest = %+v, by id %+v", byDigest, byID),
		wantErr(missing, storage.ErrNotFound, "a missing token id"),
		wantErr(unknown, storage.ErrNotFound, "an unknown digest"),
	)
}

func tokenIdentityUnique(ctx context.Context, s storage.Store) error {
	if err := insertTokens(ctx, s, token("tok_1", "exe_1", 1)); err != nil {
		return err
	}
	sameID := token("tok_1", "exe_2", 1)
	sameID.Digest = digest("other text")
	sameDigest := token("tok_2", "exe_2", 1)
	sameDigest.Digest = digest("text of tok_1")
	var errID, errDigest error
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		errID = tx.InsertToken(ctx, sameID)
		errDigest = tx.InsertToken(ctx, sameDigest)
		return tx.InsertToken(ctx, token("tok_3", "exe_1", 1))
	})
	if err != nil {
		return err
	}
	byDigest, err := s.GetTokenByDigest(ctx, digest("text of tok_1"))
	if err != nil {
		return err
	}
	_, other := s.GetTokenByDigest(ctx, digest("other text"))
	_, tok2 := s.GetToken(ctx, "tok_2")
	return first(
		wantErr(errID, storage.ErrDuplicate, "a second token with the same id"),
		wantErr(errDigest, storage.ErrDuplicate, "a second token with the same digest"),
		want(byDigest.ID == "tok_1" && byDigest.Execution == "exe_1", "the digest now names %+v, want tok_1 of exe_1", byDigest),
		wantErr(other, storage.ErrNotFound, "the digest of the refused token"),
		wantErr(tok2, storage.ErrNotFound, "the refused token's id"),
	)
}

func tokenRevocation(ctx context.Context, s storage.Store) error {
	if err := insertTokens(ctx, s, token("tok_a", "exe_1", 1), token("tok_b", "exe_1", 2), token("tok_c", "exe_1", 3), token("tok_d", "exe_2", 1)); err != nil {
		return err
	}
	revoke := func(p storage.RevokeTokensParams) (int, error) {
		var n int
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			n, err = tx.RevokeTokens(ctx, &p)
			return err
		})
		return n, err
	}
	revokedAt := func(id string) (string, error) {
		t, err := s.GetToken(ctx, id)
		if !t.Revoked() {
			return "live", err
		}
		return fmt.Sprint(int(t.RevokedAt.Sub(T0).Seconds())), err
	}
	states := func() (string, error) {
		var out []string
		for _, id := range []string{"tok_a", "tok_b", "tok_c", "tok_d"} {
			st, err := revokedAt(id)
			if err != nil {
				return "", err
			}
			out = append(out, st)
		}
		return fmt.Sprint(out), nil
	}
	steps := []struct {
		p     storage.RevokeTokensParams
		n     int
		after string
	}{
		{storage.RevokeTokensParams{Execution: "exe_1", BelowEpoch: 3, At: at(10)}, 2, "[10 10 live live]"},
		// A revoked token keeps its first revocation.
		{storage.RevokeTokensParams{ID: "tok_a", At: at(20)}, 0, "[10 10 live live]"},
		{storage.RevokeTokensParams{ID: "tok_d", At: at(30)}, 1, "[10 10 live 30]"},
		{storage.RevokeTokensParams{Execution: "exe_1", At: at(40)}, 1, "[10 10 40 30]"},
		{storage.RevokeTokensParams{ID: "tok_none", At: at(50)}, 0, "[10 10 40 30]"},
	}
	for _, st := range steps {
		n, err := revoke(st.p)
		if err != nil {
			return err
		}
		got, err := states()
		if err != nil {
			return err
		}
		if n != st.n || got != st.after {
			return fmt.Errorf("RevokeTokens(%+v) revoked %d, tokens revoked at %s; want %d and %s", st.p, n, got, st.n, st.after)
		}
	}
	return nil
}

func tokenListByExecution(ctx context.Context, s storage.Store) error {
	if err := insertTokens(ctx, s, token("tok_z", "exe_1", 1), token("tok_m", "exe_1", 2), token("tok_a", "exe_1", 2), token("tok_b", "exe_2", 1)); err != nil {
		return err
	}
	toks, err := s.ListExecutionTokens(ctx, "exe_1")
	if err != nil {
		return err
	}
	none, err := s.ListExecutionTokens(ctx, "exe_none")
	if err != nil {
		return err
	}
	ids := list(toks, func(t storage.Token) string { return t.ID })
	return first(
		want(ids == "[tok_z tok_a tok_m]", "tokens of exe_1 = %s, want [tok_z tok_a tok_m] (by epoch, then id)", ids),
		want(len(none) == 0, "tokens of an execution without any = %+v", none),
	)
}

// tokenSweep: tokens revoked or expired at or before TokensBefore go, with
// their digests; the others stay.
func tokenSweep(ctx context.Context, s storage.Store) error {
	revoked, expired, live, late := token("tok_r", "exe_1", 1), token("tok_x", "exe_1", 1), token("tok_live", "exe_1", 2), token("tok_late", "exe_1", 1)
	revoked.RevokedAt = at(10)
	expired.ExpiresAt = at(20)
	late.RevokedAt = at(50)
	if err := insertTokens(ctx, s, revoked, expired, live, late); err != nil {
		return err
	}
	var res storage.SweepToolbeltResult
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		res, err = tx.SweepToolbelt(ctx, &storage.SweepToolbeltParams{TokensBefore: at(20)})
		return err
	}); err != nil {
		return err
	}
	_, errR := s.GetToken(ctx, "tok_r")
	_, errX := s.GetTokenByDigest(ctx, expired.Digest)
	left, err := s.ListExecutionTokens(ctx, "exe_1")
	if err != nil {
		return err
	}
	ids := list(left, func(t storage.Token) string { return t.ID })
	return first(
		want(res.Tokens == 2 && res.Replays == 0 && res.Calls == 0, "sweep = %+v, want 2 tokens", res),
		wantErr(errR, storage.ErrNotFound, "a token revoked before the cut"),
		wantErr(errX, storage.ErrNotFound, "the digest of a token expired at the cut"),
		want(ids == "[tok_late tok_live]", "tokens left = %s, want [tok_late tok_live]", ids),
	)
}

func tokenRevocationSurvivesReopen(ctx context.Context, env *Env) error {
	if err := insertTokens(ctx, env.Store, token("tok_1", "exe_1", 1), token("tok_2", "exe_1", 2)); err != nil {
		return err
	}
	if err := env.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{ID: "tok_1", At: at(5)})
		return err
	}); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	t1, err := env.Store.GetTokenByDigest(ctx, digest("text of tok_1"))
	if err != nil {
		return fmt.Errorf("a token after a reopen: %w", err)
	}
	t2, err := env.Store.GetToken(ctx, "tok_2")
	if err != nil {
		return err
	}
	toks, err := env.Store.ListExecutionTokens(ctx, "exe_1")
	if err != nil {
		return err
	}
	return first(
		want(t1.Revoked() && t1.RevokedAt.Equal(at(5)) && t1.Epoch == 1, "the revoked token after a reopen = %+v", t1),
		want(!t2.Revoked(), "the live token after a reopen = %+v", t2),
		want(len(toks) == 2 && toks[0].Revoked() && !toks[1].Revoked(), "tokens listed after a reopen = %+v", toks),
	)
}
