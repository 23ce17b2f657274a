package agenttest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
)

var record = flag.Bool("record", false, "record the CLIs' streams into testdata")

const apiKey = "sk-agenttest-canary-0123456789"

// The reference memory server's tools, as both CLIs name them.
var memoryTools = []string{
	"mcp__memory__add_observations", "mcp__memory__create_entities", "mcp__memory__create_relations",
	"mcp__memory__delete_entities", "mcp__memory__delete_observations", "mcp__memory__delete_relations",
	"mcp__memory__open_nodes", "mcp__memory__read_graph", "mcp__memory__search_nodes",
}

// Codex's own tools over MCP resources, which it adds whenever an MCP
// server is configured (with or without the resources capability); no
// setting of 0.169.0 was found that turns them off.
var codexResourceTools = []string{"list_mcp_resource_templates", "list_mcp_resources", "read_mcp_resource"}

var entity = map[string]any{"entities": []any{map[string]any{
	"name": "conduit", "entityType": "project", "observations": []string{"runs agents"},
}}}

// run runs cmd with env only (HOME, PATH and what is given) and returns
// its standard output.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd.Env = append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + tmp}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("%s %q: %v\nstderr: %s", filepath.Base(name), args, err, stderr.String())
	if err != nil {
		t.Fatalf("%s: %v\nstdout: %s", filepath.Base(name), err, stdout.String())
	}
	return stdout.Bytes()
}

// lines decodes a JSON-lines stream; a line that is no object fails.
func lines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var got []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stream line %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	return got
}

// save writes a stream into testdata with -record, the test's temporary
// directory replaced so that no path of this machine is kept.
func save(t *testing.T, name string, out []byte, dir string) {
	t.Helper()
	if !*record {
		return
	}
	// Claude Code also names its project directory after the path, with
	// dashes for slashes.
	s := strings.NewReplacer(dir, "/home/agent", strings.ReplaceAll(dir, "/", "-"), "-home-agent").Replace(string(out))
	if err := os.WriteFile(filepath.Join("testdata", name), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// memoryFile is the memory server's store: what it holds proves that a
// call really reached the server.
func memoryFile(dir string) string { return filepath.Join(dir, "memory.jsonl") }

func claudeMCPConfig(t *testing.T, dir, memory string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"memory": map[string]any{
		"command": memory, "args": []string{}, "env": map[string]string{"MEMORY_FILE_PATH": memoryFile(dir)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClaudeCallsAnMCPToolAndResumesItsSession(t *testing.T) {
	bin, memory := agenttest.Claude(t), agenttest.MCPMemory(t)
	dir := t.TempDir()
	const model = "claude-sonnet-4-5"
	srv := agenttest.Anthropic(t, agenttest.Options{
		APIKey: apiKey, Model: model, Tools: memoryTools,
		Script: []agenttest.Step{
			agenttest.Call("mcp__memory__create_entities", entity),
			agenttest.Call("mcp__memory__delete_entities", map[string]any{"entityNames": []string{"conduit"}}),
			agenttest.Reply("first turn done"),
			agenttest.Reply("resumed turn done"),
		},
	})
	env := []string{
		"CLAUDE_CONFIG_DIR=" + filepath.Join(dir, "claude"),
		"ANTHROPIC_BASE_URL=" + srv.URL,
		"ANTHROPIC_API_KEY=" + apiKey,
		"ENABLE_TOOL_SEARCH=false",
	}
	common := []string{"--output-format", "stream-json", "--verbose", "--model", model,
		"--mcp-config", claudeMCPConfig(t, dir, memory), "--strict-mcp-config",
		"--tools", "", "--allowedTools", "mcp__memory__create_entities"}

	out := run(t, dir, env, bin, append([]string{"-p", "remember the project"}, common...)...)
	save(t, "claude-stream.jsonl", out, dir)
	stream := lines(t, out)
	if len(stream) == 0 || stream[0]["type"] != "system" || stream[0]["subtype"] != "init" {
		t.Fatalf("the stream does not start with its init line: %v", stream)
	}
	session, _ := stream[0]["session_id"].(string)
	if last := stream[len(stream)-1]; last["type"] != "result" || last["session_id"] != session || last["result"] != "first turn done" {
		t.Fatalf("the stream does not end with the result of session %s: %v", session, last)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests in the first turn, want 3", len(reqs))
	}
	if !strings.Contains(reqs[0].System, "Claude") {
		t.Errorf("the first request's system prompt is %q, want Claude Code's", reqs[0].System)
	}
	calls := srv.CallIDs()
	created, ok := reqs[1].ToolResult(calls[0])
	if !ok || created.IsError || !strings.Contains(created.Text, "conduit") {
		t.Errorf("create_entities's result = %+v, %v; want the created entity", created, ok)
	}
	refused, ok := reqs[2].ToolResult(calls[1])
	if !ok || !refused.IsError {
		t.Errorf("delete_entities, not allowed, got %+v, %v; want a refusal", refused, ok)
	}
	t.Logf("the refusal Claude Code hands the model: %q", refused.Text)
	if b, err := os.ReadFile(memoryFile(dir)); err != nil || !strings.Contains(string(b), "conduit") {
		t.Errorf("the memory server holds %q (%v), want the entity it created and was not allowed to delete", b, err)
	}

	out = run(t, dir, env, bin, append([]string{"-p", "what do you remember?", "--resume", session}, common...)...)
	save(t, "claude-resume-stream.jsonl", out, dir)
	stream = lines(t, out)
	if last := stream[len(stream)-1]; last["session_id"] != session || last["result"] != "resumed turn done" {
		t.Errorf("the resumed run ended %v, want session %s", last, session)
	}
	reqs = srv.Requests()
	if len(reqs) != 4 || !srv.Done() {
		t.Fatalf("%d requests after the resume, want 4 and the script done", len(reqs))
	}
	resumed := reqs[3]
	for _, want := range []struct{ kind, text string }{
		{"text", "remember the project"}, {"tool_call", "runs agents"}, {"tool_result", "conduit"},
		{"text", "first turn done"}, {"text", "what do you remember?"},
	} {
		if !resumed.Has(want.kind, want.text) {
			t.Errorf("the resumed request has no %s %q: %+v", want.kind, want.text, resumed.Items)
		}
	}
	if _, ok := resumed.ToolResult(calls[0]); !ok {
		t.Errorf("the resumed request lacks the first turn's call %s", calls[0])
	}
	for i, r := range reqs {
		if r.Session != session {
			t.Errorf("request %d names session %q, want %s", i, r.Session, session)
		}
	}
	t.Logf("side requests: %+v", srv.SideRequests())
}

// codexHome writes a Codex home whose one model provider is srv, whose one
// MCP server is the memory server, and whose own tools are off.
func codexHome(t *testing.T, dir, model string, srv *agenttest.Server, memory string) string {
	t.Helper()
	home := filepath.Join(dir, "codex")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`model = %q
model_provider = "agenttest"
web_search = "disabled"

[features]
shell_tool = false
unified_exec = false
goals = false
view_image = false

[agents]
enabled = false

[tools.experimental_request_user_input]
enabled = false

[model_providers.agenttest]
name = "agenttest"
base_url = %q
wire_api = "responses"
env_key = "AGENTTEST_API_KEY"

[mcp_servers.memory]
command = %q
args = []
env = { MEMORY_FILE_PATH = %q }
`, model, srv.URL+"/v1", memory, memoryFile(dir))
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func TestCodexCallsAnMCPToolAndResumesItsSession(t *testing.T) {
	bin, memory := agenttest.Codex(t), agenttest.MCPMemory(t)
	dir := t.TempDir()
	// A model Codex has no metadata for: it warns, and offers no
	// tool_search or apply_patch (it does for the models it knows).
	const model = "agenttest-model"
	srv := agenttest.OpenAI(t, agenttest.Options{
		APIKey: apiKey, Model: model, Tools: slices.Concat(memoryTools, codexResourceTools),
		Script: []agenttest.Step{
			agenttest.Call("mcp__memory__create_entities", entity),
			agenttest.Reply("first turn done"),
			agenttest.Reply("resumed turn done"),
		},
	})
	env := []string{"CODEX_HOME=" + codexHome(t, dir, model, srv, memory), "AGENTTEST_API_KEY=" + apiKey}

	out := run(t, dir, env, bin, "exec", "--json", "--skip-git-repo-check", "--strict-config", "remember the project")
	save(t, "codex-stream.jsonl", out, dir)
	stream := lines(t, out)
	if len(stream) == 0 || stream[0]["type"] != "thread.started" {
		t.Fatalf("the stream does not start with thread.started: %v", stream)
	}
	session, _ := stream[0]["thread_id"].(string)
	if last := stream[len(stream)-1]; last["type"] != "turn.completed" {
		t.Fatalf("the stream does not end with turn.completed: %v", last)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests in the first turn, want 2", len(reqs))
	}
	calls := srv.CallIDs()
	created, ok := reqs[1].ToolResult(calls[0])
	if !ok || !strings.Contains(created.Text, "conduit") {
		t.Errorf("create_entities's result = %+v, %v; want the created entity", created, ok)
	}
	if b, err := os.ReadFile(memoryFile(dir)); err != nil || !strings.Contains(string(b), "conduit") {
		t.Errorf("the memory server holds %q (%v), want the entity it created", b, err)
	}

	out = run(t, dir, env, bin, "exec", "resume", "--json", "--skip-git-repo-check", "--strict-config", session, "what do you remember?")
	save(t, "codex-resume-stream.jsonl", out, dir)
	stream = lines(t, out)
	if stream[0]["type"] != "thread.started" || stream[0]["thread_id"] != session {
		t.Errorf("the resumed run started %v, want thread %s", stream[0], session)
	}
	reqs = srv.Requests()
	if len(reqs) != 3 || !srv.Done() {
		t.Fatalf("%d requests after the resume, want 3 and the script done", len(reqs))
	}
	resumed := reqs[2]
	for _, want := range []struct{ kind, text string }{
		{"text", "remember the project"}, {"tool_call", "runs agents"}, {"tool_result", "conduit"},
		{"text", "first turn done"}, {"text", "what do you remember?"},
	} {
		if !resumed.Has(want.kind, want.text) {
			t.Errorf("the resumed request has no %s %q", want.kind, want.text)
		}
	}
	if _, ok := resumed.ToolResult(calls[0]); !ok {
		t.Errorf("the resumed request lacks the first turn's call %s", calls[0])
	}
	for i, r := range reqs {
		if r.Session != session {
			t.Errorf("request %d names session %q, want %s", i, r.Session, session)
		}
	}
	t.Logf("side requests: %+v", srv.SideRequests())
}

// The negative control with the real CLIs: a server expecting one tool
// fewer than the CLI offers complains, so the exact-set assertion above
// can fail.
func TestTheToolSetAssertionFailsOnTheRealCLIs(t *testing.T) {
	t.Run("claude", func(t *testing.T) {
		bin, memory := agenttest.Claude(t), agenttest.MCPMemory(t)
		dir := t.TempDir()
		var c complaints
		srv := agenttest.Anthropic(t, agenttest.Options{APIKey: apiKey, Model: "claude-sonnet-4-5",
			Tools: memoryTools[1:], Script: []agenttest.Step{agenttest.Reply("done")}, Errorf: c.Errorf})
		run(t, dir, []string{"CLAUDE_CONFIG_DIR=" + filepath.Join(dir, "claude"), "ANTHROPIC_BASE_URL=" + srv.URL,
			"ANTHROPIC_API_KEY=" + apiKey, "ENABLE_TOOL_SEARCH=false"},
			bin, "-p", "hi", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5",
			"--mcp-config", claudeMCPConfig(t, dir, memory), "--strict-mcp-config", "--tools", "")
		if l := c.list(); len(l) != 1 || !strings.Contains(l[0], "offered tools") {
			t.Errorf("complaints %q, want one about the offered tools", l)
		}
	})
	t.Run("codex", func(t *testing.T) {
		bin, memory := agenttest.Codex(t), agenttest.MCPMemory(t)
		dir := t.TempDir()
		var c complaints
		srv := agenttest.OpenAI(t, agenttest.Options{APIKey: apiKey, Model: "agenttest-model",
			Tools: memoryTools, Script: []agenttest.Step{agenttest.Reply("done")}, Errorf: c.Errorf})
		run(t, dir, []string{"CODEX_HOME=" + codexHome(t, dir, "agenttest-model", srv, memory), "AGENTTEST_API_KEY=" + apiKey},
			bin, "exec", "--json", "--skip-git-repo-check", "hi")
		if l := c.list(); len(l) != 1 || !strings.Contains(l[0], "offered tools") {
			t.Errorf("complaints %q, want one about the offered tools", l)
		}
	})
}
