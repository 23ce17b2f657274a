package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
)

// Defaults of an endpoint that names no bound.
const (
	// DefaultQueue bounds the deliveries verified and read but not yet
	// accepted; a full queue answers 503 with Retry-After.
	DefaultQueue = 64
	// DefaultInFlight bounds the deliveries being read at once; more are
	// answered 503 with Retry-After.
	DefaultInFlight = 8
	// RetryAfterSeconds is the Retry-After of a 503 that asks the sender
	// to come back.
	RetryAfterSeconds = 30
)

// Endpoint is one run of a webhook ingress's endpoint: its handler, its
// queue, the worker that accepts what is queued, and its counts. It
// lives as long as the host runs the ingress with one config.
type Endpoint struct {
	spec  extension.WebhookEndpoint
	host  extension.IngressHost
	log   *slog.Logger
	queue chan *item
	slots chan struct{}
	// stopped is closed when the worker ends: a delivery still waiting
	// for it is answered busy.
	stopped chan struct{}

	mu     sync.Mutex
	key    []byte // the resolved signing secret, once resolved
	counts map[string]int64
}

type item struct {
	ev   extension.IngressEvent
	done chan result
}

type result struct {
	status int
	body   map[string]any
}

// NewEndpoint makes the endpoint of spec, reporting to host. Run its
// worker with Run.
func NewEndpoint(spec extension.WebhookEndpoint, host extension.IngressHost) *Endpoint {
	if spec.MaxBody <= 0 {
		spec.MaxBody = extension.DefaultWebhookMaxBody
	}
	if spec.Queue <= 0 {
		spec.Queue = DefaultQueue
	}
	if spec.InFlight <= 0 {
		spec.InFlight = DefaultInFlight
	}
	if spec.Status == 0 {
		spec.Status = http.StatusOK
	}
	log := host.Logger()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Endpoint{spec: spec, host: host, log: log.With("path", spec.Path),
		queue: make(chan *item, spec.Queue), slots: make(chan struct{}, spec.InFlight),
		stopped: make(chan struct{}), counts: map[string]int64{}}
}

// Path is where the endpoint is served.
func (e *Endpoint) Path() string { return e.spec.Path }

// count adds one to reason's count, reports it to the host's metrics and
// returns the new total.
func (e *Endpoint) count(reason string) int64 {
	e.mu.Lock()
	e.counts[reason]++
	n := e.counts[reason]
	e.mu.Unlock()
	e.host.Count(reason)
	return n
}

// Counts are the endpoint's counts by outcome and reason since it was made.
func (e *Endpoint) Counts() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int64, len(e.counts))
	for k, v := range e.counts {
		out[k] = v
	}
	return out
}

// Queued is how many deliveries wait in the queue now.
func (e *Endpoint) Queued() int { return len(e.queue) }

// refuse answers a delivery that is not accepted, logging only the reason
// and its count: never the body or a header's value.
func (e *Endpoint) refuse(w http.ResponseWriter, status int, reason string) {
	n := e.count(reason)
	e.log.Info("ingress refused a delivery", "reason", reason, "status", status, "count", n)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	answer(w, status, map[string]any{"status": "refused", "reason": reason})
}

// drop is the answer to a verified delivery that becomes no Event.
func (e *Endpoint) drop(reason, typ string) result {
	n := e.count(reason)
	e.log.Info("ingress dropped a delivery", "reason", reason, "type", typ, "count", n)
	return result{status: e.spec.Status, body: map[string]any{"status": "dropped", "reason": reason}}
}

func answer(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n'))
}

// notFound answers a path no endpoint serves.
func notFound(w http.ResponseWriter) {
	answer(w, http.StatusNotFound, map[string]any{"status": "refused", "reason": "not_found"})
}

// signingKey resolves the signing secret once; a failure is retried at
// the next delivery.
func (e *Endpoint) signingKey(ctx context.Context) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.key != nil {
		return e.key, nil
	}
	v, err := e.host.Secret(ctx, e.spec.Secret)
	if err != nil {
		return nil, err
	}
	e.key = []byte(v)
	return e.key, nil
}

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != e.spec.Path {
		notFound(w)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, map[string]any{"status": "refused", "reason": "method_not_allowed"})
		return
	}
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	default:
		e.refuse(w, http.StatusServiceUnavailable, extension.WebhookBusy)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, e.spec.MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			e.refuse(w, http.StatusRequestEntityTooLarge, extension.WebhookBodyTooLarge)
			return
		}
		e.refuse(w, http.StatusBadRequest, extension.WebhookBodyUnreadable)
		return
	}
	key, err := e.signingKey(r.Context())
	if err != nil {
		// The host's secret errors carry a code, never the value.
		e.log.Warn("ingress cannot resolve its signing secret", "error", err.Error())
		e.refuse(w, http.StatusServiceUnavailable, extension.WebhookSecretUnavailable)
		return
	}
	v := e.spec.Read(extension.WebhookDelivery{Header: r.Header, Body: body, Key: key})
	switch {
	case v.Refuse != "":
		status := v.RefuseStatus
		if status == 0 {
			status = http.StatusBadRequest
		}
		e.refuse(w, status, v.Refuse)
		return
	case v.Drop != "":
		res := e.drop(v.Drop, v.Type)
		answer(w, res.status, res.body)
		return
	case v.Reply != nil:
		n := e.count(v.Outcome)
		e.log.Info("ingress answered a delivery", "outcome", v.Outcome, "count", n)
		answer(w, e.spec.Status, v.Reply)
		return
	case v.Event == nil:
		// A Read that says nothing is the ingress's bug: nothing is
		// accepted.
		e.refuse(w, http.StatusInternalServerError, extension.WebhookEventRefused)
		return
	}
	it := &item{ev: *v.Event, done: make(chan result, 1)}
	select {
	case e.queue <- it:
	default:
		e.refuse(w, http.StatusServiceUnavailable, extension.WebhookQueueFull)
		return
	}
	select {
	case res := <-it.done:
		answer(w, res.status, res.body)
	case <-e.stopped:
		// The worker ended before it reached the delivery: nothing was
		// accepted, and the sender may come back.
		e.refuse(w, http.StatusServiceUnavailable, extension.WebhookBusy)
	case <-r.Context().Done():
	}
}

// Run accepts the queued deliveries, one at a time, until ctx ends.
func (e *Endpoint) Run(ctx context.Context) {
	defer close(e.stopped)
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-e.queue:
			it.done <- e.accept(ctx, it.ev)
		}
	}
}

func (e *Endpoint) accept(ctx context.Context, ev extension.IngressEvent) result {
	got, err := e.host.Accept(ctx, ev)
	switch {
	case errors.Is(err, extension.ErrForbidden):
		return e.drop(extension.WebhookScopeUnavailable, ev.Type)
	case errors.Is(err, extension.ErrInvalid):
		return e.drop(extension.WebhookEventRefused, ev.Type)
	case err != nil:
		n := e.count(extension.WebhookAcceptFailed)
		// Only the error's type: its text may hold what it read.
		e.log.Error("ingress could not accept a delivery; the sender may deliver it again", "reason", extension.WebhookAcceptFailed, "error_type", fmt.Sprintf("%T", err), "count", n)
		return result{status: http.StatusServiceUnavailable, body: map[string]any{"status": "refused", "reason": extension.WebhookAcceptFailed}}
	}
	outcome := extension.WebhookAccepted
	if got.Replayed {
		outcome = extension.WebhookRedelivered
	}
	n := e.count(outcome)
	e.log.Info("ingress accepted a delivery", "outcome", outcome, "type", ev.Type, "scope", ev.Scope, "event", got.Event, "effect", got.Effect, "count", n)
	return result{status: e.spec.Status, body: map[string]any{"status": outcome, "event": got.Event, "replayed": got.Replayed}}
}
