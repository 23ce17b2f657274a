package storagetest

import (
	"context"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the idempotency area.

// idempotencyKeyedByKeyOnly forgets who sent a key: one principal's record
// answers another's request.
var idempotencyKeyedByKeyOnly = stateless("idempotency_keyed_by_key_only", "idempotency records are keyed by the key alone, not (principal, key)",
	func(s storage.Store) storage.Store { return keyOnly{s} })

func getByKey(ctx context.Context, r storage.Reader, principal, key string) (storage.IdempotencyRecord, error) {
	rec, err := r.GetIdempotency(ctx, "", key)
	if err == nil {
		rec.Principal = principal
	}
	return rec, err
}

type keyOnly struct{ storage.Store }

func (s keyOnly) GetIdempotency(ctx context.Context, principal, key string) (storage.IdempotencyRecord, error) {
	return getByKey(ctx, s.Store, principal, key)
}

func (s keyOnly) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(keyOnlyTx{tx}) })
}

type keyOnlyTx struct{ storage.Tx }

func (t keyOnlyTx) GetIdempotency(ctx context.Context, principal, key string) (storage.IdempotencyRecord, error) {
	return getByKey(ctx, t.Tx, principal, key)
}

func (t keyOnlyTx) PutIdempotency(ctx context.Context, rec *storage.IdempotencyRecord) error {
	r := *rec
	r.Principal = ""
	return t.Tx.PutIdempotency(ctx, &r)
}

var idempotencyFirstWins = txControl("idempotency_first_wins", "PutIdempotency keeps the first record of a key instead of replacing it",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return firstWinsTx{tx} })

type firstWinsTx struct{ storage.Tx }

func (t firstWinsTx) PutIdempotency(ctx context.Context, rec *storage.IdempotencyRecord) error {
	if _, err := t.GetIdempotency(ctx, rec.Principal, rec.Key); !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return t.Tx.PutIdempotency(ctx, rec)
}

var deleteIdempotencyInclusive = txControl("delete_idempotency_inclusive", "DeleteIdempotencyBefore also deletes the records created at the cut",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return inclusiveDeleteTx{tx} })

type inclusiveDeleteTx struct{ storage.Tx }

func (t inclusiveDeleteTx) DeleteIdempotencyBefore(ctx context.Context, before time.Time) (int, error) {
	return t.Tx.DeleteIdempotencyBefore(ctx, before.Add(time.Millisecond))
}
