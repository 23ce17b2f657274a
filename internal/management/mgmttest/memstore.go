package mgmttest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Credentials is an in-memory management.Credentials for tests. It keeps
// the store's rules (one active credential per name, atomic
// RevokeAndInsert) so that tests against it mean something for the SQLite
// one.
type Credentials struct {
	mu    sync.Mutex
	creds []management.Credential
}

var _ management.Credentials = (*Credentials)(nil)

func (s *Credentials) find(pred func(management.Credential) bool) int {
	for i, c := range s.creds {
		if pred(c) {
			return i
		}
	}
	return -1
}

func (s *Credentials) insertLocked(c management.Credential) error {
	if s.find(func(o management.Credential) bool {
		return o.ID == c.ID || o.Digest == c.Digest || (o.Name == c.Name && o.Active() && c.Active())
	}) >= 0 {
		return fmt.Errorf("credential %s: %w", c.ID, extension.ErrConflict)
	}
	s.creds = append(s.creds, c)
	return nil
}

// Insert implements management.Credentials.
func (s *Credentials) Insert(_ context.Context, c management.Credential) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insertLocked(c)
}

func (s *Credentials) get(pred func(management.Credential) bool) (management.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.find(pred); i >= 0 {
		return s.creds[i], nil
	}
	return management.Credential{}, fmt.Errorf("credential: %w", extension.ErrNotFound)
}

// ByDigest implements management.Credentials.
func (s *Credentials) ByDigest(_ context.Context, d management.Digest) (management.Credential, error) {
	return s.get(func(c management.Credential) bool { return c.Digest == d })
}

// ByID implements management.Credentials.
func (s *Credentials) ByID(_ context.Context, id string) (management.Credential, error) {
	return s.get(func(c management.Credential) bool { return c.ID == id })
}

// ActiveByName implements management.Credentials.
func (s *Credentials) ActiveByName(_ context.Context, name string) (management.Credential, error) {
	return s.get(func(c management.Credential) bool { return c.Name == name && c.Active() })
}

// Revoke implements management.Credentials.
func (s *Credentials) Revoke(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(func(c management.Credential) bool { return c.ID == id })
	if i < 0 {
		return fmt.Errorf("credential %s: %w", id, extension.ErrNotFound)
	}
	if s.creds[i].Active() {
		s.creds[i].RevokedAt = at
	}
	return nil
}

// RevokeAndInsert implements management.Credentials.
func (s *Credentials) RevokeAndInsert(_ context.Context, id string, at time.Time, next management.Credential) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(func(c management.Credential) bool { return c.ID == id })
	if i < 0 {
		return fmt.Errorf("credential %s: %w", id, extension.ErrNotFound)
	}
	if !s.creds[i].Active() {
		return fmt.Errorf("credential %s is revoked: %w", id, extension.ErrConflict)
	}
	old := s.creds[i]
	s.creds[i].RevokedAt = at
	if err := s.insertLocked(next); err != nil {
		s.creds[i] = old
		return err
	}
	return nil
}

// ListOperators implements management.Credentials: the keyset window p
// on (created_at, id), only the active credentials with p.Active, as the
// SQLite store reads it.
func (s *Credentials) ListOperators(_ context.Context, p *storage.ListCredentialsParams) ([]management.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := func(c management.Credential) storage.Position {
		return storage.Position{CreatedAt: c.CreatedAt, ID: c.ID}
	}
	order := func(a, b storage.Position) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	}
	out := []management.Credential{}
	for _, c := range s.creds {
		k := key(c)
		if p.Active && !c.Active() {
			continue
		}
		if p.Until != nil && order(k, *p.Until) > 0 {
			continue
		}
		if p.After != nil && ((!p.Desc && order(k, *p.After) <= 0) || (p.Desc && order(k, *p.After) >= 0)) {
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b management.Credential) int {
		if p.Desc {
			a, b = b, a
		}
		return order(key(a), key(b))
	})
	if n := storage.EffectiveLimit(p.Limit); len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// Idempotency is an in-memory management.IdempotencyStore for tests.
type Idempotency struct {
	mu   sync.Mutex
	recs map[[2]string]management.IdempotencyRecord
}

var _ management.IdempotencyStore = (*Idempotency)(nil)

// Get implements management.IdempotencyStore.
func (s *Idempotency) Get(_ context.Context, principal, key string) (management.IdempotencyRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[[2]string{principal, key}]
	if !ok {
		return rec, fmt.Errorf("idempotency record: %w", extension.ErrNotFound)
	}
	rec.Body = slices.Clone(rec.Body)
	return rec, nil
}

// Put implements management.IdempotencyStore.
func (s *Idempotency) Put(_ context.Context, rec management.IdempotencyRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = map[[2]string]management.IdempotencyRecord{}
	}
	rec.Body = slices.Clone(rec.Body)
	s.recs[[2]string{rec.Principal, rec.Key}] = rec
	return nil
}

// DeleteBefore implements management.IdempotencyStore.
func (s *Idempotency) DeleteBefore(_ context.Context, t time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, rec := range s.recs {
		if rec.CreatedAt.Before(t) {
			delete(s.recs, k)
			n++
		}
	}
	return n, nil
}

// Records returns a copy of every stored record, for tests that inspect
// what was (or was not) recorded.
func (s *Idempotency) Records() []management.IdempotencyRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]management.IdempotencyRecord, 0, len(s.recs))
	for _, r := range s.recs {
		out = append(out, r)
	}
	return out
}

// ExecutionTokens is an in-memory management.ExecutionTokens for tests.
type ExecutionTokens struct {
	mu     sync.Mutex
	tokens []management.ExecutionToken
	digest map[string]management.Digest
}

var _ management.ExecutionTokens = (*ExecutionTokens)(nil)

// Add stores an execution token for the given plaintext token.
func (s *ExecutionTokens) Add(token string, t management.ExecutionToken) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.digest == nil {
		s.digest = map[string]management.Digest{}
	}
	s.digest[t.ID] = bearer.DigestOf(token)
	s.tokens = append(s.tokens, t)
}

// ByDigest implements management.ExecutionTokens.
func (s *ExecutionTokens) ByDigest(_ context.Context, d management.Digest) (management.ExecutionToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		if s.digest[t.ID] == d {
			return t, nil
		}
	}
	return management.ExecutionToken{}, fmt.Errorf("execution token: %w", extension.ErrNotFound)
}

// Revoke implements management.ExecutionTokens.
func (s *ExecutionTokens) Revoke(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.tokens {
		if t.ID == id {
			if t.RevokedAt.IsZero() {
				s.tokens[i].RevokedAt = at
			}
			return nil
		}
	}
	return fmt.Errorf("execution token %s: %w", id, extension.ErrNotFound)
}
