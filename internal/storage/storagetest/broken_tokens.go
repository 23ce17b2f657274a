package storagetest

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the tokens area.

var dropsTokenOperations = txControl("drops_token_operations", "a token is stored without the operations it was issued for",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsOpsTx{tx} })

type dropsOpsTx struct{ storage.Tx }

func (t dropsOpsTx) InsertToken(ctx context.Context, tok *storage.Token) error {
	c := *tok
	c.Operations = nil
	return t.Tx.InsertToken(ctx, &c)
}

var swallowsDuplicateTokens = txControl("swallows_duplicate_tokens", "InsertToken of a taken id or digest reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsTokensTx{tx} })

type swallowsTokensTx struct{ storage.Tx }

func (t swallowsTokensTx) InsertToken(ctx context.Context, tok *storage.Token) error {
	if err := t.Tx.InsertToken(ctx, tok); !errors.Is(err, storage.ErrDuplicate) {
		return err
	}
	return nil
}

var revokeIgnoresBelowEpoch = txControl("revoke_ignores_below_epoch", "RevokeTokens of an execution below an epoch revokes the epoch's own tokens too",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return revokesAllTx{tx} })

type revokesAllTx struct{ storage.Tx }

func (t revokesAllTx) RevokeTokens(ctx context.Context, p *storage.RevokeTokensParams) (int, error) {
	q := *p
	q.BelowEpoch = 0
	return t.Tx.RevokeTokens(ctx, &q)
}

var tokensListedByID = stateless("tokens_listed_by_id", "ListExecutionTokens orders by id instead of by epoch, then id",
	func(s storage.Store) storage.Store { return tokensByID{s} })

func listTokensByID(ctx context.Context, r storage.Reader, exe string) ([]storage.Token, error) {
	toks, err := r.ListExecutionTokens(ctx, exe)
	sort.Slice(toks, func(i, j int) bool { return toks[i].ID < toks[j].ID })
	return toks, err
}

type tokensByID struct{ storage.Store }

func (s tokensByID) ListExecutionTokens(ctx context.Context, exe string) ([]storage.Token, error) {
	return listTokensByID(ctx, s.Store, exe)
}

func (s tokensByID) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(tokensByIDTx{tx}) })
}

type tokensByIDTx struct{ storage.Tx }

func (t tokensByIDTx) ListExecutionTokens(ctx context.Context, exe string) ([]storage.Token, error) {
	return listTokensByID(ctx, t.Tx, exe)
}

var tokenSweepExclusive = txControl("token_sweep_exclusive", "the sweep keeps tokens revoked or expired exactly at the cut",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return exclusiveCutTx{Tx: tx, tokens: true} })

// exclusiveCutTx sweeps strictly before the cuts it is told to move.
type exclusiveCutTx struct {
	storage.Tx
	tokens, replays bool
}

func (t exclusiveCutTx) SweepToolbelt(ctx context.Context, p *storage.SweepToolbeltParams) (storage.SweepToolbeltResult, error) {
	q := *p
	if t.tokens && !q.TokensBefore.IsZero() {
		q.TokensBefore = q.TokensBefore.Add(-time.Millisecond)
	}
	if t.replays && !q.ReplaysBefore.IsZero() {
		q.ReplaysBefore = q.ReplaysBefore.Add(-time.Millisecond)
	}
	return t.Tx.SweepToolbelt(ctx, &q)
}

// forgetsRevocationsOnReopen keeps revocations in memory: after a restart a
// revoked token is live again.
var forgetsRevocationsOnReopen = afterReopen("forgets_revocations_on_reopen", "tokens revoked before a reopen read as live after it",
	func(s storage.Store) storage.Store { return unrevoked{s} })

func unrevokedOf(t storage.Token, err error) (storage.Token, error) {
	t.RevokedAt = time.Time{}
	return t, err
}

type unrevoked struct{ storage.Store }

func (s unrevoked) GetToken(ctx context.Context, id string) (storage.Token, error) {
	return unrevokedOf(s.Store.GetToken(ctx, id))
}

func (s unrevoked) GetTokenByDigest(ctx context.Context, d []byte) (storage.Token, error) {
	return unrevokedOf(s.Store.GetTokenByDigest(ctx, d))
}

func (s unrevoked) ListExecutionTokens(ctx context.Context, exe string) ([]storage.Token, error) {
	toks, err := s.Store.ListExecutionTokens(ctx, exe)
	for i := range toks {
		toks[i].RevokedAt = time.Time{}
	}
	return toks, err
}

var revokeWithoutATimeReportsSuccess = txControl("revoke_without_a_time_reports_success", "RevokeTokens without a time reports the tokens revoked and leaves them live",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return zeroTimeRevokeTx{tx} })

type zeroTimeRevokeTx struct{ storage.Tx }

func (t zeroTimeRevokeTx) RevokeTokens(ctx context.Context, p *storage.RevokeTokensParams) (int, error) {
	if !p.At.IsZero() {
		return t.Tx.RevokeTokens(ctx, p)
	}
	toks, err := t.Tx.ListExecutionTokens(ctx, p.Execution)
	return len(toks), err
}
