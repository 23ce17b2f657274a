package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
)

const secret = "hook-secret-canary-9d1c"

// host is a fake extension.IngressHost that accepts every Event once.
type host struct {
	mu       sync.Mutex
	accepted []extension.IngressEvent
	counted  map[string]int
	secret   string
	logs     bytes.Buffer
}

func newHost() *host { return &host{counted: map[string]int{}, secret: secret} }

func (h *host) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.logs.Write(p)
}

func (h *host) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(h, nil)) }

func (h *host) Count(outcome string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counted[outcome]++
}

func (h *host) Secret(context.Context, string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.secret == "" {
		return "", fmt.Errorf("%w: secret_not_found", extension.ErrNotFound)
	}
	return h.secret, nil
}

func (h *host) Accept(_ context.Context, ev extension.IngressEvent) (extension.IngressAccepted, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, a := range h.accepted {
		if a.DeliveryID == ev.DeliveryID {
			return extension.IngressAccepted{Event: fmt.Sprintf("evt_%d", i+1), Replayed: true}, nil
		}
	}
	h.accepted = append(h.accepted, ev)
	return extension.IngressAccepted{Event: fmt.Sprintf("evt_%d", len(h.accepted)), Effect: "start"}, nil
}

// spec is an endpoint at path whose Read wants the key as the X-Key
// header, answers a body "ping" with a Reply and offers anything else as
// an Event with the X-Id header as its delivery id.
func spec(path string) extension.WebhookEndpoint {
	return extension.WebhookEndpoint{Path: path, Secret: "hook", Status: http.StatusAccepted, MaxBody: 64,
		Read: func(d extension.WebhookDelivery) extension.WebhookVerdict {
			if d.Header.Get("X-Key") != string(d.Key) {
				return extension.WebhookVerdict{Refuse: "signature_mismatch", RefuseStatus: http.StatusUnauthorized}
			}
			if string(d.Body) == "ping" {
				return extension.WebhookVerdict{Reply: map[string]any{"pong": true}, Outcome: "ping"}
			}
			return extension.WebhookVerdict{Event: &extension.IngressEvent{Scope: "ops", Type: "test.delivered", DeliveryID: d.Header.Get("X-Id"), Data: json.RawMessage(`{}`)}}
		}}
}

// run makes an endpoint and runs its worker until the test ends.
func run(t *testing.T, s extension.WebhookEndpoint, h *host) *Endpoint {
	t.Helper()
	e := NewEndpoint(s, h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

func post(t *testing.T, url, key, id, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Key", key)
	req.Header.Set("X-Id", id)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return resp.StatusCode, resp.Header, out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func listens(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// The listener listens while an endpoint is mounted, serves each at its
// path, moves when its address changes and stops when none is left.
func TestTheListenerFollowsItsEndpoints(t *testing.T) {
	h := newHost()
	a, b := run(t, spec("/a/hook"), h), run(t, spec("/b/hook"), h)
	l := NewListener(h.Logger())
	defer l.Close()
	first := freeAddr(t)
	if err := l.Set(first, nil); err != nil || l.Addr() != nil || listens(first) {
		t.Fatalf("with no endpoint: %v, listening at %v", err, l.Addr())
	}
	if err := l.Set(first, []*Endpoint{a}); err != nil || l.Addr() == nil || l.Addr().String() != first {
		t.Fatalf("with one endpoint: %v, listening at %v", err, l.Addr())
	}
	if code, _, out := post(t, "http://"+first+"/a/hook", secret, "d-1", "x"); code != http.StatusAccepted || out["status"] != "accepted" {
		t.Fatalf("a: %d %v", code, out)
	}
	if code, _, out := post(t, "http://"+first+"/b/hook", secret, "d-2", "x"); code != http.StatusNotFound || out["reason"] != "not_found" {
		t.Fatalf("b before it is mounted: %d %v", code, out)
	}
	// A second endpoint on the same address: the listener stays where it
	// is; a second one on a taken path is refused, the first kept.
	other := run(t, spec("/a/hook"), newHost())
	if err := l.Set(first, []*Endpoint{a, b, other}); err == nil || !strings.Contains(err.Error(), "/a/hook") {
		t.Fatalf("two endpoints on one path: %v", err)
	}
	if code, _, out := post(t, "http://"+first+"/b/hook", secret, "d-2", "x"); code != http.StatusAccepted || out["status"] != "accepted" {
		t.Fatalf("b: %d %v", code, out)
	}
	if code, _, out := post(t, "http://"+first+"/a/hook", secret, "d-1", "x"); code != http.StatusAccepted || out["status"] != "redelivered" {
		t.Fatalf("a again: %d %v", code, out)
	}
	if other.Counts()["accepted"]+other.Counts()["redelivered"] != 0 {
		t.Fatalf("the refused endpoint served: %v", other.Counts())
	}
	second := freeAddr(t)
	if err := l.Set(second, []*Endpoint{a, b}); err != nil || l.Addr().String() != second {
		t.Fatalf("moved: %v, listening at %v", err, l.Addr())
	}
	if listens(first) {
		t.Fatal("the old address still listens")
	}
	if err := l.Set(second, nil); err != nil || l.Addr() != nil || listens(second) {
		t.Fatalf("with none left: %v, listening at %v", err, l.Addr())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.accepted) != 2 || strings.Count(h.logs.String(), "webhook listener listening") != 2 || strings.Contains(h.logs.String(), secret) {
		t.Fatalf("accepted %+v; logs:\n%s", h.accepted, h.logs.String())
	}
}

// What happens around Read: the method, the body's bound, an unresolved
// secret (tried again at the next delivery), a refusal, a Reply with the
// endpoint's status, and a delivery whose worker has stopped.
func TestTheEndpointAroundRead(t *testing.T) {
	h := newHost()
	e := run(t, spec("/a/hook"), h)
	l := NewListener(h.Logger())
	defer l.Close()
	if err := l.Set("127.0.0.1:0", []*Endpoint{e}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/a/hook"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	if code, _, out := post(t, url, secret, "d-big", strings.Repeat("x", 65)); code != http.StatusRequestEntityTooLarge || out["reason"] != extension.WebhookBodyTooLarge {
		t.Fatalf("too large: %d %v", code, out)
	}
	h.mu.Lock()
	h.secret = ""
	h.mu.Unlock()
	if code, hdr, out := post(t, url, secret, "d-1", "x"); code != http.StatusServiceUnavailable || out["reason"] != extension.WebhookSecretUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("no secret: %d %v", code, out)
	}
	h.mu.Lock()
	h.secret = secret
	h.mu.Unlock()
	if code, _, out := post(t, url, "wrong", "d-1", "x"); code != http.StatusUnauthorized || out["reason"] != "signature_mismatch" {
		t.Fatalf("refused: %d %v", code, out)
	}
	if code, _, out := post(t, url, secret, "d-ping", "ping"); code != http.StatusAccepted || out["pong"] != true {
		t.Fatalf("reply: %d %v", code, out)
	}
	c := e.Counts()
	if c[extension.WebhookBodyTooLarge] != 1 || c[extension.WebhookSecretUnavailable] != 1 || c["signature_mismatch"] != 1 || c["ping"] != 1 {
		t.Fatalf("counts %v", c)
	}

	// An endpoint whose worker has ended answers busy, and accepts
	// nothing.
	stopped := NewEndpoint(spec("/b/hook"), h)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped.Run(ctx)
	if err := l.Set("127.0.0.1:0", []*Endpoint{e, stopped}); err != nil {
		t.Fatal(err)
	}
	if code, hdr, out := post(t, "http://"+l.Addr().String()+"/b/hook", secret, "d-late", "x"); code != http.StatusServiceUnavailable || out["reason"] != extension.WebhookBusy || hdr.Get("Retry-After") == "" {
		t.Fatalf("stopped: %d %v", code, out)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.accepted) != 0 {
		t.Fatalf("accepted %+v", h.accepted)
	}
}
