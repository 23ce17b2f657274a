package codex

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun/agentruntest"
)

const threadID = "0199a213-81c0-7800-8aa1-bbab2a035a53"

var (
	started   = `{"type":"thread.started","thread_id":"` + threadID + `"}`
	turn      = `{"type":"turn.started"}`
	waited    = `{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"os","tool":"wait","arguments":{},"result":{"content":[]},"error":null,"status":"completed"}}`
	completed = `{"type":"turn.completed","usage":{"input_tokens":50,"cached_input_tokens":5,"output_tokens":7}}`
)

// TestRunWritesTheHomeAndParks runs the fake codex under real supervision:
// its command line reads the prompt from stdin, its home's config.toml
// names the model provider, the os MCP server (token file, never the
// token) and Codex's own tools off; a successful wait parks the segment
// after the grace; the resume is `exec resume SESSION -`.
func TestRunWritesTheHomeAndParks(t *testing.T) {
	b := setup(t)
	b.Stream(t, started, turn, waited)
	b.Hang(t, true)
	running := start(func() (executor.Result, error) { return b.Exec.Run(context.Background(), b.Request(1)) })
	b.Timers.Fire(t, parkGrace)
	res, err := await(t, running)
	if err != nil || res.Outcome != executor.Suspended || res.Session != threadID {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	groupGone(t, filepath.Join(b.Dir, "segments", "1"))
	argv := strings.Split(strings.TrimSuffix(b.Recorded(t, "argv"), "\n"), "\n")
	if want := []string{"exec", "--json", "--skip-git-repo-check", "--model", "gpt-5-codex", "-"}; !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	if got := b.Recorded(t, "stdin"); !strings.HasPrefix(got, "$answer-issue\n") || !strings.HasSuffix(got, "Answer issue.opened #42") {
		t.Errorf("prompt %q", got)
	}
	home := filepath.Join(b.Dir, "home", ".codex")
	env := b.Recorded(t, "env")
	for _, kv := range []string{"CODEX_HOME=" + home, "OPENAI_API_KEY=" + apiKeyCanary, "HOME=" + filepath.Join(b.Dir, "home")} {
		if !strings.Contains(env, kv+"\n") {
			t.Errorf("environment lacks %q", kv)
		}
	}
	toml, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`model = "gpt-5-codex"`, `model_provider = "open-conduit"`, `base_url = "http://127.0.0.1:9"`,
		`env_key = "OPENAI_API_KEY"`, `shell_tool = false`, `web_search = "disabled"`, "[mcp_servers.os]",
		`command = "` + filepath.Join(b.Ctx.ToolbeltDir, "os") + `"`, `args = ["mcp"]`, `OS_TOKEN_FILE = "` + b.Ctx.ToolbeltTokenFile + `"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("config.toml lacks %s:\n%s", want, toml)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "skills", "answer-issue", "SKILL.md")); err != nil {
		t.Errorf("the playbook is not installed as a skill: %v", err)
	}

	b.Hang(t, false)
	b.Stream(t, started, turn, completed)
	req := b.Request(2)
	req.Session = threadID
	res, err = b.Exec.Resume(context.Background(), req)
	want := executor.Usage{InputTokens: 50, CacheReadTokens: 5, OutputTokens: 7, Turns: 1}
	if err != nil || res.Outcome != executor.Succeeded || res.Usage == nil || *res.Usage != want {
		t.Fatalf("Resume = %+v (%+v), %v", res, res.Usage, err)
	}
	argv = strings.Split(strings.TrimSuffix(b.Recorded(t, "argv"), "\n"), "\n")
	if want := []string{"exec", "resume", "--json", "--skip-git-repo-check", "--model", "gpt-5-codex", threadID, "-"}; !slices.Equal(argv, want) {
		t.Errorf("resume argv %q", argv)
	}
	noCanary(t, b.Dir)
}

// TestCodexToolsAreChecked: only Codex's own tools the executor can turn
// on are accepted, and each turns its feature on.
func TestCodexToolsAreChecked(t *testing.T) {
	if err := ValidateConfig([]byte(`{"model": "m", "prompt": "p", "tools": ["Read"]}`)); err == nil {
		t.Error("a Claude tool name was accepted for Codex")
	}
	b := setup(t)
	b.Stream(t, started, turn, completed)
	req := b.Request(1)
	req.Config = json.RawMessage(`{"sandbox": {"enabled": false}, "binary": "` + filepath.Join(b.Bin, "codex") + `", "model": "m", "prompt": "p", "tools": ["shell", "web_search"]}`)
	if res := mustRun(t, b.Exec, req); res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v", res)
	}
	toml, _ := os.ReadFile(filepath.Join(b.Dir, "home", ".codex", "config.toml"))
	for _, want := range []string{"shell_tool = true", "unified_exec = true", `web_search = "live"`, `base_url = "` + DefaultBaseURL + `"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("config.toml lacks %s:\n%s", want, toml)
		}
	}
}

// TestTheRealCodex runs the pinned Codex against a scripted OpenAI
// Responses server and a toolbelt double served through the real os mcp,
// as TestTheRealClaude does for Claude Code.
func TestTheRealCodex(t *testing.T) {
	bin := agenttest.Codex(t)
	b := setup(t)
	agentruntest.BuildOS(t, b.Ctx.ToolbeltDir)
	tb := agentruntest.NewToolbelt(t, b.Ctx.ToolbeltEndpoint, tokenCanary)
	srv := agenttest.OpenAI(t, agenttest.Options{
		APIKey: apiKeyCanary, Model: "gpt-5-codex",
		Script: []agenttest.Step{
			agenttest.Call("mcp__os__read_context", nil),
			agenttest.Call("mcp__os__wait", map[string]any{"reason": "waiting for review"}),
			agenttest.Reply("Waiting for the review."),
			agenttest.Call("mcp__os__declare_outcome", map[string]any{"outcome": "succeeded", "message": "answered"}),
			agenttest.Reply("Done."),
		},
	})
	cfg := `{"sandbox": {"enabled": false}, "binary": "` + bin + `", "model": "gpt-5-codex", "playbook": "answer-issue", "base_url": "` + srv.URL + `/v1",
		"prompt": "Answer {{range .Events}}{{.Type}} #{{.Data.issue.number}}{{end}}"}`
	req := b.Request(1)
	req.Config = json.RawMessage(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := b.Exec.Run(ctx, req)
	logSegment(t, b.Dir, "1")
	// Codex always offers its MCP resource tools and request_user_input
	// (no setting of 0.169.0 turns them off; they reach nothing but the
	// MCP servers and, in exec, nobody); everything else it offers is the
	// grant.
	want := []string{"list_mcp_resource_templates", "list_mcp_resources", "read_mcp_resource", "request_user_input"}
	for _, op := range agentruntest.Operations {
		want = append(want, "mcp__os__"+op)
	}
	slices.Sort(want)
	for _, r := range srv.Requests() {
		if !slices.Equal(r.Tools, want) {
			t.Errorf("request %d offered %q, want %q", r.Step, r.Tools, want)
		}
	}
	if err != nil || res.Outcome != executor.Suspended || res.Session == "" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got := tb.Called(); !slices.Equal(got, []string{"read_context", "wait"}) {
		t.Errorf("first segment called %q", got)
	}
	req = b.Request(2)
	req.Config = json.RawMessage(cfg)
	req.Session = res.Session
	req.Events = []executor.Event{{ID: "ev-2", Seq: 2, Type: "review.done", Source: "operator", Data: json.RawMessage(`{"approved":true}`)}}
	res2, err := b.Exec.Resume(ctx, req)
	logSegment(t, b.Dir, "2")
	if err != nil || res2.Outcome != executor.Succeeded || res2.Session != res.Session {
		t.Fatalf("Resume = %+v, %v", res2, err)
	}
	if got := tb.Called(); !slices.Equal(got, []string{"read_context", "wait", "declare_outcome"}) {
		t.Errorf("calls %q", got)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if !last.Has("text", "Answer issue.opened #42") || !last.Has("text", "review.done from operator") {
		t.Errorf("the resumed conversation lacks the first turn or the waking Event: %+v", last.Items)
	}
	if !reqs[0].Has("text", "Answer the issue.") {
		t.Errorf("the first turn did not start on the playbook")
	}
	noCanary(t, b.Dir)
}

func logSegment(t *testing.T, dir, epoch string) {
	t.Helper()
	for _, name := range []string{"output.log", "stream.jsonl", "supervisor.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, "segments", epoch, name))
		t.Logf("segment %s %s:\n%s", epoch, name, strings.TrimSpace(string(b)))
	}
}
