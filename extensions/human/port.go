package human

import (
	"context"
	"time"
)

// The states of an approval.
const (
	StatePending  = "pending"
	StateApproved = "approved"
	StateDenied   = "denied"
	StateExpired  = "expired"
)

// The kinds of an approval.
const (
	KindCall  = "call"
	KindStart = "start"
)

// Approval is one approval as the extension keeps it.
type Approval struct {
	ID        string    `json:"id"`
	Scope     string    `json:"scope"`
	Work      string    `json:"work"`
	Binding   string    `json:"binding,omitempty"`
	Kind      string    `json:"kind"`
	Operation string    `json:"operation,omitempty"`
	InputHash string    `json:"input_hash,omitempty"`
	State     string    `json:"state"`
	Actor     string    `json:"actor,omitempty"`
	Note      string    `json:"note,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	// ConsumedAt is when the approval was used up (zero: still open).
	ConsumedAt time.Time `json:"consumed_at,omitzero"`
}

// Key names the open approval of one held call (or start: Kind start, no
// operation, no hash).
type Key struct {
	Work      string
	Kind      string
	Operation string
	InputHash string
}

// Decision decides a pending approval.
type Decision struct {
	ID    string
	State string
	Actor string
	Note  string
	At    time.Time
	// Wake: accept, with the decision and in the same transaction, the
	// Event EventDecided correlated to the approval's Work (its key is
	// the Work's id), caused by Cause, so that the parked Work wakes.
	Wake  bool
	Cause string
}

// ListQuery selects approvals of a scope, in creation order.
type ListQuery struct {
	Scope string
	Work  string
	State string
	Limit int
}

// Port is what the extension keeps its approvals through. The daemon
// adapts coordination storage to it. A lookup of something that does not
// exist is an error wrapping extension.ErrNotFound; a write that lost a
// race (a second open approval of a key, a decision of an approval that
// is no longer pending, a second consumption) wraps extension.ErrConflict.
type Port interface {
	Get(ctx context.Context, id string) (Approval, error)
	Open(ctx context.Context, key Key) (Approval, error)
	// Create stores a pending approval; the port assigns its id.
	Create(ctx context.Context, a Approval) (Approval, error)
	Decide(ctx context.Context, d Decision) (Approval, error)
	Consume(ctx context.Context, id string, at time.Time) (Approval, error)
	List(ctx context.Context, q ListQuery) ([]Approval, error)
}
