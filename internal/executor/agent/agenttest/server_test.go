package agenttest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
)

// These tests speak to the servers with Go's own client, so they run
// where the CLIs are not installed: each right request gets the stream a
// CLI expects and no complaint, and each wrong one (the negative
// controls) is complained about.

// complaints collects what a server reports instead of failing the test.
type complaints struct {
	mu  sync.Mutex
	got []string
}

func (c *complaints) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, fmt.Sprintf(format, args...))
}

func (c *complaints) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

type event struct {
	name string
	data map[string]any
}

// post sends body to url and reads the answer's server-sent events.
func post(t *testing.T, url string, header map[string]string, body any) (int, []event) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	var events []event
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			if m["type"] != name {
				t.Errorf("event %s carries type %v", name, m["type"])
			}
			events = append(events, event{name, m})
		}
	}
	return resp.StatusCode, events
}

func names(events []event) string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return strings.Join(out, " ")
}

var anthropicHeader = map[string]string{"x-api-key": apiKey, "anthropic-version": "2023-06-01"}

func anthropicBody(model string, tools []string, messages ...any) map[string]any {
	var ts []any
	for _, name := range tools {
		ts = append(ts, map[string]any{"name": name, "input_schema": map[string]any{"type": "object"}})
	}
	return map[string]any{"model": model, "stream": true, "max_tokens": 100, "tools": ts, "messages": messages}
}

func TestAnthropicStreamsTheScript(t *testing.T) {
	var c complaints
	tools := []string{"mcp__memory__read_graph", "mcp__memory__create_entities"}
	srv := agenttest.Anthropic(t, agenttest.Options{APIKey: apiKey, Model: "m", Tools: tools, Errorf: c.Errorf,
		Script: []agenttest.Step{agenttest.Call("mcp__memory__create_entities", entity), agenttest.Reply("done")}})
	user := map[string]any{"role": "user", "content": "remember"}

	status, events := post(t, srv.URL+"/v1/messages?beta=true", anthropicHeader, anthropicBody("m", tools, user))
	if want := "message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"; status != 200 || names(events) != want {
		t.Fatalf("status %d, events %q; want %q", status, names(events), want)
	}
	block := events[1].data["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "mcp__memory__create_entities" {
		t.Errorf("content block %v, want a tool_use of create_entities", block)
	}
	var input strings.Builder
	for _, e := range events[2:4] {
		d := e.data["delta"].(map[string]any)
		if d["type"] != "input_json_delta" {
			t.Errorf("delta %v, want input_json_delta", d)
		}
		input.WriteString(d["partial_json"].(string))
	}
	want, _ := json.Marshal(entity)
	if input.String() != string(want) {
		t.Errorf("input %s, want %s", input.String(), want)
	}
	if d := events[5].data["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Errorf("message_delta %v, want stop_reason tool_use", d)
	}
	if _, ok := events[5].data["usage"].(map[string]any)["output_tokens"]; !ok {
		t.Errorf("message_delta %v carries no usage", events[5].data)
	}

	id := block["id"].(string)
	call := map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": block["name"], "input": entity}}}
	result := map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
		"content": []any{map[string]any{"type": "text", "text": "created conduit"}}, "is_error": true}}}
	_, events = post(t, srv.URL+"/v1/messages", anthropicHeader, anthropicBody("m", tools, user, call, result))
	if d := events[2].data["delta"].(map[string]any); d["type"] != "text_delta" || d["text"] != "done" {
		t.Errorf("the reply's delta %v, want the text done", d)
	}
	if d := events[4].data["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Errorf("message_delta %v, want stop_reason end_turn", d)
	}
	if got, ok := srv.Requests()[1].ToolResult(id); !ok || got.Text != "created conduit" || !got.IsError {
		t.Errorf("the recorded result %+v, %v; want the error result sent", got, ok)
	}
	if !srv.Done() || len(c.list()) != 0 {
		t.Errorf("done %v, complaints %q; want done, none", srv.Done(), c.list())
	}
}

func TestAnthropicComplainsAboutWhatNoClientSends(t *testing.T) {
	tools := []string{"mcp__memory__read_graph"}
	user := map[string]any{"role": "user", "content": "hi"}
	good := anthropicBody("m", tools, user)
	for name, c := range map[string]struct {
		path   string
		header map[string]string
		body   map[string]any
		script []agenttest.Step
		want   string
	}{
		"no API key":        {"/v1/messages", map[string]string{"anthropic-version": "1"}, good, nil, "without the API key"},
		"another key":       {"/v1/messages", map[string]string{"x-api-key": "sk-other", "anthropic-version": "1"}, good, nil, "without the API key"},
		"another path":      {"/v1/complete", anthropicHeader, good, nil, "unexpected POST /v1/complete"},
		"no version":        {"/v1/messages", map[string]string{"x-api-key": apiKey}, good, nil, "anthropic-version"},
		"not streaming":     {"/v1/messages", anthropicHeader, map[string]any{"model": "m", "messages": []any{user}}, nil, "stream true"},
		"another model":     {"/v1/messages", anthropicHeader, anthropicBody("other", tools, user), nil, `model "other"`},
		"other tools":       {"/v1/messages", anthropicHeader, anthropicBody("m", []string{"Bash", "mcp__memory__read_graph"}, user), nil, "offered tools"},
		"no tools":          {"/v1/messages", anthropicHeader, anthropicBody("m", nil, user), nil, "offered tools"},
		"past the script":   {"/v1/messages", anthropicHeader, good, []agenttest.Step{}, "after the script's 0 steps"},
		"an unoffered call": {"/v1/messages", anthropicHeader, good, []agenttest.Step{agenttest.Call("mcp__memory__delete_entities", nil)}, "does not offer"},
	} {
		t.Run(name, func(t *testing.T) {
			var got complaints
			script := c.script
			if script == nil {
				script = []agenttest.Step{agenttest.Reply("ok")}
			}
			srv := agenttest.Anthropic(t, agenttest.Options{APIKey: apiKey, Model: "m", Tools: tools, Script: script, Errorf: got.Errorf})
			post(t, srv.URL+c.path, c.header, c.body)
			if l := got.list(); len(l) == 0 || !strings.Contains(strings.Join(l, "\n"), c.want) {
				t.Errorf("complaints %q, want one saying %q", l, c.want)
			}
		})
	}
}

// The request after a call must carry its result.
func TestServersComplainAboutAMissingResult(t *testing.T) {
	var c complaints
	tools := []string{"mcp__memory__read_graph"}
	srv := agenttest.Anthropic(t, agenttest.Options{APIKey: apiKey, Model: "m", Tools: tools, Errorf: c.Errorf,
		Script: []agenttest.Step{agenttest.Call("mcp__memory__read_graph", nil), agenttest.Reply("done")}})
	user := map[string]any{"role": "user", "content": "hi"}
	post(t, srv.URL+"/v1/messages", anthropicHeader, anthropicBody("m", tools, user))
	if l := c.list(); len(l) != 0 {
		t.Fatalf("complaints %q about a right request", l)
	}
	post(t, srv.URL+"/v1/messages", anthropicHeader, anthropicBody("m", tools, user))
	if l := c.list(); len(l) != 1 || !strings.Contains(l[0], "no result of call") {
		t.Errorf("complaints %q, want one about the missing result", l)
	}

	var o complaints
	osrv := agenttest.OpenAI(t, agenttest.Options{APIKey: apiKey, Model: "m", Tools: tools, Errorf: o.Errorf,
		Script: []agenttest.Step{agenttest.Call("mcp__memory__read_graph", nil), agenttest.Reply("done")}})
	body := openAIBody("m", "hi")
	post(t, osrv.URL+"/v1/responses", openAIHeader, body)
	post(t, osrv.URL+"/v1/responses", openAIHeader, body)
	if l := o.list(); len(l) != 1 || !strings.Contains(l[0], "no result of call") {
		t.Errorf("complaints %q, want one about the missing result", l)
	}
}

var openAIHeader = map[string]string{"Authorization": "Bearer " + apiKey}

// openAIBody is a request offering memory's read_graph inside its
// namespace, as Codex sends an MCP tool.
func openAIBody(model, prompt string, more ...any) map[string]any {
	input := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}}}
	return map[string]any{"model": model, "stream": true, "input": append(input, more...), "tools": []any{
		map[string]any{"type": "namespace", "name": "mcp__memory", "tools": []any{map[string]any{"type": "function", "name": "read_graph"}}},
	}}
}

func TestOpenAIStreamsTheScript(t *testing.T) {
	var c complaints
	srv := agenttest.OpenAI(t, agenttest.Options{APIKey: apiKey, Model: "m", Tools: []string{"mcp__memory__read_graph"}, Errorf: c.Errorf,
		Script: []agenttest.Step{agenttest.Call("mcp__memory__read_graph", nil), agenttest.Reply("done")}})

	status, events := post(t, srv.URL+"/v1/responses", openAIHeader, openAIBody("m", "hi"))
	if want := "response.created response.output_item.added response.output_item.done response.completed"; status != 200 || names(events) != want {
		t.Fatalf("status %d, events %q; want %q", status, names(events), want)
	}
	item := events[2].data["item"].(map[string]any)
	if item["type"] != "function_call" || item["namespace"] != "mcp__memory" || item["name"] != "read_graph" || item["arguments"] != "{}" {
		t.Errorf("item %v, want a function_call of read_graph in namespace mcp__memory", item)
	}
	usage, _ := events[3].data["response"].(map[string]any)["usage"].(map[string]any)
	if usage["total_tokens"] == nil {
		t.Errorf("response.completed %v carries no usage", events[3].data)
	}

	id := item["call_id"].(string)
	_, events = post(t, srv.URL+"/v1/responses", openAIHeader, openAIBody("m", "hi",
		map[string]any{"type": "function_call", "call_id": id, "name": "read_graph", "namespace": "mcp__memory", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": id, "output": "the graph"}))
	if want := "response.created response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.output_item.done response.completed"; names(events) != want {
		t.Fatalf("events %q, want %q", names(events), want)
	}
	if d := events[3].data["delta"]; d != "done" {
		t.Errorf("the text delta %v, want done", d)
	}
	got, ok := srv.Requests()[1].ToolResult(id)
	if !ok || got.Text != "the graph" || !srv.Requests()[1].Has("tool_call", "{}") {
		t.Errorf("the recorded result %+v, %v; want the output sent", got, ok)
	}
	if !srv.Done() || len(c.list()) != 0 {
		t.Errorf("done %v, complaints %q; want done, none", srv.Done(), c.list())
	}
}

func TestOpenAIComplainsAboutWhatNoClientSends(t *testing.T) {
	good := openAIBody("m", "hi")
	for name, c := range map[string]struct {
		path   string
		header map[string]string
		body   map[string]any
		tools  []string
		script []agenttest.Step
		want   string
	}{
		"no API key":        {"/v1/responses", nil, good, nil, nil, "without the API key"},
		"the key as x-api":  {"/v1/responses", map[string]string{"x-api-key": apiKey}, good, nil, nil, "without the API key"},
		"another path":      {"/v1/chat/completions", openAIHeader, good, nil, nil, "unexpected POST /v1/chat/completions"},
		"not streaming":     {"/v1/responses", openAIHeader, map[string]any{"model": "m", "input": []any{}}, nil, nil, "stream true"},
		"another model":     {"/v1/responses", openAIHeader, openAIBody("other", "hi"), nil, nil, `model "other"`},
		"other tools":       {"/v1/responses", openAIHeader, good, []string{"mcp__memory__read_graph", "exec_command"}, nil, "offered tools"},
		"past the script":   {"/v1/responses", openAIHeader, good, nil, []agenttest.Step{}, "after the script's 0 steps"},
		"an unoffered call": {"/v1/responses", openAIHeader, good, nil, []agenttest.Step{agenttest.Call("mcp__memory__open_nodes", nil)}, "does not offer"},
	} {
		t.Run(name, func(t *testing.T) {
			var got complaints
			script, tools := c.script, c.tools
			if script == nil {
				script = []agenttest.Step{agenttest.Reply("ok")}
			}
			if tools == nil {
				tools = []string{"mcp__memory__read_graph"}
			}
			srv := agenttest.OpenAI(t, agenttest.Options{APIKey: apiKey, Model: "m", Tools: tools, Script: script, Errorf: got.Errorf})
			post(t, srv.URL+c.path, c.header, c.body)
			if l := got.list(); len(l) == 0 || !strings.Contains(strings.Join(l, "\n"), c.want) {
				t.Errorf("complaints %q, want one saying %q", l, c.want)
			}
		})
	}
}

// A held step is answered only once released; Await tells when the
// request waiting for it has come.
func TestAHeldStepWaitsForItsRelease(t *testing.T) {
	var c complaints
	release := make(chan struct{})
	srv := agenttest.Anthropic(t, agenttest.Options{APIKey: apiKey, Model: "m", Errorf: c.Errorf,
		Script: []agenttest.Step{agenttest.Reply("done").Held(release)}})
	answered := make(chan []event)
	go func() {
		var events []event
		defer func() { answered <- events }() // also when post fails
		_, events = post(t, srv.URL+"/v1/messages", anthropicHeader, anthropicBody("m", nil, map[string]any{"role": "user", "content": "hi"}))
	}()
	if got := srv.Await(t, 1, 2*time.Minute); len(got) != 1 {
		t.Fatalf("Await returned %d requests, want 1", len(got))
	}
	select {
	case <-answered:
		t.Fatal("the held step was answered before its release")
	default:
	}
	close(release)
	if events := <-answered; len(events) != 6 || events[2].data["delta"].(map[string]any)["text"] != "done" {
		t.Errorf("after the release: %q", names(events))
	}
	if l := c.list(); len(l) != 0 {
		t.Errorf("complaints %q", l)
	}
}
