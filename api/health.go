package api

// Health is the body of GET /v1/health.
type Health struct {
	// Status is "ok" while the daemon serves (from the moment its socket
	// answers, before it is ready).
	Status  string `json:"status"`
	Version string `json:"version"`
	// Generation is the active configuration generation.
	Generation int64 `json:"generation"`
	// State is HealthStarting until the daemon has adopted what an
	// earlier daemon left and finished its first round and sweep, then
	// HealthReady.
	State string `json:"state"`
}

// The values of Health.State.
const (
	HealthStarting = "starting"
	HealthReady    = "ready"
)
