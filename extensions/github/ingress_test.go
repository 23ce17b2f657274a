package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/webhook"
)

const canary = "whsec-canary-3f9e1d27"

// fakeHost records what the ingress offers; block, when set, holds Accept
// until it is closed.
type fakeHost struct {
	mu       sync.Mutex
	accepted []extension.IngressEvent
	seen     map[string]string
	err      error
	block    chan struct{}
	entered  chan struct{}
	secret   string
	logs     bytes.Buffer
	log      *slog.Logger
	counted  map[string]int // what reached the host's metrics
}

func newFakeHost() *fakeHost {
	h := &fakeHost{seen: map[string]string{}, secret: canary, counted: map[string]int{}}
	h.log = slog.New(slog.NewTextHandler(&lockedWriter{mu: &h.mu, w: &h.logs}, nil))
	return h
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *fakeHost) Logger() *slog.Logger { return h.log }

func (h *fakeHost) Count(outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counted[outcome]++
}

func (h *fakeHost) Secret(_ context.Context, name string) (string, error) {
	if name != "gh-hook" || h.secret == "" {
		return "", fmt.Errorf("%w: no such secret", extension.ErrNotFound)
	}
	return h.secret, nil
}

func (h *fakeHost) Accept(_ context.Context, ev extension.IngressEvent) (extension.IngressAccepted, error) {
	if h.entered != nil {
		h.entered <- struct{}{}
	}
	if h.block != nil {
		<-h.block
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return extension.IngressAccepted{}, h.err
	}
	if id, ok := h.seen[ev.DeliveryID]; ok {
		return extension.IngressAccepted{Event: id, Replayed: true}, nil
	}
	id := fmt.Sprintf("evt_%d", len(h.accepted)+1)
	h.seen[ev.DeliveryID] = id
	h.accepted = append(h.accepted, ev)
	return extension.IngressAccepted{Event: id, Effect: "start"}, nil
}

func (h *fakeHost) setErr(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

// eventually polls cond for a real event; the bound only turns a hang
// into a failure.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *fakeHost) events() []extension.IngressEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]extension.IngressEvent(nil), h.accepted...)
}

func (h *fakeHost) logText() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs.String()
}

const testConfig = `{"ingress": {"enabled": true, "secret": "gh-hook"}, "repositories": {"octo-org/hello-world": {"scope": "ops"}}}`

// start runs the ingress's endpoint, as the host serves it, and its
// worker on an httptest server.
func start(t *testing.T, h *fakeHost, o Options) (*webhook.Endpoint, string) {
	t.Helper()
	spec, ok := (&Extension{Limits: o}).Ingress().(extension.Webhook).Endpoint(json.RawMessage(testConfig))
	if !ok {
		t.Fatal("the ingress is off")
	}
	s := webhook.NewEndpoint(spec, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		cancel()
		<-done
	})
	return s, ts.URL + WebhookPath
}

type delivery struct {
	event, id, signature, contentType string
	body                              []byte
}

func recorded(t *testing.T, file, event, id string) delivery {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return delivery{event: event, id: id, body: body, signature: Sign([]byte(canary), body), contentType: "application/json"}
}

func send(t *testing.T, url string, d delivery) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", d.contentType)
	req.Header.Set("X-GitHub-Event", d.event)
	req.Header.Set("X-GitHub-Delivery", d.id)
	if d.signature != "" {
		req.Header.Set(SignatureHeader, d.signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if bytes.Contains(b, []byte(canary)) {
		t.Fatalf("the response carries the secret: %s", b)
	}
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, resp.Header, out
}

func TestASignedDeliveryIsAcceptedOnce(t *testing.T) {
	h := newFakeHost()
	s, url := start(t, h, Options{})
	d := recorded(t, "issues.opened.json", "issues", "d1a2b3c4-0001")
	code, _, out := send(t, url, d)
	if code != http.StatusAccepted || out["status"] != "accepted" || out["event"] != "evt_1" {
		t.Fatalf("%d %v", code, out)
	}
	code, _, out = send(t, url, d)
	if code != http.StatusAccepted || out["status"] != "redelivered" || out["replayed"] != true {
		t.Fatalf("redelivery: %d %v", code, out)
	}
	evs := h.events()
	if len(evs) != 1 {
		t.Fatalf("%d events offered as new", len(evs))
	}
	ev := evs[0]
	if ev.Scope != "ops" || ev.Type != "github.issues.opened" || ev.CorrelationKey != "octo-org/hello-world#42" || ev.DeliveryID != "d1a2b3c4-0001" {
		t.Fatalf("offered %+v", ev)
	}
	// The data is the mapping's subset, never a header.
	if bytes.Contains(ev.Data, []byte("d1a2b3c4")) || bytes.Contains(ev.Data, []byte("sha256")) || !bytes.Contains(ev.Data, []byte(`"number":42`)) {
		t.Fatalf("data %s", ev.Data)
	}
	if c := s.Counts(); c["accepted"] != 1 || c["redelivered"] != 1 {
		t.Fatalf("counts %v", c)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counted["accepted"] != 1 || h.counted["redelivered"] != 1 {
		t.Fatalf("the host's metrics counted %v", h.counted)
	}
}

func TestABadSignatureIsRefusedAndNothingIsAccepted(t *testing.T) {
	h := newFakeHost()
	s, url := start(t, h, Options{})
	good := recorded(t, "issues.opened.json", "issues", "d-bad-1")
	for name, d := range map[string]delivery{
		"missing":      {event: good.event, id: good.id, body: good.body, contentType: good.contentType},
		"wrong secret": {event: good.event, id: good.id, body: good.body, contentType: good.contentType, signature: Sign([]byte("wrong"), good.body)},
		"sha1":         {event: good.event, id: good.id, body: good.body, contentType: good.contentType, signature: "sha1=" + strings.Repeat("a", 40)},
		"tampered":     {event: good.event, id: good.id, body: bytes.Replace(good.body, []byte("42"), []byte("43"), 1), contentType: good.contentType, signature: good.signature},
	} {
		code, _, out := send(t, url, d)
		if code != http.StatusUnauthorized || out["status"] != "refused" {
			t.Errorf("%s: %d %v", name, code, out)
		}
	}
	if n := len(h.events()); n != 0 {
		t.Fatalf("%d events accepted", n)
	}
	c := s.Counts()
	if c[reasonSignatureMissing] != 1 || c[reasonSignatureMalformed] != 1 || c[reasonSignatureMismatch] != 2 {
		t.Fatalf("counts %v", c)
	}
	logs := h.logText()
	for _, leak := range []string{canary, "d-bad-1", "octo-org", "Crash on empty", "sha1="} {
		if strings.Contains(logs, leak) {
			t.Fatalf("the refusal log carries %q:\n%s", leak, logs)
		}
	}
	if !strings.Contains(logs, "reason=signature_mismatch") {
		t.Fatalf("the refusal is not logged:\n%s", logs)
	}
}

func TestVerifiedDeliveriesThatAreNotAccepted(t *testing.T) {
	h := newFakeHost()
	s, url := start(t, h, Options{MaxBody: 4096})
	unclaimed := recorded(t, "issues.opened.json", "issues", "d-unclaimed")
	unclaimed.body = bytes.ReplaceAll(unclaimed.body, []byte("octo-org/hello-world"), []byte("octo-org/elsewhere"))
	unclaimed.signature = Sign([]byte(canary), unclaimed.body)
	code, _, out := send(t, url, unclaimed)
	if code != http.StatusAccepted || out["status"] != "dropped" || out["reason"] != reasonUnclaimed {
		t.Fatalf("unclaimed: %d %v", code, out)
	}
	unsupported := delivery{event: "deployment", id: "d-unsupported", body: []byte(`{"action":"created"}`), contentType: "application/json"}
	unsupported.signature = Sign([]byte(canary), unsupported.body)
	if code, _, out := send(t, url, unsupported); code != http.StatusAccepted || out["reason"] != reasonEventUnsupported {
		t.Fatalf("unsupported: %d %v", code, out)
	}
	form := recorded(t, "ping.json", "ping", "d-form")
	form.contentType = "application/x-www-form-urlencoded"
	if code, _, out := send(t, url, form); code != http.StatusUnsupportedMediaType || out["reason"] != reasonContentType {
		t.Fatalf("form: %d %v", code, out)
	}
	noID := recorded(t, "ping.json", "ping", "")
	if code, _, _ := send(t, url, noID); code != http.StatusBadRequest {
		t.Fatalf("no delivery id: %d", code)
	}
	big := delivery{event: "ping", id: "d-big", body: bytes.Repeat([]byte(" "), 4097), contentType: "application/json"}
	big.signature = Sign([]byte(canary), big.body)
	if code, _, out := send(t, url, big); code != http.StatusRequestEntityTooLarge || out["reason"] != reasonBodyTooLarge {
		t.Fatalf("too large: %d %v", code, out)
	}
	if n := len(h.events()); n != 0 {
		t.Fatalf("%d events accepted", n)
	}
	if c := s.Counts(); c[reasonUnclaimed] != 1 || c[reasonEventUnsupported] != 1 || c[reasonBodyTooLarge] != 1 {
		t.Fatalf("counts %v", c)
	}
	if logs := h.logText(); !strings.Contains(logs, "reason=unclaimed") || !strings.Contains(logs, "count=1") {
		t.Fatalf("the drop is not logged with its reason and count:\n%s", logs)
	}
	// A scope the host refuses, and an Event it refuses, are dropped too.
	h.setErr(fmt.Errorf("%w: not enabled", extension.ErrForbidden))
	if code, _, out := send(t, url, recorded(t, "push.json", "push", "d-forbidden")); code != http.StatusAccepted || out["reason"] != reasonScopeUnavailable {
		t.Fatalf("forbidden: %d %v", code, out)
	}
	h.setErr(errors.New("disk full"))
	if code, hdr, out := send(t, url, recorded(t, "push.json", "push", "d-failed")); code != http.StatusServiceUnavailable || out["reason"] != reasonAcceptFailed || hdr.Get("Retry-After") != "" {
		t.Fatalf("failed: %d %v", code, out)
	}
}

// A full queue answers 503 with Retry-After and counts it; nothing is lost
// of what was queued.
func TestAFullQueueIsRefusedWithRetryAfter(t *testing.T) {
	h := newFakeHost()
	h.block, h.entered = make(chan struct{}), make(chan struct{}, 4)
	s, url := start(t, h, Options{Queue: 1, InFlight: 8})
	results := make(chan int, 2)
	go func() {
		code, _, _ := send(t, url, recorded(t, "push.json", "push", "q-1"))
		results <- code
	}()
	<-h.entered // the worker holds q-1; the queue is empty
	go func() {
		code, _, _ := send(t, url, recorded(t, "ping.json", "ping", "q-2"))
		results <- code
	}()
	// q-2 waits in the queue of one: poll for that real state.
	eventually(t, "q-2 queued", func() bool { return s.Queued() == 1 })
	code, hdr, out := send(t, url, recorded(t, "issues.opened.json", "issues", "q-3"))
	if code != http.StatusServiceUnavailable || out["reason"] != reasonQueueFull || hdr.Get("Retry-After") == "" {
		t.Fatalf("%d %v %v", code, out, hdr)
	}
	close(h.block)
	for range 2 {
		if code := <-results; code != http.StatusAccepted {
			t.Fatalf("a queued delivery ended %d", code)
		}
	}
	if c := s.Counts(); c[reasonQueueFull] != 1 || c["accepted"] != 2 {
		t.Fatalf("counts %v", c)
	}
}

func TestOnlyPostToThePath(t *testing.T) {
	h := newFakeHost()
	_, url := start(t, h, Options{})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	d := recorded(t, "ping.json", "ping", "p-1")
	if code, _, _ := send(t, strings.TrimSuffix(url, WebhookPath)+"/other", d); code != http.StatusNotFound {
		t.Fatalf("other path: %d", code)
	}
}

// The ingress is served on the host's webhook listener at its path, and
// Serve returns when its context ends; off, it has no endpoint and Serve
// returns at once.
func TestServeListensAndStops(t *testing.T) {
	h := newFakeHost()
	ing := (&Extension{}).Ingress()
	off := json.RawMessage(`{"ingress": {"enabled": false}}`)
	if err := ing.Serve(context.Background(), off, h); err != nil {
		t.Fatal(err)
	}
	if _, ok := ing.(extension.Webhook).Endpoint(off); ok {
		t.Fatal("an ingress its config leaves off has an endpoint")
	}
	on := json.RawMessage(`{"ingress": {"enabled": true, "secret": "gh-hook"}, "repositories": {"octo-org/hello-world": {"scope": "ops"}}, "api": {"token": "gh-hook"}}`)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ing.Serve(ctx, on, h) }()
	spec, ok := ing.(extension.Webhook).Endpoint(on)
	if !ok || spec.Path != WebhookPath || spec.MaxBody != DefaultMaxBody {
		t.Fatalf("endpoint %+v %v", spec, ok)
	}
	e := webhook.NewEndpoint(spec, h)
	workCtx, stopWork := context.WithCancel(context.Background())
	worked := make(chan struct{})
	go func() { defer close(worked); e.Run(workCtx) }()
	l := webhook.NewListener(h.log)
	if err := l.Set("127.0.0.1:0", []*webhook.Endpoint{e}); err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	code, _, out := send(t, "http://"+addr+WebhookPath, recorded(t, "ping.json", "ping", "s-1"))
	if code != http.StatusAccepted || out["status"] != "accepted" {
		t.Fatalf("%d %v", code, out)
	}
	l.Close()
	stopWork()
	<-worked
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v before its context ended", err)
	default:
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
