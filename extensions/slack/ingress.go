package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

// EventsPath is where the ingress serves Slack's Events API (POST).
const EventsPath = "/slack/events"

// Limits of the ingress. Slack's Events API requests are small; the body
// limit is far above any Slack sends.
const (
	// DefaultMaxBody bounds a request's body: 1 MiB.
	DefaultMaxBody = 1 << 20
	// DefaultQueue bounds the requests verified and mapped but not yet
	// accepted; a full queue answers 503 (Slack retries).
	DefaultQueue = 64
	// DefaultInFlight bounds the requests being read at once.
	DefaultInFlight = 8
	// RetryAfterSeconds is the Retry-After of a 503.
	RetryAfterSeconds = 30

	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 64 << 10
	shutdownGrace     = 5 * time.Second
)

// RetryHeader is the header Slack numbers a retry in.
const RetryHeader = "X-Slack-Retry-Num"

// Reasons of a refusal beyond the signature's and the mapping's (each
// logged and counted), and the outcomes of an accepted request.
const (
	reasonBodyTooLarge   = "body_too_large"
	reasonBodyUnreadable = "body_unreadable"
	reasonContentType    = "content_type"
	reasonBusy           = "busy"
	reasonQueueFull      = "queue_full"
	reasonSecretUnavail  = "secret_unavailable"
	reasonAcceptFailed   = "accept_failed"
	outcomeAccepted      = "accepted"
	outcomeRedelivered   = "redelivered"
	outcomeChallenge     = "url_verification"
)

// Options bound the ingress (zero: the defaults).
type Options struct {
	MaxBody  int64
	Queue    int
	InFlight int
}

// server is one run of the ingress: its handler, queue and counts.
type server struct {
	cfg     Config
	host    extension.IngressHost
	log     *slog.Logger
	now     func() time.Time
	secret  string // the signing secret's name
	maxBody int64
	queue   chan *item
	slots   chan struct{}

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

func newServer(c Config, host extension.IngressHost, now func() time.Time, o Options) *server {
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.InFlight <= 0 {
		o.InFlight = DefaultInFlight
	}
	s := &server{cfg: c, host: host, log: host.Logger(), now: now, maxBody: o.MaxBody,
		queue: make(chan *item, o.Queue), slots: make(chan struct{}, o.InFlight), counts: map[string]int64{}}
	if c.Ingress != nil {
		s.secret = c.Ingress.SigningSecret
	}
	return s
}

// count adds one to reason's count and returns the new total.
func (s *server) count(reason string) int64 {
	s.mu.Lock()
	s.counts[reason]++
	n := s.counts[reason]
	s.mu.Unlock()
	s.host.Count(reason)
	return n
}

// Counts are the ingress's counts by outcome and reason since it started.
func (s *server) Counts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// refuse answers a request that is not accepted, logging only the reason
// and its count: never the body or a header's value.
func (s *server) refuse(w http.ResponseWriter, status int, reason string) {
	n := s.count(reason)
	s.log.Info("slack ingress refused a request", "reason", reason, "status", status, "count", n)
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	answer(w, status, map[string]any{"status": "refused", "reason": reason})
}

// drop is the answer to a verified request that is not accepted: 200, as
// Slack wants a quick 2xx for every request it need not retry.
func (s *server) drop(reason, typ string) result {
	n := s.count(reason)
	s.log.Info("slack ingress dropped a request", "reason", reason, "type", typ, "count", n)
	return result{status: http.StatusOK, body: map[string]any{"status": "dropped", "reason": reason}}
}

func answer(w http.ResponseWriter, status int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(body)
	w.Write(append(b, '\n'))
}

// signingKey resolves the signing secret once; a failure is retried at
// the next request.
func (s *server) signingKey(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	v, err := s.host.Secret(ctx, s.secret)
	if err != nil {
		return nil, err
	}
	s.key = []byte(v)
	return s.key, nil
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != EventsPath {
		answer(w, http.StatusNotFound, map[string]any{"status": "refused", "reason": "not_found"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, map[string]any{"status": "refused", "reason": "method_not_allowed"})
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.refuse(w, http.StatusServiceUnavailable, reasonBusy)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.refuse(w, http.StatusRequestEntityTooLarge, reasonBodyTooLarge)
			return
		}
		s.refuse(w, http.StatusBadRequest, reasonBodyUnreadable)
		return
	}
	key, err := s.signingKey(r.Context())
	if err != nil {
		s.log.Warn("slack ingress cannot resolve its signing secret", "error", err.Error())
		s.refuse(w, http.StatusServiceUnavailable, reasonSecretUnavail)
		return
	}
	if reason := verify(key, body, r.Header.Get(TimestampHeader), r.Header.Get(SignatureHeader), s.now()); reason != "" {
		s.refuse(w, http.StatusUnauthorized, reason)
		return
	}
	// Verified: from here on the request is Slack's.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.refuse(w, http.StatusUnsupportedMediaType, reasonContentType)
		return
	}
	m, reason := mapRequest(body)
	if reason == reasonPayloadInvalid {
		s.refuse(w, http.StatusBadRequest, reason)
		return
	}
	if reason != "" {
		res := s.drop(reason, "")
		answer(w, res.status, res.body)
		return
	}
	if m.Challenge != "" {
		n := s.count(outcomeChallenge)
		s.log.Info("slack ingress answered the url_verification challenge", "count", n)
		answer(w, http.StatusOK, map[string]any{"challenge": m.Challenge})
		return
	}
	scope, ok := s.cfg.scopeOf(m.Channel)
	if !ok {
		res := s.drop(reasonUnclaimed, m.Type)
		answer(w, res.status, res.body)
		return
	}
	data, err := json.Marshal(m.Data)
	if err != nil {
		s.refuse(w, http.StatusBadRequest, reasonPayloadInvalid)
		return
	}
	if n, err := strconv.Atoi(r.Header.Get(RetryHeader)); err == nil && n > 0 && n < 100 {
		s.log.Info("slack ingress got a retry", "retry", n, "type", m.Type)
	}
	it := &item{ev: extension.IngressEvent{Scope: scope, Type: m.Type, CorrelationKey: m.Key, DeliveryID: m.EventID, Data: data}, done: make(chan result, 1)}
	select {
	case s.queue <- it:
	default:
		s.refuse(w, http.StatusServiceUnavailable, reasonQueueFull)
		return
	}
	select {
	case res := <-it.done:
		answer(w, res.status, res.body)
	case <-r.Context().Done():
	}
}

// work accepts the queued requests, one at a time, until ctx ends.
func (s *server) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-s.queue:
			it.done <- s.accept(ctx, it.ev)
		}
	}
}

func (s *server) accept(ctx context.Context, ev extension.IngressEvent) result {
	got, err := s.host.Accept(ctx, ev)
	switch {
	case errors.Is(err, extension.ErrForbidden):
		return s.drop(reasonScopeUnavailable, ev.Type)
	case errors.Is(err, extension.ErrInvalid):
		return s.drop(reasonEventRefused, ev.Type)
	case err != nil:
		n := s.count(reasonAcceptFailed)
		s.log.Error("slack ingress could not accept an event; Slack retries it", "reason", reasonAcceptFailed, "error_type", fmt.Sprintf("%T", err), "count", n)
		return result{status: http.StatusServiceUnavailable, body: map[string]any{"status": "refused", "reason": reasonAcceptFailed}}
	}
	outcome := outcomeAccepted
	if got.Replayed {
		outcome = outcomeRedelivered
	}
	n := s.count(outcome)
	s.log.Info("slack ingress accepted an event", "outcome", outcome, "type", ev.Type, "scope", ev.Scope, "event", got.Event, "effect", got.Effect, "count", n)
	return result{status: http.StatusOK, body: map[string]any{"status": outcome, "event": got.Event, "replayed": got.Replayed}}
}

// serve listens on c's address and serves until ctx ends.
func serve(ctx context.Context, c Config, host extension.IngressHost, now func() time.Time, o Options) error {
	addr := c.Ingress.Listen
	if addr == "" {
		addr = DefaultListen
	}
	s := newServer(c, host, now, o)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		s.log.Error("slack ingress cannot listen; it runs again after an apply that changes its config", "address", addr, "error", err.Error())
		return err
	}
	s.log.Info("slack ingress listening", "address", ln.Addr().String(), "path", EventsPath)
	srv := &http.Server{
		Handler: s, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout, WriteTimeout: writeTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	worked := make(chan struct{})
	go func() {
		defer close(worked)
		s.work(workCtx)
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	// Requests in flight are answered (the worker still accepts) before
	// the worker stops.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	if srv.Shutdown(sctx) != nil {
		srv.Close()
	}
	cancel()
	stopWork()
	<-worked
	s.log.Info("slack ingress stopped", "address", ln.Addr().String())
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
