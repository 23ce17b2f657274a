package api

import "time"

// Execution states.
const (
	ExecutionRunning  = "running"
	ExecutionParked   = "parked"
	ExecutionStopping = "stopping"
	ExecutionFinished = "finished"
)

// Execution results.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
	ResultCancelled = "cancelled"
	ResultLost      = "lost"
)

// LogOwnerHeader is the header (or, when it was learnt only after the
// log began, the trailer) of a log response (GET /v1/executions/{id}/log,
// GET /v1/work/{id}/log) whose attempt's segment is running on another
// daemon of the same store: its value is that daemon's owner id (the
// Execution's Owner). Only that daemon has the live log, so the response
// held what the store holds and ended without following.
const LogOwnerHeader = "Open-Conduit-Log-Owner"

// Execution is one attempt of a Work by one executor (GET
// /v1/executions, GET /v1/executions/{id}).
type Execution struct {
	ID       string `json:"id"`
	Work     string `json:"work"`
	Scope    string `json:"scope"`
	Binding  string `json:"binding"`
	Executor string `json:"executor"`
	// Generation is the configuration generation the attempt is pinned
	// to; Epoch grows with every claim, recovery and resume.
	Generation     int64     `json:"generation"`
	Epoch          int64     `json:"epoch"`
	Owner          string    `json:"owner"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Deadline       time.Time `json:"deadline"`
	// State is one of the Execution… states.
	State          string `json:"state"`
	InputWatermark int64  `json:"input_watermark"`
	// Result is one of the Result… values once finished.
	Result  string `json:"result,omitempty"`
	Message string `json:"message,omitempty"`
	// ExitCode is the exit code observed when the segment ended (-1 for
	// a process killed by a signal); nil (absent) when none was observed.
	ExitCode *int `json:"exit_code,omitempty"`
	// Session is the agent session the execution's segments continue
	// (an agent executor's session or thread id); absent for none.
	Session string `json:"session,omitempty"`
	// Usage is what the execution's segments consumed, summed; absent
	// when no segment reported any.
	Usage     *Usage    `json:"usage,omitempty"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Usage is what an agent execution consumed, as the agent's own output
// reported it, summed over its segments.
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	// CostUSD is the agent's own estimate in US dollars (0 when it gives
	// none).
	CostUSD float64 `json:"cost_usd"`
	// Turns is how many model turns the segments took.
	Turns int64 `json:"turns"`
}
