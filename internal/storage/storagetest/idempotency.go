package storagetest

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Idempotency-Key history: a completed management request's response,
// keyed by (principal, key), replaced by a later one of the same key and
// deleted once older than the retention.

func idempotencyCases() []Case {
	return []Case{
		{Name: "idempotency_round_trip", Run: idempotencyRoundTrip, Control: idempotencyKeyedByKeyOnly},
		{Name: "idempotency_replace", Run: plain(idempotencyReplace), Control: idempotencyFirstWins},
		{Name: "idempotency_delete_before", Run: plain(idempotencyDeleteBefore), Control: deleteIdempotencyInclusive},
	}
}

func putIdempotency(ctx context.Context, s storage.Store, recs ...storage.IdempotencyRecord) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range recs {
			if err := tx.PutIdempotency(ctx, &recs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func idemRecord(principal, key string, sec int) storage.IdempotencyRecord {
	return storage.IdempotencyRecord{Principal: principal, Key: key, Method: "POST", Path: "/v1/work", BodyHash: "hash-" + key, Status: 201,
		Body: []byte(`{"id":"wrk_1"}`), CreatedAt: at(sec)}
}

func idempotencyRoundTrip(ctx context.Context, env *Env) error {
	rec := idemRecord("operator:local", "k1", 1)
	rec.Body = []byte{'{', '}', 0, 0xff, '\n'}
	noBody := idemRecord("operator:local", "k2", 2)
	noBody.Body, noBody.Status, noBody.Method, noBody.Path = nil, 204, "DELETE", "/v1/work/wrk_1"
	if err := putIdempotency(ctx, env.Store, rec, noBody); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	s := env.Store
	got, err := s.GetIdempotency(ctx, "operator:local", "k1")
	if err != nil {
		return fmt.Errorf("an idempotency record (after a reopen): %w", err)
	}
	empty, err := s.GetIdempotency(ctx, "operator:local", "k2")
	if err != nil {
		return err
	}
	_, otherPrincipal := s.GetIdempotency(ctx, "operator:alice", "k1")
	_, otherKey := s.GetIdempotency(ctx, "operator:local", "k3")
	return first(
		want(got.Principal == rec.Principal && got.Key == "k1" && got.Method == "POST" && got.Path == "/v1/work" && got.BodyHash == "hash-k1" &&
			got.Status == 201 && bytes.Equal(got.Body, rec.Body) && got.CreatedAt.Equal(at(1)), "record = %+v", got),
		want(len(empty.Body) == 0 && empty.Status == 204 && empty.Method == "DELETE" && empty.Path == "/v1/work/wrk_1", "record without a body = %+v", empty),
		wantErr(otherPrincipal, storage.ErrNotFound, "another principal's record of the same key"),
		wantErr(otherKey, storage.ErrNotFound, "a key never recorded"),
	)
}

func idempotencyReplace(ctx context.Context, s storage.Store) error {
	first1 := idemRecord("operator:local", "k", 1)
	other := idemRecord("operator:alice", "k", 1)
	if err := putIdempotency(ctx, s, first1, other); err != nil {
		return err
	}
	next := storage.IdempotencyRecord{Principal: "operator:local", Key: "k", Method: "PUT", Path: "/v1/config", BodyHash: "h2", Status: 200,
		Body: []byte(`{"generation":2}`), CreatedAt: at(60)}
	if err := putIdempotency(ctx, s, next); err != nil {
		return err
	}
	got, err := s.GetIdempotency(ctx, "operator:local", "k")
	if err != nil {
		return err
	}
	kept, err := s.GetIdempotency(ctx, "operator:alice", "k")
	if err != nil {
		return err
	}
	return first(
		want(got.Method == "PUT" && got.Path == "/v1/config" && got.BodyHash == "h2" && got.Status == 200 && string(got.Body) == `{"generation":2}` &&
			got.CreatedAt.Equal(at(60)), "the replaced record = %+v, want the later one", got),
		want(kept.BodyHash == "hash-k" && kept.CreatedAt.Equal(at(1)), "another principal's record of the key = %+v, want it unchanged", kept),
	)
}

// idempotencyDeleteBefore: the retention deletes the records created
// strictly before the cut and says how many.
func idempotencyDeleteBefore(ctx context.Context, s storage.Store) error {
	if err := putIdempotency(ctx, s, idemRecord("operator:local", "old", -10), idemRecord("operator:local", "cut", 0), idemRecord("operator:alice", "new", 10)); err != nil {
		return err
	}
	del := func(t time.Time) (int, error) {
		var n int
		err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			n, err = tx.DeleteIdempotencyBefore(ctx, t)
			return err
		})
		return n, err
	}
	n1, err := del(at(0))
	if err != nil {
		return err
	}
	n2, err := del(at(0))
	if err != nil {
		return err
	}
	_, old := s.GetIdempotency(ctx, "operator:local", "old")
	_, cut := s.GetIdempotency(ctx, "operator:local", "cut")
	_, recent := s.GetIdempotency(ctx, "operator:alice", "new")
	return first(
		want(n1 == 1 && n2 == 0, "deleted %d, then %d; want 1, then 0", n1, n2),
		wantErr(old, storage.ErrNotFound, "a record created before the cut"),
		want(cut == nil, "the record created at the cut: %v; it is not before it", cut),
		want(recent == nil, "a record created after the cut: %v", recent),
	)
}
