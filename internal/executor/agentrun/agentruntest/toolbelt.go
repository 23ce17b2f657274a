// Package agentruntest is test support for the agent executors: a double
// of an execution's toolbelt socket that os mcp can serve an agent from
// (guidance and calls of read_context, emit, wait and declare_outcome),
// the build of the real os program, and the bench both agent executors'
// tests run on (a fake CLI that records what it was given, fired timers,
// the canary and process-group checks).
//
// It is for tests only and must never be used by the daemon or any
// production package; it checks the bearer token it is given and never
// listens on anything but a Unix socket in the test's directory.
package agentruntest

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/api"
)

// Operations are the operations the double grants, by name.
var Operations = []string{"declare_outcome", "emit", "read_context", "wait"}

// WaitResult is the result the double gives a wait: it tells the agent
// to end its turn.
const WaitResult = `{"status":"waiting","instruction":"The Work is now waiting. Stop here: end your turn without calling any other tool."}`

// Call is one call the double received.
type Call struct {
	Operation string
	Input     json.RawMessage
}

// Toolbelt is a double of one execution's toolbelt socket.
type Toolbelt struct {
	// Socket is the socket's path.
	Socket string

	token   string
	mu      sync.Mutex
	calls   []Call
	bad     int
	refused map[string]bool
}

// Refuse makes every later call of op a refusal (403 forbidden), as a
// toolbelt refuses a call its checks do not allow.
func (tb *Toolbelt) Refuse(op string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.refused == nil {
		tb.refused = map[string]bool{}
	}
	tb.refused[op] = true
}

// NewToolbelt serves a double on a Unix socket at path that accepts only
// token as its bearer.
func NewToolbelt(t testing.TB, path, token string) *Toolbelt {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	tb := &Toolbelt{Socket: path, token: token}
	srv := &http.Server{Handler: tb}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return tb
}

func (tb *Toolbelt) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+tb.token {
		tb.mu.Lock()
		tb.bad++
		tb.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: api.ErrorBody{Code: "unauthorized", Message: "bad token"}})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/toolbelt/guidance":
		g := api.Guidance{Guidance: "The tools are this execution's toolbelt."}
		for _, name := range Operations {
			g.Operations = append(g.Operations, api.Operation{Name: name, Summary: "The " + name + " operation.", InputSchema: json.RawMessage(`{"type":"object"}`), Capabilities: []string{}})
		}
		json.NewEncoder(w).Encode(g)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/toolbelt/call":
		var req api.CallRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !slices.Contains(Operations, req.Operation) {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: api.ErrorBody{Code: "operation_not_granted", Message: "not granted"}})
			return
		}
		tb.mu.Lock()
		tb.calls = append(tb.calls, Call{Operation: req.Operation, Input: req.Input})
		refused := tb.refused[req.Operation]
		tb.mu.Unlock()
		if refused {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: api.ErrorBody{Code: "forbidden", Message: "the toolbelt refused this call"}})
			return
		}
		result := json.RawMessage(`{"ok":true}`)
		switch req.Operation {
		case "wait":
			result = json.RawMessage(WaitResult)
		case "read_context":
			result = json.RawMessage(`{"work":{"id":"work-1"},"inputs":[]}`)
		}
		json.NewEncoder(w).Encode(api.CallResponse{Operation: req.Operation, Result: result})
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(api.ErrorEnvelope{Error: api.ErrorBody{Code: "not_found", Message: "no such route"}})
	}
}

// Calls returns the calls so far, oldest first.
func (tb *Toolbelt) Calls() []Call {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return slices.Clone(tb.calls)
}

// Called returns the operations called so far, in order.
func (tb *Toolbelt) Called() []string {
	var ops []string
	for _, c := range tb.Calls() {
		ops = append(ops, c.Operation)
	}
	return ops
}

// Refused counts requests that carried another token.
func (tb *Toolbelt) Refused() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.bad
}

// BuildOS builds the real os program into dir/os.
func BuildOS(t testing.TB, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "os")
	os.Remove(out) // a placeholder of the test's own
	cmd := exec.Command("go", "build", "-o", out, "github.com/open-conduit/open-conduit/cmd/os")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build os: %v\n%s", err, b)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(errors.Join(errors.New("the os program was not built"), err))
	}
	return out
}
