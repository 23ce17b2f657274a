package oscli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/osclient"
)

// toolbeltDouble is a test double of the daemon's execution toolbelt: it
// speaks the wire protocol of docs/toolbelt.md on a real Unix socket served
// through internal/runs, checks the bearer token against the one it last
// issued, keeps request-ID replays and declarations, and records every
// request it sees. The real toolbelt is tested end to end elsewhere.
type toolbeltDouble struct {
	t         testing.TB
	dirs      *runs.Dirs
	execution string
	ep        runs.Endpoint

	mu        sync.Mutex
	token     string
	seq       int
	seen      []seenRequest
	ops       []osclient.Operation
	guidance  string
	answers   map[string]func(input json.RawMessage) (int, any)
	replays   map[string]replay // by request ID
	declared  bool
	wrongSide bool // answer like the management socket does to an execution token
}

type seenRequest struct {
	Method, Path, Query string
	Bearer              string
	ContentType         string
	IdempotencyKey      string
	Body                map[string]json.RawMessage
}

type replay struct {
	body   string
	result json.RawMessage
}

// newToolbelt serves a double for one execution and issues it a first token.
func newToolbelt(t testing.TB) *toolbeltDouble {
	t.Helper()
	state, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	dirs, err := runs.New(state, runs.Options{TmpBase: state, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	tb := &toolbeltDouble{
		t: t, dirs: dirs, execution: "exe_01TEST",
		guidance: "# Toolbelt\n\nCall emit to report progress.",
		ops: []osclient.Operation{
			{Name: "emit", Summary: "Emit an Event.", InputSchema: json.RawMessage(`{"type":"object","properties":{"type":{"type":"string"},"data":{}},"required":["type"]}`)},
			{Name: "wait", Summary: "Declare a wait.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "declare_outcome", Summary: "Declare the outcome.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "test.echo", Summary: "Echo the input.", Guidance: "Returns its input.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		},
		answers: map[string]func(json.RawMessage) (int, any){},
		replays: map[string]replay{},
	}
	tb.answers["test.echo"] = func(in json.RawMessage) (int, any) {
		return 200, map[string]any{"echo": in}
	}
	tb.rotate()
	if err := dirs.Serve(tb.execution, tb.ep, tb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dirs.CloseAll)
	return tb
}

// rotate issues a fresh token and writes it to the token file, as the host
// does after every claim, recovery and resume. It returns the new token.
func (tb *toolbeltDouble) rotate() string {
	tb.mu.Lock()
	tb.seq++
	tok := fmt.Sprintf("tok-SECRET-%d-xyzzy", tb.seq)
	tb.token = tok
	tb.mu.Unlock()
	ep, err := tb.dirs.Prepare(tb.execution, tok)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.ep = ep
	return tok
}

// tokens returns every token issued so far, to check none leaks.
func (tb *toolbeltDouble) tokens() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for i := 1; i <= tb.seq; i++ {
		out = append(out, fmt.Sprintf("tok-SECRET-%d-xyzzy", i))
	}
	return out
}

// env is the environment the host gives the execution's process.
func (tb *toolbeltDouble) env() map[string]string {
	return map[string]string{osclient.EnvEndpoint: tb.ep.Socket, osclient.EnvTokenFile: tb.ep.TokenFile}
}

// answer sets how the double answers op, under its lock.
func (tb *toolbeltDouble) answer(op string, f func(input json.RawMessage) (int, any)) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.answers[op] = f
}

// requests returns what the double has seen.
func (tb *toolbeltDouble) requests() []seenRequest {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return slices.Clone(tb.seen)
}

// last returns the last request seen.
func (tb *toolbeltDouble) last() seenRequest {
	tb.t.Helper()
	seen := tb.requests()
	if len(seen) == 0 {
		tb.t.Fatal("the toolbelt saw no request")
	}
	return seen[len(seen)-1]
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func ok(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (tb *toolbeltDouble) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	seen := seenRequest{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		ContentType: r.Header.Get("Content-Type"), IdempotencyKey: r.Header.Get("Idempotency-Key"),
	}
	seen.Bearer, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	var raw bytes.Buffer
	raw.ReadFrom(r.Body)
	if raw.Len() > 0 {
		if err := json.Unmarshal(raw.Bytes(), &seen.Body); err != nil {
			tb.t.Errorf("the client sent a body that is not a JSON object: %v", err)
		}
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.seen = append(tb.seen, seen)

	route := r.Method + " " + r.URL.Path
	switch route {
	case "POST /v1/toolbelt/call", "GET /v1/toolbelt/guidance", "GET /v1/toolbelt/serving":
	default:
		fail(w, 404, "not_found", "no such route")
		return
	}
	if tb.wrongSide {
		fail(w, 403, "wrong_credential_class", "an execution token is not accepted here")
		return
	}
	if seen.Bearer != tb.token {
		fail(w, 401, "unauthorized", "the token is not valid")
		return
	}
	switch route {
	case "GET /v1/toolbelt/guidance":
		ok(w, map[string]any{"guidance": tb.guidance, "operations": tb.ops})
		return
	case "GET /v1/toolbelt/serving":
		capability := r.URL.Query().Get("capability")
		serving := []string{}
		for _, op := range tb.ops {
			if slices.Contains(op.Capabilities, capability) {
				serving = append(serving, op.Name)
			}
		}
		ok(w, map[string]any{"capability": capability, "operations": serving})
		return
	}

	if seen.ContentType != "application/json" {
		fail(w, 422, "invalid_request", "the body must be application/json")
		return
	}
	var call struct {
		Operation string          `json:"operation"`
		Input     json.RawMessage `json:"input"`
		RequestID string          `json:"request_id"`
	}
	json.Unmarshal(raw.Bytes(), &call)
	if call.RequestID == "" {
		call.RequestID = seen.IdempotencyKey
	}
	if tb.declared {
		fail(w, 403, "authority_released", "this segment already declared; authority is released")
		return
	}
	if call.RequestID != "" {
		if rp, found := tb.replays[call.RequestID]; found {
			if rp.body != string(call.Input) {
				fail(w, 409, "request_conflict", "the request ID was used with another body")
				return
			}
			ok(w, map[string]any{"operation": call.Operation, "result": rp.result, "replayed": true})
			return
		}
	}
	if !slices.ContainsFunc(tb.ops, func(op osclient.Operation) bool { return op.Name == call.Operation }) {
		fail(w, 403, "forbidden", "forbidden")
		return
	}
	status, result := 200, any(nil)
	switch call.Operation {
	case "emit":
		result = map[string]any{"event_id": fmt.Sprintf("evt_%d", len(tb.seen)), "seq": len(tb.seen)}
	case "wait":
		tb.declared = true
		result = map[string]any{"declared": "wait", "wait": map[string]any{"input": call.Input}}
	case "declare_outcome":
		tb.declared = true
		result = map[string]any{"declared": "outcome"}
	default:
		answer, found := tb.answers[call.Operation]
		if !found {
			tb.t.Errorf("the double has no answer for %s", call.Operation)
			fail(w, 500, "internal", "no answer")
			return
		}
		status, result = answer(call.Input)
	}
	if status != 200 {
		e := result.([2]string)
		fail(w, status, e[0], e[1])
		return
	}
	res, _ := json.Marshal(result)
	if call.RequestID != "" {
		tb.replays[call.RequestID] = replay{body: string(call.Input), result: res}
	}
	ok(w, map[string]any{"operation": call.Operation, "result": json.RawMessage(res), "replayed": false})
}
