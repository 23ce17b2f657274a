package storage

import (
	"context"
	"time"
)

// Egress connection records: one per connection an execution opened (or
// tried to open) through the daemon's egress proxy. A record never holds
// what went through the connection, a header or a secret: only where it
// went, whether it was let through and how many bytes went each way.

// Reasons of an egress record (EgressConnection.Reason).
const (
	// EgressNotAllowed: the binding's egress in the active configuration
	// does not name the host and port.
	EgressNotAllowed = "not_allowed"
	// EgressNotLive: the execution is no longer running.
	EgressNotLive = "not_live"
	// EgressBusy: the execution already had as many connections open as
	// the proxy allows.
	EgressBusy = "busy"
	// EgressMalformed: the request was not a CONNECT to host:port.
	EgressMalformed = "malformed"
	// EgressDialFailed: the connection was allowed, but the host could
	// not be reached.
	EgressDialFailed = "dial_failed"
	// EgressIdle: the connection was closed after its idle timeout.
	EgressIdle = "idle_timeout"
	// EgressClosed: the host closed the connection: its execution ended
	// or the daemon stopped.
	EgressClosed = "closed_by_host"
)

// EgressConnection is one connection through the egress proxy.
type EgressConnection struct {
	ID        string
	Execution string
	// Host and Port are what the execution asked for (Host lower-cased;
	// empty for a malformed request).
	Host string
	Port int
	// Allowed: the allowlist let it through. Reason says why it was
	// refused, or, for an allowed one, why it ended early ("" when the
	// connection ended normally or is still open).
	Allowed bool
	Reason  string
	// BytesUp went from the execution to the host, BytesDown back.
	BytesUp   int64
	BytesDown int64
	StartedAt time.Time
	// EndedAt is zero while the connection is open; a refused one ends
	// when it starts.
	EndedAt time.Time
}

// FinishEgressParams records how an open connection ended.
type FinishEgressParams struct {
	ID        string
	Reason    string
	BytesUp   int64
	BytesDown int64
	EndedAt   time.Time
}

// ListEgressParams filters egress records, ordered by (StartedAt, ID).
type ListEgressParams struct {
	Execution string
	Page
}

// EgressReader holds the egress records' query.
type EgressReader interface {
	ListEgressConnections(ctx context.Context, p *ListEgressParams) ([]EgressConnection, error)
}

// EgressTx holds the egress records' writes.
type EgressTx interface {
	// InsertEgressConnection stores a record; ErrDuplicate when its id
	// exists.
	InsertEgressConnection(ctx context.Context, c *EgressConnection) error
	// FinishEgressConnection ends an open record; ErrNotFound when none
	// has the id, ErrFenced when it has ended already.
	FinishEgressConnection(ctx context.Context, p *FinishEgressParams) error
}
