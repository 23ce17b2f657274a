package storage

import (
	"encoding/json"
	"time"
)

// Event is an immutable fact, accepted once.
type Event struct {
	// Seq is the acceptance sequence: gap-free, assigned at commit order.
	Seq  int64
	ID   string
	Type string
	// Source says who the event came from (core.manual, core.host,
	// execution, an ingress name).
	Source string
	Scope  string
	// Work is the Work the event is about or came from ("" for none).
	Work string
	// Execution is the execution that emitted it (source execution).
	Execution      string
	CorrelationKey string
	Data           json.RawMessage
	// Parent is the event that caused this one; Root the first event of
	// the causal chain (itself for a root); Depth 0 for a root.
	Parent string
	Root   string
	Depth  int
	// Actor is who did it (operator:<name>); kept only for the host's
	// operator sources.
	Actor string
	// DeliveryID is the source's own identity of the delivery; unique per
	// source.
	DeliveryID string
	AcceptedAt time.Time

	// Replayed is set (never stored) when acceptance returned an event
	// accepted earlier under the same identity instead of a new one.
	Replayed bool
}

// CausalRoot holds the causal limits pinned on a root at its first derived
// emission, and its per-minute rate window.
type CausalRoot struct {
	Root        string
	MaxDepth    int
	PerMinute   int
	WindowStart time.Time
	WindowCount int
	PinnedAt    time.Time
}

// WorkState is the lifecycle state of a Work.
type WorkState string

const (
	WorkReady     WorkState = "ready"
	WorkRunning   WorkState = "running"
	WorkWaiting   WorkState = "waiting"
	WorkSucceeded WorkState = "succeeded"
	WorkFailed    WorkState = "failed"
	WorkCancelled WorkState = "cancelled"
)

// Terminal reports whether the state is final.
func (s WorkState) Terminal() bool {
	return s == WorkSucceeded || s == WorkFailed || s == WorkCancelled
}

// Valid reports whether s is a known state.
func (s WorkState) Valid() bool {
	switch s {
	case WorkReady, WorkRunning, WorkWaiting, WorkSucceeded, WorkFailed, WorkCancelled:
		return true
	}
	return false
}

// NonterminalWorkStates are the states in which a Work still owns keys.
var NonterminalWorkStates = []WorkState{WorkReady, WorkRunning, WorkWaiting}

// Work is a unit of work with a lifecycle.
type Work struct {
	ID      string
	Scope   string
	Binding string
	State   WorkState
	// BlockedReason holds the Work ("" when it is not held): the
	// scheduler does not start or recover it until a retry clears it.
	BlockedReason string
	// BlockedDetail is a short, safe explanation of the hold.
	BlockedDetail string
	// WaitReason says why a waiting Work waits when a start gate parked
	// it before its first attempt ("" otherwise); the kernel clears it
	// when the Work leaves waiting.
	WaitReason string
	// Parent is the Work that created this one ("" for none).
	Parent string
	// CreatedEvent is the Work's core.work.created event.
	CreatedEvent   string
	OutcomeMessage string
	OutcomeData    json.RawMessage
	// Grants are the binding grants the Work took when it was created.
	Grants []string
	// InputWatermark is the position of the last input an attempt
	// acknowledged; inputs above it are pending.
	InputWatermark int64
	// InputCount is the position of the last queued input.
	InputCount int64
	// Attempts counts the executions created for the Work.
	Attempts int
	// Revision changes on every update (ETags).
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Held reports whether the Work is held.
func (w Work) Held() bool { return w.BlockedReason != "" }

// Input is one event queued for a Work, at a position counted from 1.
type Input struct {
	Work     string
	Position int64
	Event    string
	QueuedAt time.Time
}

// ExecutionState is the lifecycle state of an execution.
type ExecutionState string

const (
	// ExecutionRunning: leased by Owner at Epoch until LeaseExpiresAt.
	ExecutionRunning ExecutionState = "running"
	// ExecutionParked: a resume-capable executor suspended it on a Wait.
	ExecutionParked ExecutionState = "parked"
	// ExecutionStopping: fenced by a cancel; the process may still run
	// until the host confirms it stopped.
	ExecutionStopping ExecutionState = "stopping"
	// ExecutionFinished: ended with a Result.
	ExecutionFinished ExecutionState = "finished"
)

// ExecutionResult is how an execution ended.
type ExecutionResult string

const (
	ResultNone      ExecutionResult = ""
	ResultSucceeded ExecutionResult = "succeeded"
	ResultFailed    ExecutionResult = "failed"
	ResultCancelled ExecutionResult = "cancelled"
	// ResultLost: the segment vanished without a status.
	ResultLost ExecutionResult = "lost"
)

// Execution is one attempt of a Work by one executor.
type Execution struct {
	ID       string
	Work     string
	Scope    string
	Binding  string
	Executor string
	// Generation is the configuration generation the attempt is pinned
	// to.
	Generation int64
	// Epoch starts at 1 and grows with every claim of a parked execution,
	// recovery and adoption. Only the current epoch may act.
	Epoch int64
	Owner string
	// Node is the node (the state directory's stable id) whose daemon
	// launched the current segment, where its process runs; "" for an
	// execution written before nodes were recorded, which every daemon
	// treats as its own node's. Only a daemon of the same node can adopt
	// the segment's process.
	Node           string
	LeaseExpiresAt time.Time
	Deadline       time.Time
	State          ExecutionState
	// InputWatermark is the position of the last Work input this attempt
	// was given (and so acknowledged).
	InputWatermark int64
	Result         ExecutionResult
	Message        string
	// ExitCode is the exit code an executor observed when the segment
	// ended (-1 for a process it saw killed by a signal); nil while no end
	// was observed: a live segment, or one that finished without the
	// executor's result (a stop confirmed on its own, a lost segment, an
	// executor error, a claim given back).
	ExitCode *int
	// LaunchedEpoch is the epoch at which the current segment was handed
	// to its executor (0: never): it is written, fenced, just before the
	// executor starts a process, so a segment with LaunchedEpoch below its
	// Epoch never reached its executor and nothing of it ran. Recovery
	// and adoption carry it to the epoch they start (the same segment). It
	// is the scheduler's own: the API does not show it.
	LaunchedEpoch int64
	// Session is the agent session the execution's segments continue (""
	// for none): the last one a segment's result named.
	Session string
	// Usage is what the execution's segments consumed, summed (nil when
	// no segment reported any).
	Usage     *Usage
	Revision  int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Usage is what an agent consumed, as its own output reported it.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	// CostUSD is the agent's own estimate in US dollars.
	CostUSD float64
	Turns   int64
}

// Add returns the sum of u and v; nil is zero, and the sum of two nils is
// nil.
func (u *Usage) Add(v *Usage) *Usage {
	if u == nil && v == nil {
		return nil
	}
	var sum Usage
	for _, x := range []*Usage{u, v} {
		if x == nil {
			continue
		}
		sum.InputTokens += x.InputTokens
		sum.OutputTokens += x.OutputTokens
		sum.CacheReadTokens += x.CacheReadTokens
		sum.CacheCreationTokens += x.CacheCreationTokens
		sum.CostUSD += x.CostUSD
		sum.Turns += x.Turns
	}
	return &sum
}

// Live reports whether the execution has not finished.
func (e Execution) Live() bool { return e.State != ExecutionFinished }

// Launched reports whether the current epoch's segment was handed to its
// executor (its process may have started).
func (e Execution) Launched() bool { return e.LaunchedEpoch > 0 && e.LaunchedEpoch == e.Epoch }

// DeclarationKind is what a segment declared.
type DeclarationKind string

const (
	DeclaredWait    DeclarationKind = "wait"
	DeclaredOutcome DeclarationKind = "outcome"
)

// Declaration is a segment's declaration of a wait or an outcome, recorded
// under the fence for its epoch and applied by the scheduler's Complete.
type Declaration struct {
	Execution string
	Epoch     int64
	Kind      DeclarationKind
	// Payload is the declaration's JSON (the runtime's WaitSpec or
	// OutcomeSpec).
	Payload    json.RawMessage
	DeclaredAt time.Time
	// AppliedAt is zero while the declaration is pending.
	AppliedAt time.Time
	// Disposition says what Complete did with it (applied, discarded).
	Disposition string
}

// Pending reports whether the declaration has not been applied.
func (d Declaration) Pending() bool { return d.AppliedAt.IsZero() }

// CallGuard is what the lease guard of a call made for a segment (a
// toolbelt call) checks, read at once by Reader.GetCallGuard: the
// execution, its Work, whether the segment has declared, and the latest
// configuration generation, all of one snapshot.
type CallGuard struct {
	// Execution is the row GetExecution returns.
	Execution Execution
	// Work is the execution's Work, the row GetWork returns. An execution
	// always has one: its work column references the work table.
	Work Work
	// Declared: the execution has a declaration that has not been
	// applied yet (GetPendingDeclaration would return it).
	Declared bool
	// LatestGeneration is the number of the highest committed
	// configuration generation (LatestGeneration's), 0 before the first.
	LatestGeneration int64
	// ActiveWait: the Work has an active wait (GetActiveWait would return
	// it).
	ActiveWait bool
	// LiveTokens: the execution has a token that is not revoked yet,
	// expired or not (RevokeTokens of the execution would revoke it).
	LiveTokens bool
	// KeyOwner is the id of the Work that owns the key named by the
	// Work's own id in its scope (GetKeyOwner(Work.Scope, Work.ID)'s),
	// "" for none; KeyWaits: an active wait of that scope names that key
	// (ListActiveWaitsByKey(Work.Scope, Work.ID) would list it). Routing
	// the Work's core.work.finished reads both.
	KeyOwner string
	KeyWaits bool
}

// WaitState is the lifecycle state of a Wait.
type WaitState string

const (
	WaitActive    WaitState = "active"
	WaitSatisfied WaitState = "satisfied"
	WaitTimedOut  WaitState = "timed_out"
	WaitCancelled WaitState = "cancelled"
)

// Wait is a registered predicate that wakes a Work: an event in the Work's
// scope accepted after Watermark, whose type is one of Types (any when
// empty) and whose correlation key is one of Keys (or, when OnWorkKeys, one
// of the keys the Work owns or the id of one of its child Work).
type Wait struct {
	ID    string
	Work  string
	Scope string
	// Execution and Epoch name the segment that declared it.
	Execution string
	Epoch     int64
	// Registration is the owner registration ("" for the execution
	// itself, else the registration that parked the caller).
	Registration string
	Types        []string
	Keys         []string
	OnWorkKeys   bool
	Watermark    int64
	// Timer is the timeout timer ("" for none), due at TimeoutAt.
	Timer       string
	TimeoutAt   time.Time
	State       WaitState
	SatisfiedBy string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Timer kinds.
const (
	TimerWaitTimeout = "wait_timeout"
)

// Timer fires once at DueAt.
type Timer struct {
	ID        string
	Kind      string
	Target    string
	DueAt     time.Time
	FiredAt   time.Time
	CreatedAt time.Time
}

// Artifact is the metadata of bytes an execution produced; the bytes live
// where the engine keeps them (Store.ArtifactBlobs).
type Artifact struct {
	ID        string
	Execution string
	Work      string
	Name      string
	MediaType string
	Size      int64
	SHA256    string
	CreatedAt time.Time
}
