package slack

import (
	"encoding/json"
	"mime"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

// EventsPath is where the ingress's requests are served (POST), on the
// daemon's webhook listener.
const EventsPath = "/slack/events"

// DefaultMaxBody bounds a request's body: 1 MiB. Slack's Events API
// requests are small; the bound is far above any Slack sends.
const DefaultMaxBody = 1 << 20

// RetryHeader is the header Slack numbers a retry in. A retry is accepted
// once, by its event id, like the first request.
const RetryHeader = "X-Slack-Retry-Num"

// Reasons of a refusal beyond the signature's and the mapping's (each
// logged and counted by the host), and the outcomes of an accepted
// request.
const (
	reasonContentType  = "content_type"
	outcomeAccepted    = extension.WebhookAccepted
	outcomeRedelivered = extension.WebhookRedelivered
	outcomeChallenge   = "url_verification"
)

// Options bound the ingress (zero: the defaults: DefaultMaxBody and the
// host's queue and in-flight bounds).
type Options struct {
	MaxBody  int64
	Queue    int
	InFlight int
}

// endpoint is the ingress's endpoint under c, whose ingress is on, with
// request timestamps checked on now.
func endpoint(c Config, now func() time.Time, o Options) extension.WebhookEndpoint {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	return extension.WebhookEndpoint{
		Path: EventsPath, Secret: c.Ingress.SigningSecret, MaxBody: o.MaxBody, Queue: o.Queue, InFlight: o.InFlight,
		// Slack wants a quick 200 for every request it need not retry.
		Status: http.StatusOK,
		Listen: c.Ingress.Listen,
		Read:   func(d extension.WebhookDelivery) extension.WebhookVerdict { return read(c, now(), d) },
	}
}

func refuse(status int, reason string) extension.WebhookVerdict {
	return extension.WebhookVerdict{Refuse: reason, RefuseStatus: status}
}

// read verifies one request's signature and timestamp at now before
// anything else is read, then answers Slack's URL check or maps it to an
// Event in the scope that claims its channel.
func read(c Config, now time.Time, d extension.WebhookDelivery) extension.WebhookVerdict {
	if reason := verify(d.Key, d.Body, d.Header.Get(TimestampHeader), d.Header.Get(SignatureHeader), now); reason != "" {
		return refuse(http.StatusUnauthorized, reason)
	}
	// Verified: from here on the request is Slack's.
	if mt, _, err := mime.ParseMediaType(d.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, reasonContentType)
	}
	m, reason := mapRequest(d.Body)
	if reason == reasonPayloadInvalid {
		return refuse(http.StatusBadRequest, reason)
	}
	if reason != "" {
		return extension.WebhookVerdict{Drop: reason}
	}
	if m.Challenge != "" {
		return extension.WebhookVerdict{Reply: map[string]any{"challenge": m.Challenge}, Outcome: outcomeChallenge}
	}
	scope, ok := c.scopeOf(m.Channel)
	if !ok {
		return extension.WebhookVerdict{Drop: reasonUnclaimed, Type: m.Type}
	}
	data, err := json.Marshal(m.Data)
	if err != nil {
		return refuse(http.StatusBadRequest, reasonPayloadInvalid)
	}
	return extension.WebhookVerdict{Event: &extension.IngressEvent{Scope: scope, Type: m.Type, CorrelationKey: m.Key, DeliveryID: m.EventID, Data: data}}
}
