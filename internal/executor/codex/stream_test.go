package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const thread = "0199a213-81c0-7800-8aa1-bbab2a035a53"

func parseFile(t *testing.T, name string, maxLine int) Result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Parse(f, maxLine)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkDone(t *testing.T, r Result) {
	t.Helper()
	if r.ThreadID != thread || !r.Done() || r.Failed || r.Message != "Answered the issue." || r.MessageCut ||
		r.Usage != (Usage{InputTokens: 1200, CachedInputTokens: 200, OutputTokens: 345}) ||
		r.TurnsStarted != 1 || r.TurnsCompleted != 1 {
		t.Fatalf("result: %+v", r)
	}
	if r.Items["agent_message"] != 2 || r.Items["mcp_tool_call"] != 2 || r.Items["reasoning"] != 1 ||
		r.MCPCalls["completed"] != 1 || r.MCPCalls["failed"] != 1 {
		t.Fatalf("items: %v %v", r.Items, r.MCPCalls)
	}
}

func TestParseWellFormed(t *testing.T) {
	r := parseFile(t, "wellformed.jsonl", 0)
	checkDone(t, r)
	if r.Unknown != 0 || r.Malformed != 0 || r.Lines != 9 || r.Truncated || r.Oversized != 0 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestParseTruncated(t *testing.T) {
	r := parseFile(t, "truncated.jsonl", 0)
	if r.ThreadID != thread || r.Done() || !r.Truncated || r.Message != "Answered the issue." || r.Usage != (Usage{}) {
		t.Fatalf("a stream cut inside turn.completed has no completed turn: %+v", r)
	}
}

func TestParseMalformed(t *testing.T) {
	r := parseFile(t, "malformed.jsonl", 0)
	checkDone(t, r)
	if r.Malformed != 4 {
		t.Fatalf("malformed %d", r.Malformed)
	}
}

func TestParseOversized(t *testing.T) {
	r := parseFile(t, "oversized.jsonl", 4096)
	checkDone(t, r)
	if r.Oversized != 1 || r.Items["command_execution"] != 0 {
		t.Fatalf("counts: %+v", r)
	}
	if r := parseFile(t, "oversized.jsonl", 0); r.Oversized != 0 || r.Items["command_execution"] != 1 {
		t.Fatalf("under the default bound the line is read: %+v", r)
	}
}

func TestParseUnknownTypes(t *testing.T) {
	r := parseFile(t, "unknown.jsonl", 0)
	checkDone(t, r)
	if r.Unknown != 3 || r.Malformed != 0 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestParseNoResult(t *testing.T) {
	r := parseFile(t, "noresult.jsonl", 0)
	if r.ThreadID != thread || r.Done() || r.Truncated || r.Message != "Working on it." || r.TurnsStarted != 1 {
		t.Fatalf("no result: %+v", r)
	}
}

func TestParseFailed(t *testing.T) {
	r := parseFile(t, "failed.jsonl", 0)
	if !r.Failed || r.Done() || r.Error != "unexpected status 401 Unauthorized" || r.ThreadID != thread {
		t.Fatalf("failed: %+v", r)
	}
}

func TestParseEmpty(t *testing.T) {
	r, err := Parse(bytes.NewReader(nil), 0)
	if err != nil || r.Done() || r.ThreadID != "" || r.Lines != 0 {
		t.Fatalf("empty: %+v %v", r, err)
	}
}

func TestUsageSumsTurns(t *testing.T) {
	var p Parser
	for range 2 {
		p.Line([]byte(`{"type":"turn.started"}`))
		p.Line([]byte(`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":1,"output_tokens":2}}`))
	}
	if r := p.Result(); r.Usage != (Usage{InputTokens: 20, CachedInputTokens: 2, OutputTokens: 4}) || !r.Done() {
		t.Fatalf("usage %+v", r)
	}
}

func TestBounds(t *testing.T) {
	var p Parser
	long := strings.Repeat("é", MaxMessage)
	p.Line([]byte(`{"type":"item.completed","item":{"type":"agent_message","text":"` + long + `"}}`))
	p.Line([]byte(`{"type":"thread.started","thread_id":"` + strings.Repeat("t", 300) + `"}`))
	for i := range 100 {
		p.Line([]byte(`{"type":"item.completed","item":{"type":"kind` + strings.Repeat("x", i) + `"}}`))
	}
	r := p.Result()
	if !r.MessageCut || len(r.Message) > MaxMessage || !strings.HasPrefix(long, r.Message) || r.ThreadID != "" || len(r.Items) > maxKinds+1 {
		t.Fatalf("bounds: cut=%v len=%d thread=%q kinds=%d", r.MessageCut, len(r.Message), r.ThreadID, len(r.Items))
	}
}

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(bytes.NewReader(b), 512)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Message) > MaxMessage || len(r.Error) > MaxErrorLen || len(r.ThreadID) > maxIDLen ||
			len(r.Items) > maxKinds+1 || len(r.MCPCalls) > maxKinds+1 {
			t.Fatalf("unbounded result")
		}
		if r.Lines+r.Oversized > bytes.Count(b, []byte{'\n'}) {
			t.Fatalf("more lines than newlines")
		}
	})
}

// TestParseFollowsMCPCalls: a completed mcp_tool_call without an error
// names its tool as succeeded; a failed one, or one carrying an error or
// an error result, does not.
func TestParseFollowsMCPCalls(t *testing.T) {
	stream := `{"type":"item.completed","item":{"id":"i1","type":"mcp_tool_call","server":"os","tool":"emit","status":"completed","error":null,"result":{"content":[]}}}
{"type":"item.completed","item":{"id":"i2","type":"mcp_tool_call","server":"os","tool":"wait","status":"failed","error":{"message":"refused"}}}
{"type":"item.completed","item":{"id":"i3","type":"mcp_tool_call","server":"os","tool":"wait","status":"completed","result":{"is_error":true}}}
{"type":"item.completed","item":{"id":"i4","type":"mcp_tool_call","server":"os","tool":"wait","status":"completed","error":{"message":"x"}}}
{"type":"item.completed","item":{"id":"i5","type":"mcp_tool_call","server":"os","tool":"wait","status":"completed"}}
`
	res, err := Parse(strings.NewReader(stream), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.SucceededTools, ","); got != "mcp__os__emit,mcp__os__wait" || res.MCPCalls["completed"] != 4 {
		t.Errorf("succeeded %q, calls %v", got, res.MCPCalls)
	}
}
