package storage

import (
	"context"
	"encoding/json"
	"time"
)

// The management API's records: operator credentials (digest only),
// Idempotency-Key history, committed configuration generations, the
// committed scope records and the host's own keys (the cursor key). They
// live in coordination storage so that they persist, and change atomically,
// with everything else.

// Credential is an operator credential as it is stored: the SHA-256 digest
// of its token, never the token. Role is the role's name; storage does not
// know what it allows.
type Credential struct {
	// ID is the revocation id (tok_…).
	ID        string
	Name      string
	Role      string
	Digest    []byte
	CreatedAt time.Time
	// RevokedAt is zero while the credential is active.
	RevokedAt time.Time
}

// Active reports whether the credential is not revoked.
func (c Credential) Active() bool { return c.RevokedAt.IsZero() }

// ListCredentialsParams filters credentials, listed on (created_at, id).
type ListCredentialsParams struct {
	// Active lists only the credentials that are not revoked.
	Active bool
	Page
}

// IdempotencyRecord is a completed management request kept for replay,
// keyed by (Principal, Key).
type IdempotencyRecord struct {
	Principal string
	Key       string
	Method    string
	Path      string
	BodyHash  string
	Status    int
	Body      []byte
	CreatedAt time.Time
}

// Generation is a committed configuration generation. Normalized is the
// redacted normalized configuration: it never holds a secret reference's
// text, so the document itself is kept apart (see the config service).
type Generation struct {
	Number     int64
	Hash       string
	Normalized json.RawMessage
	// Actor is who published it (operator:<name>, or host:<reason>).
	Actor     string
	CreatedAt time.Time
}

// ScopeRecord is the committed metadata of one scope, as of Generation,
// the generation that last changed it. A scope a later generation no
// longer names keeps its record, marked Removed.
type ScopeRecord struct {
	ID         string
	Parent     string
	Enabled    bool
	Removed    bool
	Active     bool
	Bindings   []string
	Routes     []string
	Generation int64
	UpdatedAt  time.Time
}

// HostKey is a key the host generated once and keeps (the list cursor
// key). It is never a token or a secret of the configuration.
type HostKey struct {
	Name      string
	Value     []byte
	CreatedAt time.Time
}

// ManagementReader holds the management API's queries.
type ManagementReader interface {
	// GetCredential returns the credential with this id, or ErrNotFound.
	GetCredential(ctx context.Context, id string) (Credential, error)
	// GetCredentialByDigest returns the credential with this digest.
	GetCredentialByDigest(ctx context.Context, digest []byte) (Credential, error)
	// GetActiveCredential returns the active credential of name.
	GetActiveCredential(ctx context.Context, name string) (Credential, error)
	// ListCredentials lists credentials, active and revoked (only the
	// active ones with p.Active), in the keyset window p.Page on
	// (created_at, id).
	ListCredentials(ctx context.Context, p *ListCredentialsParams) ([]Credential, error)

	GetIdempotency(ctx context.Context, principal, key string) (IdempotencyRecord, error)

	GetGeneration(ctx context.Context, number int64) (Generation, error)
	// LatestGeneration returns the highest committed generation, or
	// ErrNotFound before the first.
	LatestGeneration(ctx context.Context) (Generation, error)
	// ListScopeRecords lists every scope record by id.
	ListScopeRecords(ctx context.Context) ([]ScopeRecord, error)
	// CountWork counts the Work of scope in one of states.
	CountWork(ctx context.Context, scope string, states []WorkState) (int, error)

	GetHostKey(ctx context.Context, name string) (HostKey, error)
}

// ManagementTx holds the management API's writes.
type ManagementTx interface {
	// InsertCredential stores a credential; ErrDuplicate when its id or
	// digest exists, or its name already has an active credential.
	InsertCredential(ctx context.Context, c *Credential) error
	// RevokeCredential marks a credential revoked at at, keeping an
	// earlier revocation time; ErrNotFound for an unknown id.
	RevokeCredential(ctx context.Context, id string, at time.Time) error

	// PutIdempotency stores rec, replacing the record of the same
	// principal and key.
	PutIdempotency(ctx context.Context, rec *IdempotencyRecord) error
	// DeleteIdempotencyBefore deletes records created before t.
	DeleteIdempotencyBefore(ctx context.Context, t time.Time) (int, error)

	// InsertGeneration commits a generation; ErrDuplicate when its number
	// is taken, ErrFenced unless it is the next number after the highest.
	InsertGeneration(ctx context.Context, g *Generation) error
	// PutScopeRecord creates or replaces a scope's record.
	PutScopeRecord(ctx context.Context, r *ScopeRecord) error

	// InsertHostKey stores a key; ErrDuplicate when name exists.
	InsertHostKey(ctx context.Context, k *HostKey) error
}
