package github

import (
	"encoding/json"
	"mime"
	"net/http"
	"regexp"

	"github.com/open-conduit/open-conduit/extension"
)

// WebhookPath is where the ingress's deliveries are served (POST), on the
// daemon's webhook listener.
const WebhookPath = "/github/webhook"

// DefaultMaxBody bounds a delivery's body: 25 MiB. GitHub caps a
// delivery's payload at 25 MB, so the bound refuses no delivery GitHub
// sends.
const DefaultMaxBody = 25 << 20

// Reasons of a refusal or a drop beyond the signature's and the mapping's
// (each logged and counted by the host), and the host's own that the
// documentation names.
const (
	reasonDeliveryMissing = "delivery_missing"
	reasonEventMissing    = "event_missing"
	reasonContentType     = "content_type"
	reasonBodyTooLarge    = extension.WebhookBodyTooLarge
	reasonQueueFull       = extension.WebhookQueueFull
	reasonAcceptFailed    = extension.WebhookAcceptFailed
)

var (
	deliveryRule = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)
	eventRule    = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)
)

// Options bound the ingress (zero: the defaults: DefaultMaxBody and the
// host's queue and in-flight bounds).
type Options struct {
	MaxBody  int64
	Queue    int
	InFlight int
}

// endpoint is the ingress's endpoint under c, whose ingress is on.
func endpoint(c Config, o Options) extension.WebhookEndpoint {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	cl := claimsOf(c)
	return extension.WebhookEndpoint{
		Path: WebhookPath, Secret: c.Ingress.Secret, MaxBody: o.MaxBody, Queue: o.Queue, InFlight: o.InFlight,
		// GitHub takes any 2xx; 202 says the delivery was taken, not acted on.
		Status: http.StatusAccepted,
		Listen: c.Ingress.Listen,
		Read:   func(d extension.WebhookDelivery) extension.WebhookVerdict { return read(cl, d) },
	}
}

func refuse(status int, reason string) extension.WebhookVerdict {
	return extension.WebhookVerdict{Refuse: reason, RefuseStatus: status}
}

// read verifies one delivery's signature before anything else is read,
// then maps it to an Event in the scope that claims its repository.
func read(cl claims, d extension.WebhookDelivery) extension.WebhookVerdict {
	if reason := verify(d.Key, d.Body, d.Header.Get(SignatureHeader)); reason != "" {
		return refuse(http.StatusUnauthorized, reason)
	}
	// Verified: from here on the delivery is GitHub's.
	if mt, _, err := mime.ParseMediaType(d.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return refuse(http.StatusUnsupportedMediaType, reasonContentType)
	}
	delivery := d.Header.Get("X-GitHub-Delivery")
	if !deliveryRule.MatchString(delivery) {
		return refuse(http.StatusBadRequest, reasonDeliveryMissing)
	}
	event := d.Header.Get("X-GitHub-Event")
	if !eventRule.MatchString(event) {
		return refuse(http.StatusBadRequest, reasonEventMissing)
	}
	m, reason := mapDelivery(event, d.Body)
	if reason == reasonPayloadInvalid {
		return refuse(http.StatusBadRequest, reason)
	}
	if reason != "" {
		return extension.WebhookVerdict{Drop: reason}
	}
	scope, ok := cl.scope(m.Repository, m.Installation)
	if !ok {
		return extension.WebhookVerdict{Drop: reasonUnclaimed, Type: m.Type}
	}
	data, err := json.Marshal(m.Data)
	if err != nil {
		return refuse(http.StatusBadRequest, reasonPayloadInvalid)
	}
	return extension.WebhookVerdict{Event: &extension.IngressEvent{Scope: scope, Type: m.Type, CorrelationKey: m.Key, DeliveryID: delivery, Data: data}}
}
