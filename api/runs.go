package api

// Run is one attempt in the unified run history (GET /v1/runs, GET
// /v1/runs/{id}): an execution with what an operator reads it by, its
// Work's state and outcome and the Event that started the Work. The
// execution is whole, so whatever it reports (its usage too) is in the
// row.
type Run struct {
	Execution Execution `json:"execution"`
	// WorkState is the Work's state now (one of the Work… states);
	// Outcome is its outcome message once it finished ("" before).
	WorkState string `json:"work_state"`
	Outcome   string `json:"outcome,omitempty"`
	// WorkHold is the Work's hold now, telling the operator's from the
	// system's (nil when it is not held).
	WorkHold *Hold `json:"work_hold,omitempty"`
	// TriggerEvent is the Event that started the Work: the routed Event
	// a route started it on, or its own core.work.created when nothing
	// caused that (manual Work); TriggerType is that Event's type.
	TriggerEvent string `json:"trigger_event"`
	TriggerType  string `json:"trigger_type"`
	// DurationMS is how long the attempt ran: from its creation to its
	// last update once finished, to now while it is live.
	DurationMS int64 `json:"duration_ms"`
}

// Run states a run list's state filter accepts besides the Execution…
// states: the Result… values select finished attempts by result.
const RunStates = "running, parked, stopping, finished, succeeded, failed, cancelled or lost"
