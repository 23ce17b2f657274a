package api

import (
	"encoding/json"
	"time"
)

// Event is an accepted, immutable fact (GET /v1/events, GET
// /v1/events/{id}).
type Event struct {
	// Seq is the acceptance sequence: gap-free, in commit order.
	Seq    int64  `json:"seq"`
	ID     string `json:"id"`
	Type   string `json:"type"`
	Source string `json:"source"`
	Scope  string `json:"scope"`
	// Work is the Work the event is about or came from; Execution the
	// execution that emitted it.
	Work           string          `json:"work,omitempty"`
	Execution      string          `json:"execution,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
	Data           json.RawMessage `json:"data"`
	// Parent is the event that caused this one; Root the first event of
	// its causal chain (itself for a root); Depth 0 for a root.
	Parent string `json:"parent,omitempty"`
	Root   string `json:"root"`
	Depth  int    `json:"depth"`
	// Actor is who did it (operator:<name>), for the host's operator
	// sources only.
	Actor      string    `json:"actor,omitempty"`
	DeliveryID string    `json:"delivery_id,omitempty"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// EmitRequest is the body of POST /v1/events: a core.manual root, or
// derived from Parent (whose scope it takes when Scope is left out).
type EmitRequest struct {
	Scope          string          `json:"scope,omitempty"`
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
	Parent         string          `json:"parent,omitempty"`
}

// Emitted is the body of POST /v1/events: 201, or 200 when Existing.
type Emitted struct {
	Event    Event    `json:"event"`
	Decision Decision `json:"decision"`
	// Existing is true when an earlier request with the same identity
	// accepted it.
	Existing bool `json:"existing"`
}
