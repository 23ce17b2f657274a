package management

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// StoreCredentials is Credentials on coordination storage: the
// credentials persist in the same database as everything else, and
// RevokeAndInsert runs in one storage transaction.
func StoreCredentials(s storage.Store) Credentials { return storeCredentials{s} }

type storeCredentials struct{ s storage.Store }

func toRecord(c Credential) *storage.Credential {
	return &storage.Credential{ID: c.ID, Name: c.Name, Role: c.Role.String(), Digest: c.Digest[:], CreatedAt: c.CreatedAt, RevokedAt: c.RevokedAt}
}

func fromRecord(r storage.Credential, err error) (Credential, error) {
	if err != nil {
		return Credential{}, err
	}
	role, perr := ParseRole(r.Role)
	if perr != nil || len(r.Digest) != len(Digest{}) {
		return Credential{}, fmt.Errorf("management: credential %s is stored with an unknown role or a malformed digest", r.ID)
	}
	c := Credential{ID: r.ID, Name: r.Name, Role: role, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
	copy(c.Digest[:], r.Digest)
	return c, nil
}

func (s storeCredentials) Insert(ctx context.Context, c Credential) error {
	return s.s.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertCredential(ctx, toRecord(c)) })
}

func (s storeCredentials) ByDigest(ctx context.Context, d Digest) (Credential, error) {
	return fromRecord(s.s.GetCredentialByDigest(ctx, d[:]))
}

func (s storeCredentials) ByID(ctx context.Context, id string) (Credential, error) {
	return fromRecord(s.s.GetCredential(ctx, id))
}

func (s storeCredentials) ActiveByName(ctx context.Context, name string) (Credential, error) {
	return fromRecord(s.s.GetActiveCredential(ctx, name))
}

// Revoke revokes the credential and offers its transaction to the
// recorder ctx carries (see Credentials.Revoke).
func (s storeCredentials) Revoke(ctx context.Context, id string, at time.Time) error {
	return s.s.WithTx(ctx, func(tx storage.Tx) error {
		if err := tx.RevokeCredential(ctx, id, at); err != nil {
			return err
		}
		return kernel.RecordResult(ctx, tx, id)
	})
}

func (s storeCredentials) RevokeAndInsert(ctx context.Context, id string, at time.Time, next Credential) error {
	return s.s.WithTx(ctx, func(tx storage.Tx) error {
		cur, err := tx.GetCredential(ctx, id)
		if err != nil {
			return err
		}
		if !cur.Active() {
			return fmt.Errorf("credential %s is revoked: %w", id, storage.ErrDuplicate)
		}
		if err := tx.RevokeCredential(ctx, id, at); err != nil {
			return err
		}
		return tx.InsertCredential(ctx, toRecord(next))
	})
}

func (s storeCredentials) ListOperators(ctx context.Context, p *storage.ListCredentialsParams) ([]Credential, error) {
	recs, err := s.s.ListCredentials(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Credential, 0, len(recs))
	for _, r := range recs {
		c, err := fromRecord(r, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// StoreIdempotency is IdempotencyStore on coordination storage.
func StoreIdempotency(s storage.Store) IdempotencyStore { return storeIdempotency{s} }

type storeIdempotency struct{ s storage.Store }

func (s storeIdempotency) Get(ctx context.Context, principal, key string) (IdempotencyRecord, error) {
	r, err := s.s.GetIdempotency(ctx, principal, key)
	if err != nil {
		return IdempotencyRecord{}, err
	}
	return IdempotencyRecord{Principal: r.Principal, Key: r.Key, Method: r.Method, Path: r.Path, BodyHash: r.BodyHash,
		Status: r.Status, Body: r.Body, CreatedAt: r.CreatedAt}, nil
}

func (s storeIdempotency) Put(ctx context.Context, rec IdempotencyRecord) error {
	return s.s.WithTx(ctx, func(tx storage.Tx) error { return s.PutInTx(ctx, tx, rec) })
}

// PutInTx stores rec inside tx: the request's own transaction (see
// txIdempotency).
func (storeIdempotency) PutInTx(ctx context.Context, tx storage.Tx, rec IdempotencyRecord) error {
	return tx.PutIdempotency(ctx, &storage.IdempotencyRecord{Principal: rec.Principal, Key: rec.Key, Method: rec.Method,
		Path: rec.Path, BodyHash: rec.BodyHash, Status: rec.Status, Body: rec.Body, CreatedAt: rec.CreatedAt})
}

func (s storeIdempotency) DeleteBefore(ctx context.Context, t time.Time) (int, error) {
	var n int
	err := s.s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.DeleteIdempotencyBefore(ctx, t)
		return err
	})
	return n, err
}

// cursorKeyName names the cursor key among the host's keys.
const cursorKeyName = "management.cursor"

// LoadCursorKey returns the list cursor key kept in coordination storage,
// drawing 32 bytes from entropy and storing them the first time, so that
// cursors survive a daemon restart within their 15 minutes. The key only
// authenticates list positions; it grants nothing.
func LoadCursorKey(ctx context.Context, s storage.Store, entropy io.Reader, now time.Time) ([]byte, error) {
	if k, err := s.GetHostKey(ctx, cursorKeyName); err == nil {
		return k.Value, nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := io.ReadFull(entropy, key); err != nil {
		return nil, fmt.Errorf("management: cannot draw a cursor key: %w", err)
	}
	var out []byte
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		if k, err := tx.GetHostKey(ctx, cursorKeyName); err == nil {
			out = k.Value
			return nil
		}
		out = key
		return tx.InsertHostKey(ctx, &storage.HostKey{Name: cursorKeyName, Value: key, CreatedAt: now})
	})
	return out, err
}
