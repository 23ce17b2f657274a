package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Step is one answer of the scripted model: either a call of a tool or a
// text reply that ends the turn.
type Step struct {
	// Tool is the tool to call, named as the CLI offers it to Claude
	// (mcp__SERVER__TOOL); for Codex the server finds the namespace
	// (mcp__SERVER) and the tool's own name in the request's tools.
	Tool string
	// Input is the tool's input, any value encoding/json encodes as an
	// object; nil is {}.
	Input any
	// Text is the reply of a step without Tool.
	Text string
	// Hold, when not nil, keeps the answer back until it is closed (or
	// the client goes away), so that a test can act while the agent waits
	// on its model: kill the daemon, cancel the execution.
	Hold <-chan struct{}
}

// Held is st, answered only once release is closed.
func (st Step) Held(release <-chan struct{}) Step { st.Hold = release; return st }

// held waits for the step's release; false when the client went first.
func (st Step) held(r *http.Request) bool {
	if st.Hold == nil {
		return true
	}
	select {
	case <-st.Hold:
		return true
	case <-r.Context().Done():
		return false
	}
}

// Call is a step calling tool with input.
func Call(tool string, input any) Step { return Step{Tool: tool, Input: input} }

// Reply is a step answering text and ending the turn.
func Reply(text string) Step { return Step{Text: text} }

// Options configure a scripted server.
type Options struct {
	// APIKey is the key every request must carry (x-api-key for
	// Anthropic, Authorization: Bearer for OpenAI). Required.
	APIKey string
	// Model is the model every request of the conversation must name.
	// Required.
	Model string
	// Tools, when not nil, is the exact set of tools every request of the
	// conversation must offer, named as Request.Tools names them.
	Tools []string
	// Script is the conversation: each request of it gets the next step.
	Script []Step
	// Errorf reports a request no real client sends, a request after the
	// script's end, or one that broke Tools; the default is the test's
	// Errorf. A negative control passes its own.
	Errorf func(format string, args ...any)
}

// Item is one entry of a request's conversation, in the order sent.
type Item struct {
	// Role is "user" or "assistant" ("developer"/"system" where sent).
	Role string
	// Kind is "text", "tool_call" or "tool_result".
	Kind string
	// Text is a text's text, a tool call's input (JSON) or a tool
	// result's text.
	Text string
	// CallID ties a tool result to its call; Name is a call's tool.
	CallID, Name string
	// IsError is a tool result's error flag (Anthropic only).
	IsError bool
}

// Request is one request of the conversation as the server received it.
type Request struct {
	// Step is the index of the script's step that answered it.
	Step int
	// Model is the model it named.
	Model string
	// Tools are the names of the tools it offered, sorted; a tool inside
	// a Codex namespace is named NAMESPACE__TOOL, as Claude names it.
	Tools []string
	// Session is the CLI's session id as the request names it (Claude
	// Code's metadata.user_id, Codex's client_metadata.thread_id).
	Session string
	// System is its system prompt (Anthropic's system, OpenAI's
	// instructions), its blocks joined by newlines. Codex sends no
	// instructions: its prompt is the first item, role "developer".
	System string
	// Items is its conversation, oldest first.
	Items []Item
	// Body is the request's body as sent.
	Body []byte
}

// ToolResult returns the result the request carries for callID.
func (r Request) ToolResult(callID string) (Item, bool) {
	for _, it := range r.Items {
		if it.Kind == "tool_result" && it.CallID == callID {
			return it, true
		}
	}
	return Item{}, false
}

// Has reports whether an item of kind holds text.
func (r Request) Has(kind, text string) bool {
	return slices.ContainsFunc(r.Items, func(it Item) bool {
		return it.Kind == kind && strings.Contains(it.Text, text)
	})
}

// Side is a request the CLI sent beside the conversation (a probe, a
// title, a token count): answered, recorded, never advancing the script.
type Side struct {
	Method, Path, Why string
}

// Server is a scripted model server on 127.0.0.1.
type Server struct {
	// URL is the server's base, http://127.0.0.1:PORT, without /v1.
	URL string

	opts   Options
	vendor vendor

	// reportMu orders reports before the end of the test: a handler still
	// running when the test's cleanup has closed the server reports
	// nothing (the testing package panics on a report after a test).
	reportMu sync.Mutex
	ended    bool
	logf     func(format string, args ...any)
	errorf   func(format string, args ...any)

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a request is recorded
	next     int
	pending  string // the call the next request must answer
	calls    []string
	requests []Request
	side     []Side
}

// vendor is what differs between the two APIs.
type vendor interface {
	// serve answers one request, or says why it is refused.
	serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte)
}

func start(t testing.TB, opts Options, v vendor) *Server {
	t.Helper()
	if opts.APIKey == "" || opts.Model == "" {
		t.Fatal("agenttest: Options need an APIKey and a Model")
	}
	if opts.Errorf == nil {
		opts.Errorf = t.Errorf
	}
	s := &Server{opts: opts, vendor: v, logf: t.Logf, errorf: opts.Errorf, changed: make(chan struct{})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	go srv.Serve(l)
	t.Cleanup(func() {
		srv.Close()
		s.reportMu.Lock()
		s.ended = true
		s.reportMu.Unlock()
	})
	s.URL = "http://" + l.Addr().String()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		s.refuse(w, http.StatusBadRequest, "reading %s %s: %v", r.Method, r.URL.Path, err)
		return
	}
	s.report(s.logf, "agenttest: %s %s (%d bytes)", r.Method, r.URL.RequestURI(), len(body))
	s.vendor.serve(s, w, r, body)
}

func (s *Server) report(f func(string, ...any), format string, args ...any) {
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	if !s.ended {
		f(format, args...)
	}
}

// fail reports a broken expectation through Options.Errorf.
func (s *Server) fail(format string, args ...any) { s.report(s.errorf, format, args...) }

// refuse reports a request no real client sends and answers it with an
// error status, which the CLIs show as an API error.
func (s *Server) refuse(w http.ResponseWriter, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.fail("agenttest: %s", msg)
	http.Error(w, "agenttest: "+msg, status)
}

func (s *Server) sideRequest(r *http.Request, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.side = append(s.side, Side{Method: r.Method, Path: r.URL.Path, Why: why})
}

// advance records req and returns the step that answers it, with the id a
// call of it gets. ok is false (and the failure reported) when the script
// has ended.
func (s *Server) advance(req Request, idPrefix string) (step Step, callID string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req.Step = s.next
	sort.Strings(req.Tools)
	if s.opts.Tools != nil {
		want := slices.Sorted(slices.Values(s.opts.Tools))
		if !slices.Equal(req.Tools, want) {
			s.fail("agenttest: request %d offered tools %q, want exactly %q", len(s.requests), req.Tools, want)
		}
	}
	if s.pending != "" {
		if _, ok := req.ToolResult(s.pending); !ok {
			s.fail("agenttest: request %d carries no result of call %s", len(s.requests), s.pending)
		}
		s.pending = ""
	}
	s.requests = append(s.requests, req)
	close(s.changed)
	s.changed = make(chan struct{})
	if s.next >= len(s.opts.Script) {
		s.fail("agenttest: request %d came after the script's %d steps", len(s.requests)-1, len(s.opts.Script))
		return Step{}, "", false
	}
	step = s.opts.Script[s.next]
	s.next++
	if step.Tool != "" {
		callID = fmt.Sprintf("%s%03d", idPrefix, s.next)
		s.pending = callID
		s.calls = append(s.calls, callID)
	}
	return step, callID, true
}

// Requests returns the conversation's requests so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Await returns the conversation's requests once there are at least n,
// failing the test when they do not come within bound. It is called from
// the test's goroutine; with a held step it tells that the agent is
// waiting on that step's answer.
func (s *Server) Await(t testing.TB, n int, bound time.Duration) []Request {
	t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, changed := len(s.requests), s.changed
		s.mu.Unlock()
		if got >= n {
			return s.Requests()
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("agenttest: %d requests within %v, want %d", got, bound, n)
		}
	}
}

// SideRequests returns the side requests so far.
func (s *Server) SideRequests() []Side {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.side)
}

// CallIDs returns the ids of the tool calls the server made, in order.
func (s *Server) CallIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Done reports whether every step of the script was served.
func (s *Server) Done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next == len(s.opts.Script)
}

// input encodes a step's input as a JSON object.
func (st Step) input() (string, error) {
	if st.Input == nil {
		return "{}", nil
	}
	b, err := json.Marshal(st.Input)
	if err != nil {
		return "", err
	}
	if len(b) == 0 || b[0] != '{' {
		return "", fmt.Errorf("the input of %s is not a JSON object", st.Tool)
	}
	return string(b), nil
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w: w}
}

func (e sse) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err) // only maps and slices of plain values are sent
	}
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// textOf flattens a content value (a string, or a list of blocks with
// "text") to its text.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			parts = append(parts, b.Text)
		}
		return strings.Join(parts, "\n")
	}
	return string(raw)
}

type obj = map[string]any
