package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/webhook"
)

const (
	signingCanary = "slack-signing-canary-51d0"
	botCanary     = "xoxb-bot-canary-77ae"
)

// fakeHost records what the ingress offers and resolves the two secrets.
type fakeHost struct {
	mu       sync.Mutex
	accepted []extension.IngressEvent
	seen     map[string]string
	logs     bytes.Buffer
	log      *slog.Logger
	counted  map[string]int
}

func newFakeHost() *fakeHost {
	h := &fakeHost{seen: map[string]string{}, counted: map[string]int{}}
	h.log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.logs.Write(p)
	}), nil))
	return h
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (h *fakeHost) Logger() *slog.Logger { return h.log }

func (h *fakeHost) Count(outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counted[outcome]++
}

func (h *fakeHost) Secret(_ context.Context, name string) (string, error) {
	switch name {
	case "slack-signing":
		return signingCanary, nil
	case "slack-bot":
		return botCanary + "\n", nil
	}
	return "", fmt.Errorf("%w: no such secret", extension.ErrNotFound)
}

func (h *fakeHost) Accept(_ context.Context, ev extension.IngressEvent) (extension.IngressAccepted, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id, ok := h.seen[ev.DeliveryID]; ok {
		return extension.IngressAccepted{Event: id, Replayed: true}, nil
	}
	id := fmt.Sprintf("evt_%d", len(h.accepted)+1)
	h.seen[ev.DeliveryID] = id
	h.accepted = append(h.accepted, ev)
	return extension.IngressAccepted{Event: id, Effect: "start"}, nil
}

func (h *fakeHost) events() []extension.IngressEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]extension.IngressEvent(nil), h.accepted...)
}

const ingressConfig = `{"ingress":{"enabled":true,"signing_secret":"slack-signing"},"channels":{"C0OPS":{"scope":"ops"}}}`

// startIngress runs the ingress's endpoint, as the host serves it, and
// its worker on a test server.
func startIngress(t *testing.T, h *fakeHost, now func() time.Time) string {
	t.Helper()
	spec, ok := (&Extension{Now: now}).Ingress().(extension.Webhook).Endpoint(json.RawMessage(ingressConfig))
	if !ok {
		t.Fatal("the ingress is off")
	}
	s := webhook.NewEndpoint(spec, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return srv.URL
}

type request struct {
	body           []byte
	ts, sig, retry string
}

func signedAt(now time.Time, body []byte) request {
	ts := strconv.FormatInt(now.Unix(), 10)
	return request{body: body, ts: ts, sig: Sign([]byte(signingCanary), ts, body)}
}

func send(t *testing.T, base string, r request) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+EventsPath, bytes.NewReader(r.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(TimestampHeader, r.ts)
	if r.sig != "" {
		req.Header.Set(SignatureHeader, r.sig)
	}
	if r.retry != "" {
		req.Header.Set(RetryHeader, r.retry)
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return resp.StatusCode, out
}

func mention(eventID, channel, ts string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "event_callback", "team_id": "T0TEAM", "event_id": eventID,
		"event": map[string]any{"type": "app_mention", "channel": channel, "user": "U0ALICE", "text": "<@U0BOT> help", "ts": ts}})
	return b
}

func TestIngress(t *testing.T) {
	h := newFakeHost()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	base := startIngress(t, h, clock)

	// Refused before anything is parsed: a wrong, a missing and a stale
	// signature are 401 and offer nothing.
	bad := signedAt(now, mention("Ev0BAD", "C0OPS", "1712345678.000100"))
	bad.sig = "v0=" + strings.Repeat("0", 64)
	stale := signedAt(now.Add(-6*time.Minute), mention("Ev0OLD", "C0OPS", "1712345678.000100"))
	missing := signedAt(now, []byte(`not even json`))
	missing.sig = ""
	for name, r := range map[string]request{"wrong": bad, "stale": stale, "missing": missing} {
		if code, body := send(t, base, r); code != http.StatusUnauthorized || body["status"] != "refused" {
			t.Fatalf("%s signature: %d %v", name, code, body)
		}
	}
	if evs := h.events(); len(evs) != 0 {
		t.Fatalf("refused requests offered %+v", evs)
	}

	// The challenge is answered.
	code, body := send(t, base, signedAt(now, []byte(`{"type":"url_verification","token":"x","challenge":"chal-123"}`)))
	if code != http.StatusOK || body["challenge"] != "chal-123" {
		t.Fatalf("challenge: %d %v", code, body)
	}

	// An unclaimed channel: 200, dropped, counted.
	code, body = send(t, base, signedAt(now, mention("Ev0ELSE", "C0ELSEWHERE", "1712345678.000100")))
	if code != http.StatusOK || body["reason"] != reasonUnclaimed || len(h.events()) != 0 {
		t.Fatalf("unclaimed: %d %v", code, body)
	}

	// A mention: one Event; Slack's retry of it is the same Event.
	good := signedAt(now, mention("Ev0GOOD", "C0OPS", "1712345678.000100"))
	if code, body = send(t, base, good); code != http.StatusOK || body["status"] != outcomeAccepted {
		t.Fatalf("a mention: %d %v", code, body)
	}
	now = now.Add(time.Minute)
	retry := signedAt(now, good.body)
	retry.retry = "1"
	if code, body = send(t, base, retry); code != http.StatusOK || body["status"] != outcomeRedelivered || body["replayed"] != true {
		t.Fatalf("a retry: %d %v", code, body)
	}
	evs := h.events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Scope != "ops" || ev.Type != TypeAppMention || ev.CorrelationKey != "C0OPS:1712345678.000100" || ev.DeliveryID != "Ev0GOOD" ||
		!strings.Contains(string(ev.Data), `"user":"U0ALICE"`) || strings.Contains(string(ev.Data), "http_timeout") {
		t.Fatalf("event %+v %s", ev, ev.Data)
	}

	h.mu.Lock()
	logs, counted := h.logs.String(), h.counted
	h.mu.Unlock()
	if strings.Contains(logs, signingCanary) || strings.Contains(logs, "not even json") || strings.Contains(logs, bad.sig) {
		t.Fatalf("the logs carry the secret, a refused body or a signature:\n%s", logs)
	}
	for _, reason := range []string{reasonSignatureMismatch, reasonTimestampStale, reasonSignatureMissing, reasonUnclaimed, outcomeAccepted, outcomeRedelivered, outcomeChallenge} {
		if counted[reason] != 1 || !strings.Contains(logs, reason) {
			t.Errorf("%s counted %d times (logged: %v)", reason, counted[reason], strings.Contains(logs, reason))
		}
	}
}

func TestIngressRefusesOtherRequests(t *testing.T) {
	h := newFakeHost()
	now := time.Unix(1_800_000_000, 0)
	base := startIngress(t, h, func() time.Time { return now })
	resp, err := http.Get(base + EventsPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	r := signedAt(now, []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message","channel":"C0OPS","user":"U0A","ts":"nope"}}`))
	if code, body := send(t, base, r); code != http.StatusBadRequest || body["reason"] != reasonPayloadInvalid {
		t.Fatalf("a malformed event: %d %v", code, body)
	}
}
