package agenttest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
)

const codexModel = "gpt-5-codex"

// codexHome writes a Codex home whose one model provider is srv and whose
// one MCP server is the memory server.
func codexHome(t *testing.T, dir string, srv *agenttest.Server, memory, extra string) string {
	t.Helper()
	home := filepath.Join(dir, "codex")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`model = %q
model_provider = "agenttest"
%s

[model_providers.agenttest]
name = "agenttest"
base_url = %q
wire_api = "responses"
env_key = "AGENTTEST_API_KEY"

[mcp_servers.memory]
command = %q
args = []
env = { MEMORY_FILE_PATH = %q }
`, codexModel, extra, srv.URL+"/v1", memory, filepath.Join(dir, "memory.jsonl"))
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

func codexRun(t *testing.T, bin, dir, home string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + dir,
		"PATH=" + os.Getenv("PATH"),
		"CODEX_HOME=" + home,
		"AGENTTEST_API_KEY=" + apiKey,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("codex %q: %v\nstderr: %s\nstdout: %s", args, err, stderr.String(), stdout.String())
	if err != nil {
		t.Fatalf("codex: %v", err)
	}
	return stdout.Bytes()
}

func TestCodexAgainstTheScriptedServer(t *testing.T) {
	bin := agenttest.Codex(t)
	memory := agenttest.MCPMemory(t)
	dir := t.TempDir()
	srv := agenttest.OpenAI(t, agenttest.Options{
		APIKey: apiKey, Model: codexModel,
		Script: []agenttest.Step{
			agenttest.Call("mcp__memory__read_graph", nil),
			agenttest.Reply("first turn done"),
			agenttest.Reply("resumed turn done"),
		},
	})
	home := codexHome(t, dir, srv, memory, "")
	codexRun(t, bin, dir, home, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "list your tools")
	for _, r := range srv.Requests() {
		t.Logf("request %d tools %q items %+v", r.Step, r.Tools, r.Items)
	}
	t.Logf("side %+v", srv.SideRequests())
}
