package api

import (
	"encoding/json"
	"time"
)

// Work states.
const (
	WorkReady     = "ready"
	WorkRunning   = "running"
	WorkWaiting   = "waiting"
	WorkSucceeded = "succeeded"
	WorkFailed    = "failed"
	WorkCancelled = "cancelled"
)

// Work is a unit of work with a lifecycle (GET /v1/work, GET
// /v1/work/{id}).
type Work struct {
	ID      string `json:"id"`
	Scope   string `json:"scope"`
	Binding string `json:"binding"`
	// State is one of the Work… states.
	State string `json:"state"`
	// BlockedReason holds the Work ("" when it is not held): it is not
	// started until a retry; BlockedDetail says why, in safe words.
	BlockedReason string `json:"blocked_reason,omitempty"`
	BlockedDetail string `json:"blocked_detail,omitempty"`
	// Hold is the same hold told by who set it (nil when the Work is not
	// held).
	Hold *Hold `json:"hold,omitempty"`
	// WaitReason says why a waiting Work waits when a start gate parked
	// it before its first attempt: the gate's registration and its
	// reason ("" for any other Work).
	WaitReason string `json:"wait_reason,omitempty"`
	// Parent is the Work that created this one ("" for none).
	Parent       string `json:"parent,omitempty"`
	CreatedEvent string `json:"created_event"`
	// OutcomeMessage and OutcomeData are a finished Work's outcome.
	OutcomeMessage string          `json:"outcome_message,omitempty"`
	OutcomeData    json.RawMessage `json:"outcome_data,omitempty"`
	Grants         []string        `json:"grants"`
	// InputWatermark is the position of the last input an attempt
	// acknowledged; InputCount that of the last queued input.
	InputWatermark int64 `json:"input_watermark"`
	InputCount     int64 `json:"input_count"`
	Attempts       int   `json:"attempts"`
	// Revision changes on every update; the ETag derives from it.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Hold is a held Work's hold: its reason (the Work's blocked reason),
// its detail and who set it, HoldByOperator (operator_held from a hold,
// operator_cancelled from an execution cancel; a release lifts it) or
// HoldBySystem (secret_unavailable, attempt_lost, binding_unavailable,
// sandbox_unavailable, toolbelt_unavailable, a start gate's…; a release
// refuses it with system_hold: fix the cause and retry the Work).
type Hold struct {
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
	By     string `json:"by"`
}

// Who set a hold (Hold.By).
const (
	HoldByOperator = "operator"
	HoldBySystem   = "system"
)

// HoldOperator is the blocked reason of an operator's hold (POST
// /v1/work/{id}/hold).
const HoldOperator = "operator_held"

// HoldRequest is the body of POST /v1/work/{id}/hold.
type HoldRequest struct {
	// Reason is required (at most 512 bytes); it is the hold's detail.
	Reason string `json:"reason"`
	// Stop fences and stops the Work's live attempt too, like an
	// execution cancel; without it a running attempt goes on.
	Stop bool `json:"stop,omitempty"`
}

// RebindRequest is the body of POST /v1/work/{id}/rebind.
type RebindRequest struct {
	// Binding is one of the Work's scope's bindings.
	Binding string `json:"binding"`
	// Grants, when present, replace the Work's grants (an empty list
	// takes none); absent, the Work keeps its own. Each must be one of
	// the new binding's.
	Grants *[]string `json:"grants,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// AttachRequest is the body of POST /v1/work/{id}/attach: an accepted
// Event to queue as the Work's input, a correlation key for it to own, or
// both.
type AttachRequest struct {
	Event          string `json:"event,omitempty"`
	CorrelationKey string `json:"correlation_key,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// Terminal reports whether the Work has finished.
func (w *Work) Terminal() bool {
	return w.State == WorkSucceeded || w.State == WorkFailed || w.State == WorkCancelled
}

// Held reports whether the Work is held (not started until a retry).
func (w *Work) Held() bool { return w.BlockedReason != "" }

// Input is the input bound to a manual Work. Type defaults to
// DefaultInputType, Data to {}.
type Input struct {
	Type string          `json:"type,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// DefaultInputType is the type of a manual Work's input when none is given.
const DefaultInputType = "manual.input"

// CreateWorkRequest is the body of POST /v1/work.
type CreateWorkRequest struct {
	Scope string `json:"scope"`
	// Binding may be left out when the scope has exactly one binding.
	Binding        string   `json:"binding,omitempty"`
	Input          *Input   `json:"input,omitempty"`
	CorrelationKey string   `json:"correlation_key,omitempty"`
	Grants         []string `json:"grants,omitempty"`
}

// CreatedWork is the body of POST /v1/work: 201, or 200 when Existing.
type CreatedWork struct {
	Work         Work  `json:"work"`
	CreatedEvent Event `json:"created_event"`
	InputEvent   Event `json:"input_event"`
	// Existing is true when the Work already existed under the identity
	// this request's Idempotency-Key derives.
	Existing bool `json:"existing"`
}

// ControlRequest is the body of the cancel and retry controls (POST
// /v1/work/{id}/cancel, /retry, /v1/executions/{id}/cancel).
type ControlRequest struct {
	// Reason is a short note recorded on the control event (at most 512
	// bytes).
	Reason string `json:"reason,omitempty"`
}

// Controlled is the body of a control's answer: the control event and the
// state it left.
type Controlled struct {
	Event Event `json:"event"`
	Work  Work  `json:"work"`
	// Execution is the attempt the control fenced, when there was one.
	Execution *Execution `json:"execution,omitempty"`
	// Existing is true when an earlier request with the same identity
	// already did it; the state is read, not changed.
	Existing bool `json:"existing"`
}

// WakeRequest is the body of POST /v1/work/{id}/wake. Type defaults to
// core.manual.wake.
type WakeRequest struct {
	Type string          `json:"type,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Woken is the body of a wake.
type Woken struct {
	Event    Event    `json:"event"`
	Decision Decision `json:"decision"`
	// Matched is true when the event satisfied a Wait.
	Matched bool `json:"matched"`
}
