package toolbeltapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
	"github.com/open-conduit/open-conduit/internal/unixsock"
	"github.com/open-conduit/open-conduit/osclient"
)

// execBundle is a management server and a real toolbelt on SQLite, with
// two executions each served on its own socket in its run directory.
type execBundle struct {
	h    *mgmttest.Harness
	f    *toolbelttest.Fixture
	tb   *toolbelt.Toolbelt
	a, b *toolbelttest.Attempt
	epA  runs.Endpoint
	epB  runs.Endpoint
}

func setupExecution(t *testing.T) *execBundle {
	t.Helper()
	return setupExecutionWith(t, unixsock.Limits{})
}

// setupExecutionWith is setupExecution with the execution sockets' limits.
func setupExecutionWith(t *testing.T, limits unixsock.Limits) *execBundle {
	t.Helper()
	f, err := toolbelttest.NewFixture(t.TempDir(), toolbelttest.Real, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tb := f.TB.(*toolbelt.Toolbelt)
	err = f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{{
		Name: "acme.echo", Summary: "Echo.", Capabilities: []string{"git.credential"},
		Handler: func(_ context.Context, _ extension.Authority, in json.RawMessage) (json.RawMessage, error) {
			return in, nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mgmttest.Start(t, mgmttest.Options{ExecutionTokens: management.ToolbeltTokens(tb), Clock: f.Env.Clock})
	b := &execBundle{h: h, f: f, tb: tb}
	if b.a, err = f.Start(); err != nil {
		t.Fatal(err)
	}
	if b.b, err = f.Start(); err != nil {
		t.Fatal(err)
	}
	dirs, err := runs.New(h.StateDir, runs.Options{Logger: mgmttest.DiscardLogger(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dirs.CloseAll)
	handler := h.Server.ExecutionHandler(tb)
	for _, x := range []struct {
		at *toolbelttest.Attempt
		ep *runs.Endpoint
	}{{b.a, &b.epA}, {b.b, &b.epB}} {
		if *x.ep, err = dirs.Prepare(x.at.Execution.ID, x.at.Token); err != nil {
			t.Fatal(err)
		}
		if err := dirs.Serve(x.at.Execution.ID, *x.ep, handler); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func osClient(t *testing.T, socket, tokenFile string) *osclient.Client {
	t.Helper()
	c, err := osclient.New(socket, tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := osclient.CodeOf(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

func TestExecutionSocketServesItsOwnToken(t *testing.T) {
	b := setupExecution(t)
	ctx := context.Background()
	c := osClient(t, b.epA.Socket, b.epA.TokenFile)
	res, err := c.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"test.hello"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var out osclient.EmitResult
	if err := json.Unmarshal(res.Result, &out); err != nil || out.EventID == "" || res.Replayed {
		t.Fatalf("emit result %s (%v)", res.Result, err)
	}
	g, err := c.Guidance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range g.Operations {
		names = append(names, op.Name)
	}
	if strings.Join(names, ",") != "acme.echo,create_work,declare_outcome,emit,read_context,wait" || g.Guidance == "" {
		t.Fatalf("guidance operations %v, guidance %q", names, g.Guidance)
	}
	s, err := c.Serving(ctx, "git.credential")
	if err != nil || len(s.Operations) != 1 || s.Operations[0] != "acme.echo" {
		t.Fatalf("serving = %+v, %v", s, err)
	}
	if s, err := c.Serving(ctx, "nothing.here"); err != nil || s.Operations == nil || len(s.Operations) != 0 {
		t.Fatalf("serving an unserved capability = %+v, %v", s, err)
	}

	// The Idempotency-Key stands in for request_id. acme.echo serves
	// git.credential, so it is sensitive: its result is never stored, and
	// the repeat runs it again rather than replaying; the conflict below
	// shows the key was recorded as the request ID.
	first, err := c.Call(ctx, osclient.CallRequest{Operation: "acme.echo", Input: json.RawMessage(`{"n":1}`), IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Call(ctx, osclient.CallRequest{Operation: "acme.echo", Input: json.RawMessage(`{"n":1}`), RequestID: "k1"})
	if err != nil || again.Replayed || string(again.Result) != string(first.Result) {
		t.Fatalf("repeat by request_id of an Idempotency-Key call to a sensitive operation = %+v, %v; want it run again", again, err)
	}
	_, err = c.Call(ctx, osclient.CallRequest{Operation: "acme.echo", Input: json.RawMessage(`{"n":2}`), RequestID: "k1"})
	wantCode(t, err, osclient.CodeRequestConflict)
}

func TestExecutionSocketRefusesOtherExecutions(t *testing.T) {
	b := setupExecution(t)
	ctx := context.Background()
	// B's genuine token on A's socket.
	c := osClient(t, b.epA.Socket, b.epB.TokenFile)
	_, err := c.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"test.hello"}`)})
	wantCode(t, err, osclient.CodeForbidden)
	_, err = c.Guidance(ctx)
	wantCode(t, err, osclient.CodeForbidden)
	_, err = c.Serving(ctx, "git.credential")
	wantCode(t, err, osclient.CodeForbidden)
	// B's token asserting B on A's socket.
	_, err = c.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"test.hello"}`), ExecutionID: b.b.Execution.ID})
	wantCode(t, err, osclient.CodeForbidden)
	// A's token asserting B on A's socket.
	ca := osClient(t, b.epA.Socket, b.epA.TokenFile)
	_, err = ca.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"test.hello"}`), ExecutionID: b.b.Execution.ID})
	wantCode(t, err, osclient.CodeForbidden)
	_, err = ca.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"test.hello"}`), WorkID: b.b.Work.ID})
	wantCode(t, err, osclient.CodeForbidden)
	// Nothing was emitted by any of them.
	if evs, err := b.f.Events("test.hello"); err != nil || len(evs) != 0 {
		t.Fatalf("refused calls emitted %d events (%v)", len(evs), err)
	}
	// The refusals are on record for the operator, without the token.
	calls, err := b.f.Env.Store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: b.b.Execution.ID, Kind: storage.ToolbeltRejected})
	if err != nil || len(calls) != 4 {
		t.Fatalf("rejected calls of B's token = %d (%v), want 4", len(calls), err)
	}
	for _, c := range calls {
		if c.Result != "forbidden" || c.Token != b.b.TokenID {
			t.Errorf("call record %+v", c)
		}
	}
}

func TestExecutionSocketOperatorCredential(t *testing.T) {
	b := setupExecution(t)
	c := osClient(t, b.epA.Socket, b.h.TokenFile)
	_, err := c.Call(context.Background(), osclient.CallRequest{Operation: "emit", Input: json.RawMessage(`{"type":"test.hello"}`)})
	wantCode(t, err, osclient.CodeWrongCredentialClass)
	_, err = c.Guidance(context.Background())
	wantCode(t, err, osclient.CodeWrongCredentialClass)
}

func rawOn(t *testing.T, socket, method, path, token, body string) raw {
	t.Helper()
	req, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := rawClient(socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return raw{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestExecutionSocketServesOnlyItsRoutes(t *testing.T) {
	b := setupExecution(t)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/health"},
		{"GET", "/v1/auth/operators"},
		{"POST", "/v1/auth/rotate"},
		{"GET", "/v1/toolbelt/call"},
		{"POST", "/v1/toolbelt/guidance"},
		{"GET", "/v1/toolbelt/call/"},
		{"GET", "/v1//toolbelt/guidance"},
		{"GET", "/"},
	} {
		// Without a token, with an operator's and with the execution's: 404
		// before authentication every time.
		for _, token := range []string{"", b.h.OwnerToken(t), b.a.Token} {
			r := rawOn(t, b.epA.Socket, tc.method, tc.path, token, "")
			if r.status != http.StatusNotFound || r.code() != "not_found" {
				t.Errorf("%s %s = %d %s, want 404 not_found", tc.method, tc.path, r.status, r.code())
			}
		}
	}
	r := rawOn(t, b.epA.Socket, "POST", "/v1/toolbelt/call", "", `{"operation":"emit","input":{}}`)
	if r.status != http.StatusUnauthorized {
		t.Errorf("call without a token = %d", r.status)
	}
	for body, want := range map[string]string{
		`{"operation":"emit","input":{"type":"test.x"},"extra":1}`:            "invalid_request",
		`{"operation":"emit","input":{"type":"test.x","source":"core.host"}}`: "invalid_request",
		`{"operation":"emit"}`:                    "invalid_request",
		`{"operation":"emit","input":null}`:       "invalid_request",
		`{"operation":"emit","input":[1]}`:        "invalid_request",
		`{"operation":"nope.nothing","input":{}}`: "forbidden",
	} {
		r := rawOn(t, b.epA.Socket, "POST", "/v1/toolbelt/call", b.a.Token, body)
		if r.code() != want {
			t.Errorf("call %s = %d %s, want %s", body, r.status, r.code(), want)
		}
		if strings.Contains(string(r.body), b.a.Token) {
			t.Fatalf("a response carries the token")
		}
	}
	r = rawOn(t, b.epA.Socket, "GET", "/v1/toolbelt/serving", b.a.Token, "")
	if r.status != http.StatusUnprocessableEntity || r.code() != "invalid_request" {
		t.Errorf("serving without a capability = %d %s", r.status, r.code())
	}
}

func TestExecutionSocketAuthorityReleased(t *testing.T) {
	b := setupExecution(t)
	ctx := context.Background()
	c := osClient(t, b.epA.Socket, b.epA.TokenFile)
	if _, err := c.Call(ctx, osclient.CallRequest{Operation: "wait", Input: json.RawMessage(`{"types":["test.reply"]}`), RequestID: "w1"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Call(ctx, osclient.CallRequest{Operation: "wait", Input: json.RawMessage(`{"types":["test.reply"]}`), RequestID: "w1"})
	wantCode(t, err, osclient.CodeAuthorityReleased)
	_, err = c.Guidance(ctx)
	wantCode(t, err, osclient.CodeAuthorityReleased)
}
