package api

import "time"

// Egress connection record reasons (EgressConnection.Reason).
const (
	EgressNotAllowed = "not_allowed"
	EgressNotLive    = "not_live"
	EgressBusy       = "busy"
	EgressMalformed  = "malformed"
	EgressDialFailed = "dial_failed"
	EgressIdle       = "idle_timeout"
	EgressClosed     = "closed_by_host"
)

// EgressConnection is one connection an execution opened, or tried to
// open, through the daemon's egress proxy, as GET
// /v1/executions/{id}/egress shows it. It never holds what went through
// the connection.
type EgressConnection struct {
	ID        string `json:"id"`
	Execution string `json:"execution"`
	// Host and Port are what the execution asked for (empty for a
	// malformed request).
	Host string `json:"host"`
	Port int    `json:"port"`
	// Allowed: the binding's egress let it through. Reason says why it
	// was refused (not_allowed, not_live, busy, malformed), or why an
	// allowed one ended early (dial_failed, idle_timeout,
	// closed_by_host); absent otherwise.
	Allowed   bool      `json:"allowed"`
	Reason    string    `json:"reason,omitempty"`
	BytesUp   int64     `json:"bytes_up"`
	BytesDown int64     `json:"bytes_down"`
	StartedAt time.Time `json:"started_at"`
	// EndedAt is absent while the connection is open.
	EndedAt *time.Time `json:"ended_at,omitempty"`
}
