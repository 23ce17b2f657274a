package extension

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
)

// Ingress is a registration's source of Events from outside the daemon (a
// webhook, whose deliveries the host's listener receives (see Webhook), a
// poller). Its Events carry its Source, which the host
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

// Webhook is an Ingress whose deliveries arrive over HTTP: each such
// ingress at its own path of the daemon's one webhook listener. The host
// owns that listener and everything a delivery goes through around the
// ingress's own reading of it: POST only, the deliveries read at once and
// a body's size bounded, the signing secret resolved through the host
// (once per run, again after a failure), a bounded queue in front of
// Accept, the answer, and a count and a log line for every outcome. The
// ingress only verifies a delivery and says what it is (Read).
type Webhook interface {
	Ingress
	// Endpoint is the ingress's endpoint under config (what CheckConfig
	// accepted), false when config leaves the webhook off. The host
	// serves it while it runs the ingress with that config.
	Endpoint(config json.RawMessage) (WebhookEndpoint, bool)
}

// DefaultWebhookMaxBody bounds a webhook delivery's body when its endpoint
// names no bound: 1 MiB.
const DefaultWebhookMaxBody = 1 << 20

// WebhookEndpoint is one webhook ingress's endpoint.
type WebhookEndpoint struct {
	// Path is where its deliveries are served (POST only), under the
	// registration's name: /<registration>/<name>.
	Path string
	// Secret names the signing secret among the configuration's
	// top-level secrets; Read gets its value.
	Secret string
	// MaxBody bounds a body (0: DefaultWebhookMaxBody); a longer one is
	// refused (413, WebhookBodyTooLarge).
	MaxBody int64
	// Queue bounds the deliveries read but not yet accepted, InFlight
	// those being read at once (0: the host's defaults); more are
	// refused with 503 and Retry-After.
	Queue, InFlight int
	// Status is the status of every answer to a delivery Read verified:
	// accepted, redelivered, dropped or a Reply (0: 200).
	Status int
	// Listen is the listener address the ingress's own config names, a
	// member kept for one release after the ingresses came to share the
	// daemon's listener ("" for none). The host listens there only while
	// the daemon's configuration names no listener address of its own.
	Listen string
	// Read verifies and reads one delivery. It must keep nothing of it.
	Read func(WebhookDelivery) WebhookVerdict
}

// WebhookDelivery is one delivery as the host read it.
type WebhookDelivery struct {
	Header http.Header
	// Body is read whole, within MaxBody.
	Body []byte
	// Key is the resolved signing secret.
	Key []byte
}

// WebhookVerdict is what Read made of a delivery: exactly one of Refuse,
// Drop, Reply and Event. Every reason and outcome is a short stable word
// the ingress documents, never a value from the delivery.
type WebhookVerdict struct {
	// Refuse is why the delivery is refused: not verified (always first)
	// or malformed. It is answered with RefuseStatus (0: 400).
	Refuse       string
	RefuseStatus int
	// Drop is why a verified delivery becomes no Event (answered with
	// the endpoint's Status); Type is its event type for the log, "" for
	// none.
	Drop string
	Type string
	// Reply is answered as it stands with the endpoint's Status, and
	// counted and logged as Outcome (a provider's URL check).
	Reply   map[string]any
	Outcome string
	// Event is offered to Accept through the host's queue.
	Event *IngressEvent
}

// The reasons and outcomes the host counts, logs and answers for every
// webhook ingress, beside those of its Read.
const (
	WebhookAccepted          = "accepted"
	WebhookRedelivered       = "redelivered"
	WebhookBusy              = "busy"
	WebhookQueueFull         = "queue_full"
	WebhookBodyTooLarge      = "body_too_large"
	WebhookBodyUnreadable    = "body_unreadable"
	WebhookSecretUnavailable = "secret_unavailable"
	WebhookAcceptFailed      = "accept_failed"
	// WebhookScopeUnavailable: Accept refused the scope (ErrForbidden).
	WebhookScopeUnavailable = "scope_unavailable"
	// WebhookEventRefused: Accept refused the Event (ErrInvalid).
	WebhookEventRefused = "event_refused"
)
