package daemon

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// backends are the management server's stores. They live in coordination
// storage once it implements them; until then the daemon keeps them in
// memory, which costs a fresh owner token at every start and forgets
// Idempotency-Key history on restart.
type backends struct {
	credentials management.Credentials
	idempotency management.IdempotencyStore
}

// openBackends returns the backends over store.
func openBackends(store storage.Store) backends {
	if c, ok := store.(management.Credentials); ok {
		if i, ok := store.(management.IdempotencyStore); ok {
			return backends{credentials: c, idempotency: i}
		}
	}
	return backends{credentials: &memCredentials{}, idempotency: &memIdempotency{}}
}

// memCredentials keeps operator credentials in memory, with the rules of
// the stored ones (one active credential per name, atomic rotation).
type memCredentials struct {
	mu    sync.Mutex
	creds []management.Credential
}

func (s *memCredentials) find(pred func(management.Credential) bool) int {
	return slices.IndexFunc(s.creds, pred)
}

func (s *memCredentials) insertLocked(c management.Credential) error {
	if s.find(func(o management.Credential) bool {
		return o.ID == c.ID || o.Digest == c.Digest || (o.Name == c.Name && o.Active() && c.Active())
	}) >= 0 {
		return fmt.Errorf("credential %s: %w", c.ID, extension.ErrConflict)
	}
	s.creds = append(s.creds, c)
	return nil
}

func (s *memCredentials) Insert(_ context.Context, c management.Credential) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insertLocked(c)
}

func (s *memCredentials) get(pred func(management.Credential) bool) (management.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.find(pred); i >= 0 {
		return s.creds[i], nil
	}
	return management.Credential{}, fmt.Errorf("credential: %w", extension.ErrNotFound)
}

func (s *memCredentials) ByDigest(_ context.Context, d management.Digest) (management.Credential, error) {
	return s.get(func(c management.Credential) bool { return c.Digest == d })
}

func (s *memCredentials) ByID(_ context.Context, id string) (management.Credential, error) {
	return s.get(func(c management.Credential) bool { return c.ID == id })
}

func (s *memCredentials) ActiveByName(_ context.Context, name string) (management.Credential, error) {
	return s.get(func(c management.Credential) bool { return c.Name == name && c.Active() })
}

func (s *memCredentials) Revoke(_ context.Context, id string, at time.Time) error {
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

func (s *memCredentials) RevokeAndInsert(_ context.Context, id string, at time.Time, next management.Credential) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(func(c management.Credential) bool { return c.ID == id })
	switch {
	case i < 0:
		return fmt.Errorf("credential %s: %w", id, extension.ErrNotFound)
	case !s.creds[i].Active():
		return fmt.Errorf("credential %s is revoked: %w", id, extension.ErrConflict)
	}
	prev := s.creds[i]
	s.creds[i].RevokedAt = at
	if err := s.insertLocked(next); err != nil {
		s.creds[i] = prev
		return err
	}
	return nil
}

func (s *memCredentials) ListOperators(context.Context) ([]management.Credential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.creds)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if !a.CreatedAt.Equal(b.CreatedAt) {
			return a.CreatedAt.Before(b.CreatedAt)
		}
		return a.ID < b.ID
	})
	return out, nil
}

// memIdempotency keeps Idempotency-Key history in memory.
type memIdempotency struct {
	mu   sync.Mutex
	recs map[[2]string]management.IdempotencyRecord
}

func (s *memIdempotency) Get(_ context.Context, principal, key string) (management.IdempotencyRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[[2]string{principal, key}]
	if !ok {
		return rec, fmt.Errorf("idempotency record: %w", extension.ErrNotFound)
	}
	rec.Body = slices.Clone(rec.Body)
	return rec, nil
}

func (s *memIdempotency) Put(_ context.Context, rec management.IdempotencyRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs == nil {
		s.recs = map[[2]string]management.IdempotencyRecord{}
	}
	rec.Body = slices.Clone(rec.Body)
	s.recs[[2]string{rec.Principal, rec.Key}] = rec
	return nil
}

func (s *memIdempotency) DeleteBefore(_ context.Context, t time.Time) (int, error) {
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
