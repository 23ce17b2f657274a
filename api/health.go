package api

// Health is the body of GET /v1/health.
type Health struct {
	// Status is "ok" while the daemon serves.
	Status  string `json:"status"`
	Version string `json:"version"`
	// Generation is the active configuration generation.
	Generation int64 `json:"generation"`
}
