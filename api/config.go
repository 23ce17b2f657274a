package api

import (
	"encoding/json"
	"time"
)

// Config is the body of GET /v1/config: the active generation.
type Config struct {
	Generation int64  `json:"generation"`
	Hash       string `json:"hash"`
	// Config is the normalized configuration with every secret reference
	// replaced by <scheme>:<redacted>.
	Config json.RawMessage `json:"config"`
	// Actor is who published it (operator:<name>, or host:<reason>).
	Actor     string    `json:"actor"`
	CreatedAt time.Time `json:"created_at"`
}

// ValidateRequest is the body of POST /v1/config/validate.
type ValidateRequest struct {
	// Config is the configuration document, a JSON object.
	Config json.RawMessage `json:"config"`
}

// Validation is the body of POST /v1/config/validate: the same shape as
// open-conduit config check --json.
type Validation struct {
	Valid bool `json:"valid"`
	// Hash is the document's canonical hash, when it is valid.
	Hash        string       `json:"hash,omitempty"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	Warnings    []Warning    `json:"warnings"`
}

// ApplyRequest is the body of POST /v1/config/apply.
type ApplyRequest struct {
	Config json.RawMessage `json:"config"`
	// ExpectedGeneration must be the active generation (GET /v1/config).
	ExpectedGeneration int64 `json:"expected_generation"`
	// Hash, when sent, must be the document's hash (as validate returned
	// it).
	Hash string `json:"hash,omitempty"`
}

// SetRequest is the body of POST /v1/config/set: one member of the active
// configuration changed and applied as apply does.
type SetRequest struct {
	// Pointer is an RFC 6901 pointer into the configuration document, as
	// diagnostics and warnings name members.
	Pointer string `json:"pointer"`
	// Value is the member's new value.
	Value json.RawMessage `json:"value"`
	// ExpectedGeneration must be the active generation (GET /v1/config).
	ExpectedGeneration int64 `json:"expected_generation"`
}

// Applied is the body of a successful apply (and of a set).
type Applied struct {
	Generation         int64     `json:"generation"`
	Hash               string    `json:"hash"`
	PreviousGeneration int64     `json:"previous_generation"`
	Warnings           []Warning `json:"warnings"`
	// Unchanged is true when the document was the active generation's
	// already: no generation was made, and Generation is the active one.
	Unchanged bool `json:"unchanged,omitzero"`
}

// Diagnostic is one problem of a configuration: a JSON pointer, a stable
// code (docs/config.md) and a remedy, never a configured value.
type Diagnostic struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Remedy  string `json:"remedy"`
}

func (d Diagnostic) String() string {
	p := d.Pointer
	if p == "" {
		p = "(document)"
	}
	return p + ": " + d.Code + ": " + d.Remedy
}

// Warning is something a valid configuration probably did not mean.
type Warning struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (w Warning) String() string {
	p := w.Pointer
	if p == "" {
		p = "(document)"
	}
	return p + ": " + w.Code + ": " + w.Message
}
