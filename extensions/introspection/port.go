package introspection

import (
	"context"
	"time"

	"github.com/open-conduit/open-conduit/api"
)

// Port is what the extension reads through. The daemon adapts storage and
// the configuration to it. Every lookup of something that does not exist
// answers an error wrapping extension.ErrNotFound; lists are ascending.
type Port interface {
	// Work returns a Work.
	Work(ctx context.Context, id string) (api.Work, error)
	// Children lists the Work whose parent is q.Parent, in creation order
	// ((created_at, id)).
	Children(ctx context.Context, q ListQuery) ([]api.Work, error)
	// Event returns an Event.
	Event(ctx context.Context, id string) (api.Event, error)
	// Events lists Events by acceptance sequence.
	Events(ctx context.Context, q EventQuery) ([]api.Event, error)
	// Executions lists a Work's executions in creation order.
	Executions(ctx context.Context, q ListQuery) ([]api.Execution, error)
	// Waits lists a Work's waits in creation order.
	Waits(ctx context.Context, q ListQuery) ([]api.Wait, error)
	// AuthorizeRead reports whether the scope's current read ceiling
	// allows read (one of the Read… constants): the check read_context
	// makes.
	AuthorizeRead(scope, read string) bool
}

// The reads of a scope's read ceiling (configuration's
// authorization.reads) the operations need.
const (
	ReadWork       = "work"
	ReadEvents     = "events"
	ReadExecutions = "executions"
	ReadWaits      = "waits"
)

// Position is a keyset position on (created_at, id), exclusive.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// ListQuery selects one page of a Work's children, executions or waits:
// those of Scope whose Work (for children: whose parent) is Work, after
// After (nil: from the start), at most Limit.
type ListQuery struct {
	Scope string
	Work  string
	// State, for waits only, selects one state ("" any).
	State string
	After *Position
	Limit int
}

// EventQuery selects one page of a scope's Events, by Work or by causal
// root (or both), after AfterSeq (exclusive), at most Limit.
type EventQuery struct {
	Scope    string
	Work     string
	Root     string
	Type     string
	AfterSeq int64
	Limit    int
}
