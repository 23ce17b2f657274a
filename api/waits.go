package api

import "time"

// Wait states.
const (
	WaitActive    = "active"
	WaitSatisfied = "satisfied"
	WaitTimedOut  = "timed_out"
	WaitCancelled = "cancelled"
)

// Wait is a registered predicate that wakes a Work (GET /v1/waits, GET
// /v1/waits/{id}): an event in the scope accepted after Watermark, of one
// of Types (any when empty), on one of Keys (or, with OnWorkKeys, one of
// the Work's keys).
type Wait struct {
	ID    string `json:"id"`
	Work  string `json:"work"`
	Scope string `json:"scope"`
	// Execution and Epoch name the segment that declared it.
	Execution string `json:"execution,omitempty"`
	Epoch     int64  `json:"epoch"`
	// Registration is the gate's registration that parked the call, ""
	// for the execution's own wait.
	Registration string   `json:"registration,omitempty"`
	Types        []string `json:"types"`
	Keys         []string `json:"keys"`
	OnWorkKeys   bool     `json:"on_work_keys"`
	Watermark    int64    `json:"watermark"`
	// Timer is the timeout timer ("" for none), due at TimeoutAt.
	Timer     string    `json:"timer,omitempty"`
	TimeoutAt time.Time `json:"timeout_at,omitzero"`
	// State is one of the Wait… states.
	State       string    `json:"state"`
	SatisfiedBy string    `json:"satisfied_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}
