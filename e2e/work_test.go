package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

// raw sends one HTTP request over the management socket with the owner's
// token, as any HTTP client of the API would, for what the Go client
// never sends (a Range header, a body it would refuse to encode).
func (e *env) raw(method, path string, header map[string]string, body string) (*http.Response, []byte) {
	e.t.Helper()
	tok, err := os.ReadFile(e.tokenFile())
	if err != nil {
		e.t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.socket())
	}}}
	defer hc.CloseIdleConnections()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://localhost"+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// rangeRead reads an artifact's content with a Range header.
func (e *env) rangeRead(id, rng string) (int, string, []byte) {
	e.t.Helper()
	resp, b := e.raw("GET", "/v1/artifacts/"+client.PathEscape(id)+"/content", map[string]string{"Range": rng}, "")
	return resp.StatusCode, resp.Header.Get("Content-Range"), b
}

func TestWorkRunsAShellProcessAndItsLogIsReadable(t *testing.T) {
	e := newEnv(t)
	e.start()
	w := e.createWork("setup")
	w = e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
	if w.State != "succeeded" {
		t.Fatalf("Work ended %s (%s), want succeeded\n%s", w.State, w.OutcomeMessage, e.allLogs())
	}
	exes := e.executions(w.ID)
	if len(exes) != 1 || exes[0].Result != "succeeded" || exes[0].ExitCode != 0 {
		t.Fatalf("executions %+v, want one that succeeded with status 0", exes)
	}
	arts := e.artifacts(exes[0].ID)
	if len(arts) != 1 || arts[0].Name != "log" {
		t.Fatalf("artifacts %+v, want the log", arts)
	}
	resp := e.must("GET", "/v1/artifacts/"+client.PathEscape(arts[0].ID)+"/content", nil, nil, nil)
	full := string(resp.Body)
	want := "Open Conduit ran Work " + w.ID + " in scope setup"
	if !strings.HasPrefix(full, want) || !strings.Contains(full, `"work"`) {
		t.Fatalf("log %q, want it to start with %q and hold the context os read", full, want)
	}
	status, cr, part := e.rangeRead(arts[0].ID, "bytes=5-12")
	if status != http.StatusPartialContent || string(part) != full[5:13] || !strings.HasPrefix(cr, "bytes 5-12/") {
		t.Fatalf("range 5-12: %d %q %q, want 206 %q", status, cr, part, full[5:13])
	}
	if status, _, _ := e.rangeRead(arts[0].ID, "bytes=999999-"); status != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("a range past the end answered %d, want 416", status)
	}
}

func TestCancelStopsTheProcessGroup(t *testing.T) {
	e := newEnv(t)
	e.fifoJob("", "")
	e.start()
	w := e.createWork("t")
	pid := waitStarted(t, filepath.Join(e.root, "mark"), 1)
	group := pgid(t, pid)
	if !groupAlive(group) {
		t.Fatal("the job's group is not running")
	}
	e.must("POST", "/v1/work/"+client.PathEscape(w.ID)+"/cancel", map[string]any{}, key(), nil)
	w = e.waitWork(w.ID, "cancelled", func(w work) bool { return terminal(w.State) })
	if w.State != "cancelled" {
		t.Fatalf("Work ended %s, want cancelled", w.State)
	}
	until(t, "the execution finishing", func() bool {
		exes := e.executions(w.ID)
		return len(exes) == 1 && exes[0].State == "finished"
	})
	until(t, "the job's process group ending", func() bool { return !groupAlive(group) })
}

func TestIdempotentReplayAndConflict(t *testing.T) {
	e := newEnv(t)
	e.start()
	opts := key()
	body := map[string]any{"scope": "setup", "correlation_key": "idem-1"}
	first := e.must("POST", "/v1/work", body, opts, nil)
	again := e.must("POST", "/v1/work", body, opts, nil)
	if !again.Replayed || again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: replayed=%v %d %s; want the original %d %s", again.Replayed, again.Status, again.Body, first.Status, first.Body)
	}
	if first.Replayed {
		t.Error("the first request was marked replayed")
	}
	_, err := e.do("POST", "/v1/work", map[string]any{"scope": "setup", "correlation_key": "idem-2"}, opts, nil)
	if !client.IsIdempotencyConflict(err) {
		t.Fatalf("a changed body under the same key: %v, want idempotency_conflict", err)
	}
	// Only one Work was created.
	var p page[work]
	e.must("GET", "/v1/work?scope=setup", nil, nil, &p)
	if len(p.Items) != 1 {
		t.Fatalf("%d Work exist, want 1", len(p.Items))
	}
}

func TestCursorTamperingAndMismatch(t *testing.T) {
	e := newEnv(t)
	e.start()
	for range 3 {
		e.createWork("setup")
	}
	var p1 page[work]
	e.must("GET", "/v1/work?limit=1", nil, nil, &p1)
	if len(p1.Items) != 1 || p1.NextCursor == "" {
		t.Fatalf("first page %+v, want one item and a cursor", p1)
	}
	var p2 page[work]
	e.must("GET", "/v1/work?limit=1&cursor="+url.QueryEscape(p1.NextCursor), nil, nil, &p2)
	if len(p2.Items) != 1 || p2.Items[0].ID == p1.Items[0].ID {
		t.Fatalf("second page %+v, want the next Work", p2)
	}
	c := []byte(p1.NextCursor)
	i := len(c) / 2
	if c[i] == 'A' {
		c[i] = 'B'
	} else {
		c[i] = 'A'
	}
	_, err := e.do("GET", "/v1/work?limit=1&cursor="+url.QueryEscape(string(c)), nil, nil, nil)
	if code := client.ErrorCode(err); code != "invalid_cursor" {
		t.Fatalf("a tampered cursor: %v, want invalid_cursor", err)
	}
	_, err = e.do("GET", "/v1/work?limit=1&scope=setup&cursor="+url.QueryEscape(p1.NextCursor), nil, nil, nil)
	if code := client.ErrorCode(err); code != "cursor_mismatch" {
		t.Fatalf("a cursor under other filters: %v, want cursor_mismatch", err)
	}
}

func TestUnchangedReadAnswers304(t *testing.T) {
	e := newEnv(t)
	e.start()
	w := e.createWork("setup")
	w = e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
	path := "/v1/work/" + client.PathEscape(w.ID)
	first := e.must("GET", path, nil, nil, nil)
	etag := first.Header.Get("ETag")
	if etag == "" {
		t.Fatal("a single read carries no ETag")
	}
	again := e.must("GET", path, nil, &client.RequestOptions{IfNoneMatch: etag}, nil)
	if again.Status != http.StatusNotModified || len(again.Body) != 0 {
		t.Fatalf("If-None-Match with the current ETag: %d %q, want 304 without a body", again.Status, again.Body)
	}
	other := e.must("GET", path, nil, &client.RequestOptions{IfNoneMatch: `"stale"`}, nil)
	if other.Status != http.StatusOK {
		t.Fatalf("If-None-Match with another ETag: %d, want 200", other.Status)
	}
}

func TestStrictRequestValidation(t *testing.T) {
	e := newEnv(t)
	e.start()
	cases := []struct {
		name string
		path string
		body json.RawMessage
		opts *client.RequestOptions
		code string
	}{
		{"unknown field", "/v1/work", json.RawMessage(`{"scope":"setup","surprise":1}`), key(), "invalid_request"},
		{"null field", "/v1/work", json.RawMessage(`{"scope":null}`), key(), "invalid_request"},
		{"query string", "/v1/work?scope=setup", json.RawMessage(`{"scope":"setup"}`), key(), "invalid_request"},
		{"no idempotency key", "/v1/work", json.RawMessage(`{"scope":"setup"}`), nil, "idempotency_key_required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.do("POST", tc.path, tc.body, tc.opts, nil)
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Code != tc.code {
				t.Fatalf("%s: %v, want %s", tc.name, err, tc.code)
			}
		})
	}
	// What the Go client refuses to send, sent raw.
	rawCases := []struct {
		name, ctype, body, code string
	}{
		{"duplicate field", "application/json", `{"scope":"setup","scope":"setup"}`, "invalid_request"},
		{"not JSON", "text/plain", `{"scope":"setup"}`, "unsupported_media_type"},
		{"too large", "application/json", `{"scope":"` + strings.Repeat("x", 1<<20) + `"}`, "payload_too_large"},
	}
	for _, tc := range rawCases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := e.raw("POST", "/v1/work", map[string]string{"Content-Type": tc.ctype, "Idempotency-Key": client.NewIdempotencyKey()}, tc.body)
			var env struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &env); err != nil || env.Error.Code != tc.code || resp.StatusCode < 400 {
				t.Fatalf("%s: %d %s, want %s", tc.name, resp.StatusCode, b, tc.code)
			}
		})
	}
	var p page[work]
	e.must("GET", "/v1/work", nil, nil, &p)
	if len(p.Items) != 0 {
		t.Fatalf("refused requests created %d Work", len(p.Items))
	}
}

type configView struct {
	Generation int64           `json:"generation"`
	Hash       string          `json:"hash"`
	Config     json.RawMessage `json:"config"`
}

func TestConfigApplyAndRestartRestoresTheCommittedGeneration(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	var c1 configView
	e.must("GET", "/v1/config", nil, nil, &c1)
	if c1.Generation != 1 {
		t.Fatalf("first start: generation %d, want 1", c1.Generation)
	}
	next := json.RawMessage(`{"version": 1, "scopes": {"setup": {}, "extra": {"bindings": {"job": {"executor": "shell", "config": {"command": ["true"]}}}}}}`)
	var applied struct {
		Generation int64  `json:"generation"`
		Hash       string `json:"hash"`
	}
	e.must("POST", "/v1/config/apply", map[string]any{"config": next, "expected_generation": 1}, key(), &applied)
	if applied.Generation != 2 {
		t.Fatalf("apply: generation %d, want 2", applied.Generation)
	}
	// The applied generation takes effect at once: Work runs on its new
	// binding without a restart.
	w := e.createWork("extra")
	if w = e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("Work on the applied binding ended %s (%s %s)", w.State, w.BlockedReason, w.OutcomeMessage)
	}
	_, err := e.do("POST", "/v1/config/apply", map[string]any{"config": json.RawMessage(`{"version": 1}`), "expected_generation": 1}, key(), nil)
	if !client.IsStaleGeneration(err) {
		t.Fatalf("apply with a stale generation: %v, want stale_generation", err)
	}
	// A disk edit alone changes nothing, not even at the next start.
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), []byte(`{"version": 1, "scopes": {"edited": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	e.start()
	var c2 configView
	e.must("GET", "/v1/config", nil, nil, &c2)
	if c2.Generation != 2 || c2.Hash != applied.Hash {
		t.Fatalf("after a restart: generation %d hash %s, want the committed 2 %s", c2.Generation, c2.Hash, applied.Hash)
	}
	if strings.Contains(string(c2.Config), "edited") || !strings.Contains(string(c2.Config), "extra") {
		t.Fatalf("after a restart the active config is %s, want the committed one", c2.Config)
	}
	h, err := e.client().Health(context.Background())
	if err != nil || h.Generation != 2 {
		t.Fatalf("health %+v %v, want generation 2", h, err)
	}
}

// runKey is the run directory name of an execution (docs/daemon.md).
func runKey(executionID string) string {
	sum := sha256.Sum256([]byte(executionID))
	return hex.EncodeToString(sum[:8])
}
