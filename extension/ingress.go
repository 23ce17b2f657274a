package extension

import (
	"context"
	"encoding/json"
	"log/slog"
)

// Ingress is a registration's source of Events from outside the daemon (a
// webhook listener, a poller). Its Events carry its Source, which the host
// assigns: an ingress never names a source per Event, nor an actor, a Work
// or a cause. The daemon runs it while the active
// configuration enables the registration, and runs it again, with the new
// configuration, when an apply changes its config.
type Ingress interface {
	// Source is the source of its Events, in its registration's
	// namespace (<registration>.<suffix>, such as github.webhook), so a
	// route can match it.
	Source() string
	// Serve runs the ingress with its registration's config of the active
	// generation (what CheckConfig accepted; {} when the entry has none)
	// until ctx ends. An ingress its config leaves off returns nil at
	// once (or, holding something else of its registration that lives
	// with the run, such as credentials resolved through host, when ctx
	// ends). Any other return before ctx ends is logged by the host (its
	// Go type only) and the ingress is not run again until the next
	// apply that changes its config.
	Serve(ctx context.Context, config json.RawMessage, host IngressHost) error
	// AdmitsTrace reports whether a route trace in scope may name the
	// ingress's source under config: whether its config routes any
	// Event to scope. A trace naming the source in a scope it does not
	// admit is refused.
	AdmitsTrace(config json.RawMessage, scope string) bool
}

// IngressSampler is an Ingress that also offers named sample Events, so
// that an operator can trace what it would send (open-conduit route
// --trace NAME). It is optional: the host asks an ingress that implements
// it, for the scopes the active generation enables its registration in.
type IngressSampler interface {
	// Samples returns the sample Events the ingress offers for scope
	// under config (what CheckConfig accepted). Each comes from the
	// ingress's Source; a name is a lower-case id, unique among them.
	Samples(config json.RawMessage, scope string) []IngressSample
}

// IngressSample is one named sample Event of an ingress.
type IngressSample struct {
	Name           string
	Type           string
	CorrelationKey string
	// Data is a JSON object (nil for none).
	Data json.RawMessage
}

// IngressHost is what the host gives a running ingress.
type IngressHost interface {
	// Accept accepts one Event from the ingress and routes it at once, in
	// one transaction. The same DeliveryID is accepted once: a repeat
	// returns the first Event with Replayed set and routes nothing. A
	// scope the active generation does not enable the registration for,
	// or that is not active, is refused with ErrForbidden; an Event
	// acceptance refuses (a type that is not namespaced, data that is
	// not a JSON object of at most 256 KiB) with ErrInvalid. Any other
	// error is the host's own (storage), and the Event may be offered
	// again.
	Accept(ctx context.Context, ev IngressEvent) (IngressAccepted, error)
	// Secret resolves a secret by its name in the active configuration's
	// top-level secrets. Its failure never carries the value or the
	// reference; ErrNotFound when no secret has that name.
	Secret(ctx context.Context, name string) (string, error)
	// Logger is the ingress's logger. Nothing logged through it may
	// carry a secret.
	Logger() *slog.Logger
	// Count records one delivery's outcome in the daemon's metrics
	// (open_conduit_ingress_deliveries_total by source and outcome).
	// outcome is a short stable word the ingress documents (accepted,
	// replayed, a refusal or drop reason), never a value from a delivery.
	Count(outcome string)
}

// IngressEvent is an Event an ingress offers.
type IngressEvent struct {
	Scope          string
	Type           string
	CorrelationKey string
	// DeliveryID is the Event's delivery identity within the source.
	DeliveryID string
	// Data is a JSON object.
	Data json.RawMessage
}

// IngressAccepted is what became of an accepted Event.
type IngressAccepted struct {
	Event string
	// Replayed: the delivery was accepted before; nothing was routed.
	Replayed bool
	// Effect is the router's effect (start, queue, wake, drop, unmatched).
	Effect string
}

// ConfigReport is what an accepted configuration of a registration refers
// to outside itself, and what it should warn about (see
// Registration.InspectConfig). Every pointer is relative to the config.
type ConfigReport struct {
	// Secrets are names of the configuration's top-level secrets; a name
	// no secret has is reported unknown_reference at its pointer.
	Secrets []ConfigReference
	// Scopes are scope ids; an id no scope of the configuration has is
	// reported unknown_reference at its pointer.
	Scopes []ConfigReference
	// Warnings never fail a configuration. Each Code is a warning code of
	// the registration's own; Remedy never quotes a configured value.
	Warnings []ConfigProblem
}

// ConfigReference is one name a config refers to, at its pointer.
type ConfigReference struct {
	Pointer string
	Name    string
}
