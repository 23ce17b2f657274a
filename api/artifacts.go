package api

import "time"

// Artifact is the metadata of bytes an execution produced (GET
// /v1/artifacts, GET /v1/artifacts/{id}); GET /v1/artifacts/{id}/content
// streams the bytes.
type Artifact struct {
	ID        string `json:"id"`
	Execution string `json:"execution"`
	Work      string `json:"work"`
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	// SHA256 is the hex checksum of the artifact's content (its bytes,
	// never a credential).
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
}
