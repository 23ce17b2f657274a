package storage

import (
	"encoding/json"
	"time"
)

// Event is an immutable fact, accepted once.
type Event struct {
	// Seq is the acceptance sequence: gap-free, assigned at commit order.
	Seq  int64  `json:"seq"`
	ID   string `json:"id"`
	Type string `json:"type"`
	// Source says who the event came from (core.manual, core.host,
	// execution, an ingress name).
	Source string `json:"source"`
	Scope  string `json:"scope"`
	// Work is the Work the event is about or came from ("" for none).
	Work string `json:"work,omitempty"`
	// Execution is the execution that emitted it (source execution).
	Execution      string          `json:"execution,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
	Data           json.RawMessage `json:"data"`
	// Parent is the event that caused this one; Root the first event of
	// the causal chain (itself for a root); Depth 0 for a root.
	Parent string `json:"parent,omitempty"`
	Root   string `json:"root"`
	Depth  int    `json:"depth"`
	// Actor is who did it (operator:<name>); kept only for the host's
	// operator sources.
	Actor string `json:"actor,omitempty"`
	// DeliveryID is the source's own identity of the delivery; unique per
	// source.
	DeliveryID string    `json:"delivery_id,omitempty"`
	AcceptedAt time.Time `json:"accepted_at"`

	// Replayed is set (never stored) when acceptance returned an event
	// accepted earlier under the same identity instead of a new one.
	Replayed bool `json:"-"`
}

// CausalRoot holds the causal limits pinned on a root at its first derived
// emission, and its per-minute rate window.
type CausalRoot struct {
	Root        string    `json:"root"`
	MaxDepth    int       `json:"max_depth"`
	PerMinute   int       `json:"per_minute"`
	WindowStart time.Time `json:"window_start"`
	WindowCount int       `json:"window_count"`
	PinnedAt    time.Time `json:"pinned_at"`
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
	ID      string    `json:"id"`
	Scope   string    `json:"scope"`
	Binding string    `json:"binding"`
	State   WorkState `json:"state"`
	// BlockedReason holds the Work ("" when it is not held): the
	// scheduler does not start or recover it until a retry clears it.
	BlockedReason string `json:"blocked_reason,omitempty"`
	// BlockedDetail is a short, safe explanation of the hold.
	BlockedDetail string `json:"blocked_detail,omitempty"`
	// Parent is the Work that created this one ("" for none).
	Parent string `json:"parent,omitempty"`
	// CreatedEvent is the Work's core.work.created event.
	CreatedEvent   string          `json:"created_event"`
	OutcomeMessage string          `json:"outcome_message,omitempty"`
	OutcomeData    json.RawMessage `json:"outcome_data,omitempty"`
	// Grants are the binding grants the Work took when it was created.
	Grants []string `json:"grants"`
	// InputWatermark is the position of the last input an attempt
	// acknowledged; inputs above it are pending.
	InputWatermark int64 `json:"input_watermark"`
	// InputCount is the position of the last queued input.
	InputCount int64 `json:"input_count"`
	// Attempts counts the executions created for the Work.
	Attempts int `json:"attempts"`
	// Revision changes on every update (ETags).
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Held reports whether the Work is held.
func (w Work) Held() bool { return w.BlockedReason != "" }

// Input is one event queued for a Work, at a position counted from 1.
type Input struct {
	Work     string    `json:"work"`
	Position int64     `json:"position"`
	Event    string    `json:"event"`
	QueuedAt time.Time `json:"queued_at"`
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
	ID       string `json:"id"`
	Work     string `json:"work"`
	Scope    string `json:"scope"`
	Binding  string `json:"binding"`
	Executor string `json:"executor"`
	// Generation is the configuration generation the attempt is pinned
	// to.
	Generation int64 `json:"generation"`
	// Epoch starts at 1 and grows with every claim of a parked execution,
	// recovery and adoption. Only the current epoch may act.
	Epoch          int64          `json:"epoch"`
	Owner          string         `json:"owner"`
	LeaseExpiresAt time.Time      `json:"lease_expires_at"`
	Deadline       time.Time      `json:"deadline"`
	State          ExecutionState `json:"state"`
	// InputWatermark is the position of the last Work input this attempt
	// was given (and so acknowledged).
	InputWatermark int64           `json:"input_watermark"`
	Result         ExecutionResult `json:"result,omitempty"`
	Message        string          `json:"message,omitempty"`
	// ExitCode is the exit code an executor observed when the segment
	// ended (-1 for a process it saw killed by a signal); nil while no end
	// was observed: a live segment, or one that finished without the
	// executor's result (a stop confirmed on its own, a lost segment, an
	// executor error, a claim given back).
	ExitCode *int `json:"exit_code,omitempty"`
	// LaunchedEpoch is the epoch at which the current segment was handed
	// to its executor (0: never): it is written, fenced, just before the
	// executor starts a process, so a segment with LaunchedEpoch below its
	// Epoch never reached its executor and nothing of it ran. Recovery
	// and adoption carry it to the epoch they start (the same segment). It
	// is the scheduler's own: the API does not show it.
	LaunchedEpoch int64     `json:"-"`
	Revision      int64     `json:"revision"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
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
	Execution string          `json:"execution"`
	Epoch     int64           `json:"epoch"`
	Kind      DeclarationKind `json:"kind"`
	// Payload is the declaration's JSON (the runtime's WaitSpec or
	// OutcomeSpec).
	Payload    json.RawMessage `json:"payload"`
	DeclaredAt time.Time       `json:"declared_at"`
	// AppliedAt is zero while the declaration is pending.
	AppliedAt time.Time `json:"applied_at,omitzero"`
	// Disposition says what Complete did with it (applied, discarded).
	Disposition string `json:"disposition,omitempty"`
}

// Pending reports whether the declaration has not been applied.
func (d Declaration) Pending() bool { return d.AppliedAt.IsZero() }

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
	ID    string `json:"id"`
	Work  string `json:"work"`
	Scope string `json:"scope"`
	// Execution and Epoch name the segment that declared it.
	Execution string `json:"execution,omitempty"`
	Epoch     int64  `json:"epoch"`
	// Registration is the owner registration ("" for the execution
	// itself, else the registration that parked the caller).
	Registration string   `json:"registration,omitempty"`
	Types        []string `json:"types"`
	Keys         []string `json:"keys"`
	OnWorkKeys   bool     `json:"on_work_keys"`
	Watermark    int64    `json:"watermark"`
	// Timer is the timeout timer ("" for none), due at TimeoutAt.
	Timer       string    `json:"timer,omitempty"`
	TimeoutAt   time.Time `json:"timeout_at,omitzero"`
	State       WaitState `json:"state"`
	SatisfiedBy string    `json:"satisfied_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Timer kinds.
const (
	TimerWaitTimeout = "wait_timeout"
)

// Timer fires once at DueAt.
type Timer struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Target    string    `json:"target"`
	DueAt     time.Time `json:"due_at"`
	FiredAt   time.Time `json:"fired_at,omitzero"`
	CreatedAt time.Time `json:"created_at"`
}

// Artifact is the metadata of bytes an execution produced; the bytes live
// in Artifacts' directory.
type Artifact struct {
	ID        string    `json:"id"`
	Execution string    `json:"execution"`
	Work      string    `json:"work"`
	Name      string    `json:"name"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}
