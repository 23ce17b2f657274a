package storage

import (
	"context"
	"time"
)

// Approvals are the records of an extension that holds calls and Work for
// an operator's decision (the human extension): each names the Work it
// holds, what it holds (a call to one operation with one input, or the
// Work's start) and what was decided. Storage keeps them with everything
// else so that they survive a restart; it does not know what a state
// means beyond the fences below.

// The states of an approval. Only a pending approval is decided.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// The kinds of an approval.
const (
	// ApprovalCall holds one call: an operation with one input's hash.
	ApprovalCall = "call"
	// ApprovalStart holds a Work's first attempt.
	ApprovalStart = "start"
)

// Approval is one approval. Its key is (Work, Kind, Operation,
// InputHash): at most one approval of a key is open (not consumed).
type Approval struct {
	ID        string
	Scope     string
	Work      string
	Binding   string
	Kind      string
	Operation string
	// InputHash is the hex SHA-256 of the call's canonical input ("" for a
	// start approval).
	InputHash string
	State     string
	// Actor decided it (operator:<name>, or host:<reason>); "" while
	// pending.
	Actor string
	// Note is the approver's note or the denial's reason.
	Note      string
	CreatedAt time.Time
	// ExpiresAt is when a pending approval expires (zero: never).
	ExpiresAt time.Time
	DecidedAt time.Time
	// ConsumedAt is when the approval was used up (zero: still open).
	ConsumedAt time.Time
}

// ApprovalKey names the open approval of one held call or start.
type ApprovalKey struct {
	Work      string
	Kind      string
	Operation string
	InputHash string
}

// ListApprovalsParams filters approvals, listed on (created_at, id).
type ListApprovalsParams struct {
	// Scope, Work and State select ("" any).
	Scope string
	Work  string
	State string
	Page
}

// DecideApprovalParams decides a pending approval.
type DecideApprovalParams struct {
	ID string
	// State is approved, denied or expired.
	State string
	Actor string
	Note  string
	At    time.Time
}

// ApprovalReader holds the approvals' queries.
type ApprovalReader interface {
	// GetApproval returns an approval, or ErrNotFound.
	GetApproval(ctx context.Context, id string) (Approval, error)
	// GetOpenApproval returns the approval of key that is not consumed,
	// or ErrNotFound.
	GetOpenApproval(ctx context.Context, key ApprovalKey) (Approval, error)
	// ListApprovals lists approvals in the keyset window p.Page.
	ListApprovals(ctx context.Context, p *ListApprovalsParams) ([]Approval, error)
}

// ApprovalTx holds the approvals' writes.
type ApprovalTx interface {
	// InsertApproval stores an approval; ErrDuplicate when its id exists
	// or its key already has an open approval.
	InsertApproval(ctx context.Context, a *Approval) error
	// DecideApproval moves a pending approval to p.State, stamping the
	// actor, the note and the time; ErrFenced when it is not pending,
	// ErrNotFound when it does not exist.
	DecideApproval(ctx context.Context, p *DecideApprovalParams) (Approval, error)
	// ConsumeApproval uses an open approval up at at; ErrFenced when it
	// is consumed already, ErrNotFound when it does not exist.
	ConsumeApproval(ctx context.Context, id string, at time.Time) (Approval, error)
}
