package claudecode

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

const session = "6f1c2a4e-0b7d-4c1e-9f3a-2d5e8b7c1a90"

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

func checkInit(t *testing.T, r Result) {
	t.Helper()
	if !r.Init || r.SessionID != session || r.Model != "claude-sonnet-4-5" {
		t.Fatalf("init: %+v", r)
	}
	if strings.Join(r.Tools, ",") != "Task,Read,mcp__os__emit,mcp__os__wait" {
		t.Fatalf("tools: %q", r.Tools)
	}
	if len(r.MCPServers) != 1 || r.MCPServers[0] != (MCPServer{Name: "os", Status: "connected"}) {
		t.Fatalf("mcp servers: %+v", r.MCPServers)
	}
}

func checkDone(t *testing.T, r Result) {
	t.Helper()
	want := Usage{InputTokens: 120, OutputTokens: 45, CacheCreationInputTokens: 30, CacheReadInputTokens: 400}
	if !r.Done || r.Subtype != "success" || r.IsError || r.Text != "Done: emitted a note." || r.TextCut ||
		r.NumTurns != 2 || r.Usage != want || r.CostUSD != 0.0123 {
		t.Fatalf("result: %+v", r)
	}
}

func TestParseWellFormed(t *testing.T) {
	r := parseFile(t, "wellformed.jsonl", 0)
	checkInit(t, r)
	checkDone(t, r)
	if r.Messages != 3 || r.Unknown != 0 || r.Malformed != 0 || r.LineStats != (agent.LineStats{Lines: 5}) {
		t.Fatalf("counts: %+v", r)
	}
}

func TestParseTruncated(t *testing.T) {
	r := parseFile(t, "truncated.jsonl", 0)
	checkInit(t, r)
	if r.Done || !r.Truncated || r.Lines != 4 || r.Malformed != 0 {
		t.Fatalf("a stream cut inside its result line has no result: %+v", r)
	}
}

func TestParseMalformed(t *testing.T) {
	r := parseFile(t, "malformed.jsonl", 0)
	checkInit(t, r)
	checkDone(t, r)
	if r.Malformed != 4 || r.Messages != 3 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestParseOversized(t *testing.T) {
	r := parseFile(t, "oversized.jsonl", 4096)
	checkInit(t, r)
	checkDone(t, r)
	if r.Oversized != 1 || r.Messages != 3 || r.Lines != 5 {
		t.Fatalf("counts: %+v", r)
	}
	if r := parseFile(t, "oversized.jsonl", 0); r.Oversized != 0 || r.Messages != 4 {
		t.Fatalf("under the default bound the line is read: %+v", r)
	}
}

func TestParseUnknownTypes(t *testing.T) {
	r := parseFile(t, "unknown.jsonl", 0)
	checkInit(t, r)
	checkDone(t, r)
	if r.Unknown != 3 || r.Malformed != 0 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestParseNoResult(t *testing.T) {
	r := parseFile(t, "noresult.jsonl", 0)
	checkInit(t, r)
	if r.Done || r.Truncated || r.Messages != 2 {
		t.Fatalf("no result: %+v", r)
	}
}

func TestParseErrorResult(t *testing.T) {
	r := parseFile(t, "maxturns.jsonl", 0)
	if !r.Done || !r.IsError || r.Subtype != "error_max_turns" || r.NumTurns != 3 || r.Text != "" ||
		r.Usage != (Usage{InputTokens: 1, OutputTokens: 2}) || r.SessionID != session {
		t.Fatalf("error result: %+v", r)
	}
}

func TestParseEmpty(t *testing.T) {
	r, err := Parse(bytes.NewReader(nil), 0)
	if err != nil || r.Init || r.Done || r.SessionID != "" || r.Lines != 0 {
		t.Fatalf("empty: %+v %v", r, err)
	}
}

func TestResultBounds(t *testing.T) {
	long := strings.Repeat("é", MaxResultText) // 2 bytes a rune
	var p Parser
	p.Line([]byte(`{"type":"result","result":"` + long + `","session_id":"` + strings.Repeat("s", 300) + `"}`))
	r := p.Result()
	if !r.TextCut || len(r.Text) > MaxResultText || !strings.HasPrefix(long, r.Text) || r.SessionID != "" {
		t.Fatalf("bounds: cut=%v len=%d session=%q", r.TextCut, len(r.Text), r.SessionID)
	}
	p.Line([]byte(`{"type":"result","result":{"not":"text"}}`))
	if r := p.Result(); r.Text != "" || !r.Done {
		t.Fatalf("non-string result: %+v", r)
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
		if len(r.Text) > MaxResultText || len(r.SessionID) > maxIDLen || len(r.Tools) > maxTools || len(r.MCPServers) > maxServers {
			t.Fatalf("unbounded result: %d %d %d %d", len(r.Text), len(r.SessionID), len(r.Tools), len(r.MCPServers))
		}
		if r.Lines+r.Oversized > bytes.Count(b, []byte{'\n'}) {
			t.Fatalf("more lines than newlines")
		}
	})
}

// TestParseFollowsToolCalls: a tool_result without is_error names its
// tool as succeeded; an error result, an unanswered call and a result
// answering no call do not.
func TestParseFollowsToolCalls(t *testing.T) {
	stream := `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"mcp__os__emit","input":{}},{"type":"tool_use","id":"t2","name":"mcp__os__wait","input":{}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"refused"}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":"stray"}]}}
{"type":"user","message":{"content":"plain text"}}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t3","name":"mcp__os__wait","input":{}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t3","content":"parked"}]}}
{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t4","name":"mcp__os__declare_outcome","input":{}}]}}
`
	res, err := Parse(strings.NewReader(stream), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.SucceededTools, ","); got != "mcp__os__emit,mcp__os__wait" || res.ToolCalls != 4 || res.Malformed != 0 {
		t.Errorf("succeeded %q, calls %d, malformed %d", got, res.ToolCalls, res.Malformed)
	}
}
