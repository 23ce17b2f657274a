package agenttest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
)

const (
	apiKey      = "sk-agenttest-canary-0123456789"
	claudeModel = "claude-sonnet-4-5"
)

// claudeRun runs claude -p in home against srv and returns its stream.
func claudeRun(t *testing.T, bin, home string, srv *agenttest.Server, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = home
	cmd.Env = []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, "claude"),
		"ANTHROPIC_BASE_URL=" + srv.URL,
		"ANTHROPIC_API_KEY=" + apiKey,
		"ENABLE_TOOL_SEARCH=false",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("claude %q: %v\nstderr: %s\nstdout: %s", args, err, stderr.String(), stdout.String())
	if err != nil {
		t.Fatalf("claude: %v", err)
	}
	return stdout.Bytes()
}

func mcpConfig(t *testing.T, dir, memory string) string {
	t.Helper()
	cfg := map[string]any{"mcpServers": map[string]any{"memory": map[string]any{
		"command": memory, "args": []string{},
		"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")},
	}}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestClaudeAgainstTheScriptedServer(t *testing.T) {
	bin := agenttest.Claude(t)
	memory := agenttest.MCPMemory(t)
	home := t.TempDir()
	srv := agenttest.Anthropic(t, agenttest.Options{
		APIKey: apiKey, Model: claudeModel,
		Script: []agenttest.Step{
			agenttest.Call("mcp__memory__read_graph", nil),
			agenttest.Reply("first turn done"),
			agenttest.Reply("resumed turn done"),
		},
	})
	cfg := mcpConfig(t, home, memory)
	out := claudeRun(t, bin, home, srv, "-p", "list your tools", "--output-format", "stream-json", "--verbose",
		"--model", claudeModel, "--mcp-config", cfg, "--strict-mcp-config", "--tools", "",
		"--allowedTools", "mcp__memory__read_graph")
	_ = out
	for _, r := range srv.Requests() {
		t.Logf("request %d tools %q items %+v", r.Step, r.Tools, r.Items)
	}
	t.Logf("side %+v", srv.SideRequests())
}
