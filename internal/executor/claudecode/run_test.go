package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
)

var (
	initLine   = `{"type":"system","subtype":"init","session_id":"` + session + `","tools":["mcp__os__wait"],"mcp_servers":[{"name":"os","status":"connected"}],"model":"claude-sonnet-4-5"}`
	resultLine = `{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"done","session_id":"` + session + `","total_cost_usd":0.25,"usage":{"input_tokens":100,"output_tokens":20,"cache_creation_input_tokens":3,"cache_read_input_tokens":4}}`
	waitCall   = `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_9","name":"mcp__os__wait","input":{"reason":"review"}}]},"session_id":"` + session + `"}`
	waitResult = `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_9","content":[{"type":"text","text":"{\"status\":\"waiting\"}"}]}]},"session_id":"` + session + `"}`
)

// TestRunGivesTheAgentItsHomeToolsAndPrompt runs the fake claude under
// real supervision: its command line, environment, MCP configuration,
// skill and prompt are what the executor promises, the result carries the
// session and usage, and no file of the execution holds the API key or the
// token.
func TestRunGivesTheAgentItsHomeToolsAndPrompt(t *testing.T) {
	b := setup(t)
	b.Stream(t, initLine, resultLine)
	res := mustRun(t, b.Exec, b.Request(1))
	want := executor.Usage{InputTokens: 100, OutputTokens: 20, CacheCreationTokens: 3, CacheReadTokens: 4, CostUSD: 0.25, Turns: 3}
	if res.Outcome != executor.Succeeded || res.ExitCode != 0 || res.Session != session || res.Usage == nil || *res.Usage != want {
		t.Fatalf("Run = %+v (usage %+v)", res, res.Usage)
	}
	var names []string
	for _, a := range res.Artifacts {
		names = append(names, a.Name+" "+a.MediaType)
	}
	if strings.Join(names, ",") != "log text/plain; charset=utf-8,transcript application/x-ndjson" {
		t.Errorf("artifacts %q", names)
	}

	home := filepath.Join(b.Dir, "home")
	cfgHome := filepath.Join(home, ".claude")
	argv := strings.Split(strings.TrimSuffix(b.Recorded(t, "argv"), "\n"), "\n")
	wantArgv := []string{"-p", "--output-format", "stream-json", "--verbose", "--model", "claude-sonnet-4-5", "--max-turns", "9",
		"--mcp-config", filepath.Join(cfgHome, "open-conduit-mcp.json"), "--strict-mcp-config",
		"--tools", "", "--allowedTools", "mcp__os", "--setting-sources", "user"}
	if !slices.Equal(argv, wantArgv) {
		t.Errorf("argv\n got %q\nwant %q", argv, wantArgv)
	}
	if got := b.Recorded(t, "stdin"); got != "/answer-issue Answer issue.opened #42" {
		t.Errorf("prompt %q", got)
	}
	if got := strings.TrimSpace(b.Recorded(t, "cwd")); got != filepath.Join(b.Dir, "work") {
		t.Errorf("cwd %q", got)
	}
	env := b.Recorded(t, "env")
	for _, kv := range []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + cfgHome, "ANTHROPIC_API_KEY=" + apiKeyCanary,
		"ANTHROPIC_BASE_URL=http://127.0.0.1:9", "ENABLE_TOOL_SEARCH=false", "OS_TOKEN_FILE=" + b.Ctx.ToolbeltTokenFile,
		"OPEN_CONDUIT_WORK_ID=work-1", "PATH=" + b.Ctx.ToolbeltDir + ":"} {
		if !strings.Contains(env, "\n"+kv) && !strings.HasPrefix(env, kv) {
			t.Errorf("the agent's environment lacks %q", kv)
		}
	}
	for _, bad := range []string{tokenCanary, "OTHER_SECRET"} {
		if strings.Contains(env, bad) {
			t.Errorf("the agent's environment holds %q", bad)
		}
	}
	var mcp struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	data, err := os.ReadFile(filepath.Join(cfgHome, "open-conduit-mcp.json"))
	if err != nil || json.Unmarshal(data, &mcp) != nil {
		t.Fatalf("MCP config: %v %s", err, data)
	}
	srv := mcp.MCPServers["os"]
	if len(mcp.MCPServers) != 1 || srv.Command != filepath.Join(b.Ctx.ToolbeltDir, "os") || !slices.Equal(srv.Args, []string{"mcp"}) ||
		srv.Env["OS_ENDPOINT"] != b.Ctx.ToolbeltEndpoint || srv.Env["OS_TOKEN_FILE"] != b.Ctx.ToolbeltTokenFile || len(srv.Env) != 2 {
		t.Errorf("MCP config %s", data)
	}
	if _, err := os.ReadFile(filepath.Join(cfgHome, "skills", "answer-issue", "SKILL.md")); err != nil {
		t.Errorf("the playbook is not installed as a skill: %v", err)
	}
	noCanary(t, b.Dir)
}

// TestBuiltInToolsAreExactlyTheConfigs: --tools names the config's tools
// (their base names), --allowedTools the toolbelt's server and the
// config's tools with their specifiers.
func TestBuiltInToolsAreExactlyTheConfigs(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"model": "m", "prompt": "p", "tools": ["Read", "Bash(git log:*)", "Bash(git diff:*)"]}`))
	if err != nil {
		t.Fatal(err)
	}
	args, _ := Driver{}.Command(&agentrun.Segment{Config: cfg, Home: "/h", Resume: true, Session: "s-1"})
	joined := strings.Join(args, " ")
	for _, want := range []string{"--tools Read,Bash --allowedTools mcp__os,Read,Bash(git log:*),Bash(git diff:*) ", "--resume s-1"} {
		if !strings.Contains(joined, want) {
			t.Errorf("args %q lack %q", joined, want)
		}
	}
}

// TestAWaitParksTheSegment: the stream shows a successful wait while the
// agent goes on running; after the park grace (a timer the test fires) its
// group is stopped and the segment is Suspended with its session. The
// resume continues the session with the waking Events as its prompt.
func TestAWaitParksTheSegment(t *testing.T) {
	b := setup(t)
	b.Stream(t, initLine, waitCall, waitResult)
	b.Hang(t, true)
	running := start(func() (executor.Result, error) { return b.Exec.Run(context.Background(), b.Request(1)) })
	b.Timers.Fire(t, parkGrace)
	res, err := await(t, running)
	if err != nil || res.Outcome != executor.Suspended || res.Session != session || !strings.Contains(res.Message, "parked") {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	groupGone(t, filepath.Join(b.Dir, "segments", "1"))

	b.Hang(t, false)
	b.Stream(t, initLine, resultLine)
	req := b.Request(2)
	req.Session = session
	req.Events = []executor.Event{{ID: "ev-2", Seq: 2, Type: "review.done", Source: "operator", CorrelationKey: "pr-7", Data: json.RawMessage(`{"ok":true}`)}}
	res, err = b.Exec.Resume(context.Background(), req)
	if err != nil || res.Outcome != executor.Succeeded || res.Session != session {
		t.Fatalf("Resume = %+v, %v", res, err)
	}
	argv := b.Recorded(t, "argv")
	if !strings.HasSuffix(argv, "--resume\n"+session+"\n") {
		t.Errorf("resume argv %q", argv)
	}
	prompt := b.Recorded(t, "stdin")
	if !strings.Contains(prompt, "- review.done from operator (event ev-2, correlation key pr-7): {\"ok\":true}") {
		t.Errorf("resume prompt %q", prompt)
	}
	for _, seg := range []string{"1", "2"} {
		if _, err := os.Stat(filepath.Join(b.Dir, "segments", seg, "stream.jsonl")); err != nil {
			t.Errorf("segment %s kept no transcript: %v", seg, err)
		}
	}
	noCanary(t, b.Dir)

	req.Session = ""
	if _, err := b.Exec.Resume(context.Background(), req); !errors.Is(err, agentrun.ErrNoSession) {
		t.Errorf("Resume without a session = %v", err)
	}
}

// TestAWaitThatEndsTheTurnParksWithoutAStop: an agent that stops by itself
// after its wait is Suspended without being stopped.
func TestAWaitThatEndsTheTurnParksWithoutAStop(t *testing.T) {
	b := setup(t)
	b.Stream(t, initLine, waitCall, waitResult, resultLine)
	res := mustRun(t, b.Exec, b.Request(1))
	if res.Outcome != executor.Suspended || strings.Contains(res.Message, "stopped") {
		t.Fatalf("Run = %+v", res)
	}
}

// TestARefusedWaitDoesNotPark: a wait whose result is an error is not a
// park; the segment ends by the agent's result.
func TestARefusedWaitDoesNotPark(t *testing.T) {
	b := setup(t)
	refused := strings.Replace(waitResult, `"tool_use_id":"toolu_9"`, `"tool_use_id":"toolu_9","is_error":true`, 1)
	b.Stream(t, initLine, waitCall, refused, resultLine)
	if res := mustRun(t, b.Exec, b.Request(1)); res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v", res)
	}
}

// TestFailures: an error result, a stream without a result and a non-zero
// exit are Failed with a safe message that quotes no model output.
func TestFailures(t *testing.T) {
	const modelText = "MODEL-OUTPUT-secret-ish"
	cases := []struct {
		name, exit string
		lines      []string
		want       string
	}{
		{"error result", "1", []string{initLine, `{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":9,"result":"` + modelText + `","session_id":"` + session + `"}`}, "(error_max_turns)"},
		{"no result", "0", []string{initLine}, "without reporting a result"},
		{"exit status", "3", []string{initLine, resultLine}, "status 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := setup(t)
			b.Stream(t, tc.lines...)
			write(t, filepath.Join(b.Bin, "exit"), tc.exit, 0o600)
			res := mustRun(t, b.Exec, b.Request(1))
			if res.Outcome != executor.Failed || !strings.Contains(res.Message, tc.want) || strings.Contains(res.Message, modelText) {
				t.Fatalf("Run = %+v", res)
			}
		})
	}
}

// TestStopAndRecover: a daemon that stops observing (ctx ends) leaves the
// agent running; a new executor adopts it by its record, and a Stop ends
// its whole group, recorded as a cancel.
func TestStopAndRecover(t *testing.T) {
	b := setup(t)
	b.Stream(t, initLine)
	b.Hang(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	req := b.Request(1)
	running := start(func() (executor.Result, error) { return b.Exec.Run(ctx, req) })
	// Its stream (the session it names) is out before it is stopped.
	b.WaitRecorded(t, "streamed")
	cancel()
	if _, err := await(t, running); !errors.Is(err, executor.ErrDetached) {
		t.Fatalf("Run after its ctx ended = %v, want ErrDetached", err)
	}
	self, _ := os.Executable()
	later := b.Executor(t, self)
	req.Epoch = 0 // Recover finds the current segment even without its epoch
	recovered := start(func() (executor.Result, error) { return later.Recover(context.Background(), req) })
	if err := later.Stop(context.Background(), req, guard); err != nil {
		t.Fatal(err)
	}
	res, err := await(t, recovered)
	if err != nil || res.Outcome != executor.Cancelled || res.Session != session {
		t.Fatalf("Recover after Stop = %+v, %v", res, err)
	}
	groupGone(t, filepath.Join(b.Dir, "segments", "1"))
	if res, err := later.Recover(context.Background(), req); err != nil || res.Outcome != executor.Cancelled {
		t.Errorf("Recover of an ended segment = %+v, %v", res, err)
	}
	empty := b.Request(1)
	empty.Dir = filepath.Join(b.Tmp, "never")
	if _, err := later.Recover(context.Background(), empty); !errors.Is(err, executor.ErrGone) {
		t.Errorf("Recover of nothing = %v, want ErrGone", err)
	}
}
