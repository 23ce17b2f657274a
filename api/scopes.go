package api

import "encoding/json"

// Scope is a scope of the active configuration generation, as GET
// /v1/scopes and GET /v1/scopes/{id} show it. It never holds a secret
// reference or an executor's config.
type Scope struct {
	ID      string `json:"id"`
	Parent  string `json:"parent,omitempty"`
	Enabled bool   `json:"enabled"`
	Removed bool   `json:"removed"`
	// Active: enabled, not removed, and every ancestor active.
	Active        bool          `json:"active"`
	Authorization Authorization `json:"authorization"`
	Bindings      []Binding     `json:"bindings"`
	Routes        []Route       `json:"routes"`
	// Generation is the active configuration generation it comes from.
	Generation int64 `json:"generation"`
}

// Authorization is a scope's effective ceiling, operation names only.
type Authorization struct {
	Operations []string `json:"operations"`
	Reads      []string `json:"reads"`
}

// Binding is a binding's effective authority.
type Binding struct {
	ID         string              `json:"id"`
	Executor   string              `json:"executor"`
	Operations []string            `json:"operations"`
	Grants     map[string][]string `json:"grants"`
	// Secrets maps environment variables to secret names, never to a
	// reference.
	Secrets  map[string]string `json:"secrets"`
	Requires []string          `json:"requires"`
	Playbook string            `json:"playbook,omitempty"`
}

// Route is one ordered route of a scope.
type Route struct {
	ID          string `json:"id"`
	MatchType   string `json:"match_type"`
	MatchSource string `json:"match_source,omitempty"`
	Binding     string `json:"binding,omitempty"`
	// Effect is one of the Effect… constants.
	Effect string `json:"effect"`
}

// TraceRequest is the body of POST /v1/scopes/{id}/route/trace: a
// hypothetical Event.
type TraceRequest struct {
	Type string `json:"type"`
	// Source defaults to core.manual.
	Source         string `json:"source,omitempty"`
	CorrelationKey string `json:"correlation_key,omitempty"`
	// WorkID, without a correlation key, resolves the event to that Work.
	WorkID string          `json:"work_id,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	// Sample names one of the scope's samples: the Event is that
	// sample's, and Type, Source, CorrelationKey and Data, when given,
	// replace its own.
	Sample string `json:"sample,omitempty"`
}

// Trace is the body of a route trace: how the router would handle the
// event now.
type Trace struct {
	Scope      string   `json:"scope"`
	Generation int64    `json:"generation"`
	Decision   Decision `json:"decision"`
}

// Route effects, as Decision.Effect and Route.Effect name them.
const (
	EffectStart     = "start"
	EffectQueue     = "queue"
	EffectWake      = "wake"
	EffectDrop      = "drop"
	EffectUnmatched = "unmatched"
	// EffectInject: delivered to the key owner's running attempt as new
	// input, without stopping it.
	EffectInject = "inject"
	// EffectInterrupt: the key owner's running attempt is fenced and its
	// next one starts with the event as input.
	EffectInterrupt = "interrupt"
)

// Route verdicts, as RouteVerdict.Verdict names them.
const (
	VerdictMatch      = "match"
	VerdictSkip       = "skip"
	VerdictNotReached = "not_reached"
	// VerdictBypassed: the Work the event resolves to is waiting or has
	// finished, so the scope's routes are not consulted.
	VerdictBypassed = "bypassed"
)

// Decision is how the router handles (or, in a trace, would handle) an
// event.
type Decision struct {
	Routes []RouteVerdict `json:"routes"`
	// Work is the Work the event resolves to ("" for none), in WorkState.
	Work      string `json:"work,omitempty"`
	WorkState string `json:"work_state,omitempty"`
	Effect    string `json:"effect"`
	Detail    string `json:"detail"`
	// Route and Binding name the matching route and, for start, the
	// binding the new Work runs on.
	Route   string `json:"route,omitempty"`
	Binding string `json:"binding,omitempty"`
	// Wait is the Work's Wait the event satisfies (effect wake).
	Wait string `json:"wait,omitempty"`
	// OtherWakes are the waits of other Work the event satisfies.
	OtherWakes []Wake `json:"other_wakes"`
	// Started is the Work a start created (not in a trace).
	Started string `json:"started,omitempty"`
	// QueuedAhead counts the inputs the resolved Work already has that no
	// attempt has taken: another input wakes it first, and its next
	// attempt takes this event with them.
	QueuedAhead int64 `json:"queued_ahead,omitzero"`
	// Interrupted is the execution an interrupt fenced (not in a trace).
	Interrupted string `json:"interrupted,omitempty"`
}

// RouteVerdict is one route's verdict on an event, with the reason.
type RouteVerdict struct {
	Route   string `json:"route"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Wake is a Wait an event satisfies.
type Wake struct {
	Work   string `json:"work"`
	Wait   string `json:"wait"`
	Reason string `json:"reason"`
}

// RouteSample is a named sample Event a scope's routes (a route's
// samples in the configuration) or its ingresses offer (GET
// /v1/scopes/{id}/route/samples). A trace names it with
// TraceRequest.Sample.
type RouteSample struct {
	Name string `json:"name"`
	// Route is the route that offers it (omitted for an ingress's).
	Route string `json:"route,omitempty"`
	// Event is the sample as a TraceRequest: type, source,
	// correlation_key, data.
	Event json.RawMessage `json:"event"`
}
