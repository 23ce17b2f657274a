package storage

import (
	"encoding/json"
	"time"
)

// Position is a keyset position on (created_at, id), the order of every
// list but events.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// Page is the keyset window every list takes. Lists are ascending unless
// Desc. After is exclusive (the last row of the previous page); Until is an
// inclusive bound on the other side captured at the first page, so rows
// created later never join a paginated list. Limit 0 means DefaultLimit;
// it is capped at MaxLimit.
type Page struct {
	After *Position
	Until *Position
	Limit int
	Desc  bool
}

// Limits of one list page.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// EffectiveLimit applies DefaultLimit and MaxLimit.
func EffectiveLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}

// ListEventsParams filters events and pages by seq: AfterSeq is exclusive
// (0 for the start), UntilSeq an inclusive bound captured at the first page
// (0 for none). Empty filters match everything.
type ListEventsParams struct {
	Scope          string
	Work           string
	Execution      string
	Type           string
	Root           string
	CorrelationKey string
	AfterSeq       int64
	UntilSeq       int64
	Limit          int
	Desc           bool
}

// FindEventParams selects the first event in Scope after AfterSeq whose
// type is one of Types (any when empty) and whose correlation key is one of
// Keys (Keys must not be empty).
type FindEventParams struct {
	Scope    string
	AfterSeq int64
	Types    []string
	Keys     []string
}

// InsertEventParams is an event to append. Root is required (the event's
// own ID for a root).
type InsertEventParams struct {
	ID             string
	Type           string
	Source         string
	Scope          string
	Work           string
	Execution      string
	CorrelationKey string
	Data           json.RawMessage
	Parent         string
	Root           string
	Depth          int
	Actor          string
	DeliveryID     string
	AcceptedAt     time.Time
	// Fresh says the caller made ID for this insert and there is no
	// DeliveryID: no taken identity can meet it. An engine may then send
	// the insert with the transaction's next statement (PostgreSQL does),
	// so that a taken identity, should one be met all the same, fails a
	// later statement of the transaction or its end instead of the
	// insert; either way nothing of the transaction commits.
	Fresh bool
}

// UpdateCausalWindowParams moves a root's rate window, fenced by the
// window the caller read.
type UpdateCausalWindowParams struct {
	Root            string
	FromWindowStart time.Time
	FromWindowCount int
	WindowStart     time.Time
	WindowCount     int
}

// CountCausalParams counts a derived event at Depth against Root's
// window at Now (see Tx.CountCausal).
type CountCausalParams struct {
	Root  string
	Depth int
	Now   time.Time
}

// ListWorkParams filters Work.
type ListWorkParams struct {
	Scope   string
	State   WorkState
	Parent  string
	Binding string
	Page
}

// InsertWorkParams is a new Work.
type InsertWorkParams struct {
	ID           string
	Scope        string
	Binding      string
	State        WorkState
	Parent       string
	CreatedEvent string
	Grants       []string
	CreatedAt    time.Time
	// Input, when set, is an accepted event queued as the Work's first
	// input (position 1, at CreatedAt) by the same write: the Work comes
	// back with an InputCount of 1, as InsertWork then QueueInput would
	// leave it, but for its revision.
	Input string
	// OwnKey: the Work acquires its own id as a correlation key in Scope,
	// at CreatedAt, by the same write, as AcquireKey would. When another
	// Work owns that key the Work is inserted all the same, without it,
	// and AcquireKey of the key then reports the owner; a transaction
	// that acquired it this way answers its AcquireKey without a
	// statement.
	OwnKey bool
	// Assumed: the caller assumes that no Work has ID and, with OwnKey,
	// that no Work owns that key, and can run its transaction again
	// should it be wrong. An engine may then answer the insert from its
	// parameters and send it with a later statement, as late as the end
	// of the caller's function; a wrong assumption fails the transaction
	// there, with an error matching ErrDuplicate (rather than the
	// ErrDuplicate of InsertWork itself, or the Work inserted without
	// its key). A kept Work is the same row either way.
	Assumed bool
}

// UpdateWorkParams changes a Work. Nil fields are left as they are.
type UpdateWorkParams struct {
	ID string
	// FromStates fences the update (empty: any state).
	FromStates []WorkState
	// Revision fences the update when non-zero.
	Revision int64

	State          *WorkState
	BlockedReason  *string
	BlockedDetail  *string
	WaitReason     *string
	OutcomeMessage *string
	OutcomeData    *json.RawMessage
	InputWatermark *int64
	// AddAttempts is added to Attempts.
	AddAttempts int
	Now         time.Time
	// Binding and Grants move the Work to another binding of its scope
	// (an operator's rebind).
	Binding *string
	Grants  *[]string
}

// AcquireKeyParams gives Work the key in Scope.
type AcquireKeyParams struct {
	Scope string
	Key   string
	Work  string
	At    time.Time
}

// QueueInputParams queues Event for Work.
type QueueInputParams struct {
	Work  string
	Event string
	At    time.Time
}

// ListInputsParams pages a Work's inputs by position (AfterPosition
// exclusive, UntilPosition inclusive when non-zero).
type ListInputsParams struct {
	Work          string
	AfterPosition int64
	UntilPosition int64
	Limit         int
}

// ListExecutionsParams filters executions.
type ListExecutionsParams struct {
	Work    string
	Scope   string
	Binding string
	States  []ExecutionState
	// Results selects executions that ended with one of these results.
	Results []ExecutionResult
	// CreatedFrom selects executions created at or after it (non-zero).
	CreatedFrom time.Time
	Owner       string
	// NotOwner excludes executions held by this owner.
	NotOwner string
	// Nodes, when non-empty, selects executions whose node is one of
	// these ("" selects those without a node).
	Nodes []string
	// LeaseExpiredBy selects executions whose lease expired at or before
	// it (non-zero).
	LeaseExpiredBy time.Time
	Page
}

// InsertExecutionParams is a new execution at epoch 1, running.
type InsertExecutionParams struct {
	ID         string
	Work       string
	Scope      string
	Binding    string
	Executor   string
	Generation int64
	Owner      string
	// Node is the node of the daemon that claims it.
	Node           string
	LeaseExpiresAt time.Time
	Deadline       time.Time
	InputWatermark int64
	// Launched inserts the execution launched at its epoch (1): its
	// claim is the last write before its segment starts, the launch mark
	// included (see UpdateExecutionParams.Launched).
	Launched  bool
	CreatedAt time.Time
}

// AdvanceEpochParams starts epoch FromEpoch+1.
type AdvanceEpochParams struct {
	ID         string
	FromEpoch  int64
	FromStates []ExecutionState
	// ExpiredBy, when non-zero, requires the lease to have expired by it.
	ExpiredBy time.Time
	// State is the state after the advance (running, or stopping when a
	// stopping execution is adopted).
	State ExecutionState
	Owner string
	// Node, when non-empty, is the execution's node after the advance
	// (the claimer's, for a segment it launches); "" keeps it.
	Node           string
	LeaseExpiresAt time.Time
	// Deadline and InputWatermark are changed when non-nil.
	Deadline       *time.Time
	InputWatermark *int64
	Now            time.Time
}

// RenewLeaseParams renews a lease.
type RenewLeaseParams struct {
	ID    string
	Epoch int64
	Owner string
	// ValidAt: the lease must still be valid (expire after it).
	ValidAt        time.Time
	LeaseExpiresAt time.Time
	// States the execution may be in (default running).
	States []ExecutionState
}

// UpdateExecutionParams changes an execution, fenced by Epoch, Owner (when
// non-empty) and FromStates (when non-empty). A nil field is left as it
// is: ExitCode is set only with an exit code an executor observed.
type UpdateExecutionParams struct {
	ID         string
	Epoch      int64
	Owner      string
	FromStates []ExecutionState

	State          *ExecutionState
	Result         *ExecutionResult
	Message        *string
	ExitCode       *int
	LeaseExpiresAt *time.Time
	// Launched records that the segment of Epoch is handed to its
	// executor now (LaunchedEpoch becomes Epoch).
	Launched bool
	// Session replaces the recorded agent session when non-nil.
	Session *string
	// AddUsage is added to the recorded usage when non-nil (Usage.Add: a
	// record without usage gets AddUsage).
	AddUsage *Usage
	Now      time.Time
}

// ClaimWorkParams is a set of ready Work to start at Now (Tx.ClaimWork):
// Work, each at the revision it was listed at, or Listed.
type ClaimWorkParams struct {
	Work []WorkRevision
	// Listed, instead of Work, are the rows themselves as the caller
	// listed them (ListClaimable), and make the claim all or none: see
	// Tx.ClaimWork.
	Listed []Work
	Now    time.Time
}

// WorkRevision is a Work at a revision.
type WorkRevision struct {
	ID       string
	Revision int64
}

// Revisions are the rows ws at their revisions.
func Revisions(ws []Work) []WorkRevision {
	out := make([]WorkRevision, len(ws))
	for i, w := range ws {
		out[i] = WorkRevision{ID: w.ID, Revision: w.Revision}
	}
	return out
}

// MarkLaunchedParams is a set of segments handed to their executors at
// Now by the daemon Owner (Tx.MarkLaunched).
type MarkLaunchedParams struct {
	Owner    string
	Launches []Launch
	Now      time.Time
}

// Launch is one segment of MarkLaunchedParams: an execution at an epoch.
type Launch struct {
	Execution string
	Epoch     int64
}

// MarkDeclarationAppliedParams records what Complete did with a
// declaration.
type MarkDeclarationAppliedParams struct {
	Execution   string
	Epoch       int64
	Disposition string
	At          time.Time
}

// ListWaitsParams filters waits.
type ListWaitsParams struct {
	Work  string
	Scope string
	State WaitState
	Page
}

// InsertWaitParams is a new active Wait.
type InsertWaitParams struct {
	ID           string
	Work         string
	Scope        string
	Execution    string
	Epoch        int64
	Registration string
	Types        []string
	Keys         []string
	OnWorkKeys   bool
	Watermark    int64
	Timer        string
	TimeoutAt    time.Time
	CreatedAt    time.Time
}

// UpdateWaitParams moves an active wait to State.
type UpdateWaitParams struct {
	ID          string
	State       WaitState
	SatisfiedBy string
	Now         time.Time
}

// ListArtifactsParams filters artifacts.
type ListArtifactsParams struct {
	Execution string
	Work      string
	Page
}
