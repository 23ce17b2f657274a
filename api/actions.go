package api

import "encoding/json"

// Action describes a registered operator action (GET /v1/actions).
type Action struct {
	Name         string `json:"name"`
	Registration string `json:"registration"`
	Summary      string `json:"summary"`
	// InputSchema is a JSON Schema of the action's input ({"type":"object"}
	// when it declares none).
	InputSchema json.RawMessage `json:"input_schema"`
}

// ActRequest is the body of POST /v1/actions/{name}: Scope is required,
// Work (a Work of Scope) and Input (a JSON object) optional.
type ActRequest struct {
	Scope string          `json:"scope"`
	Work  string          `json:"work,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Acted is the body of an action's answer: the core.action Event that
// records it and the action's result, a JSON object.
type Acted struct {
	Event  Event           `json:"event"`
	Result json.RawMessage `json:"result"`
	// Existing is true when an earlier request with the same identity
	// accepted the Event; the action ran again with the same request id.
	Existing bool `json:"existing"`
}
