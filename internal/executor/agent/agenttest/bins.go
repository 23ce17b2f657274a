package agenttest

import (
	"os"
	"testing"
)

// The environment variables .ci/run sets to the absolute paths of the
// pinned CLIs it installs from e2e/agents.
const (
	EnvClaude    = "OPEN_CONDUIT_TEST_CLAUDE"
	EnvCodex     = "OPEN_CONDUIT_TEST_CODEX"
	EnvMCPMemory = "OPEN_CONDUIT_TEST_MCP_MEMORY"
)

const install = "run .ci/run, or install them with `npm ci` in a copy of e2e/agents " +
	"(package.json and package-lock.json) and set " + EnvClaude + ", " + EnvCodex + " and " +
	EnvMCPMemory + " to node_modules/.bin/claude, codex and mcp-server-memory"

// Claude returns the path of the pinned Claude Code binary. Where it is
// not given, the test is skipped, and under CI=true it fails.
func Claude(t testing.TB) string { t.Helper(); return binary(t, EnvClaude, "claude") }

// Codex returns the path of the pinned Codex binary, like Claude.
func Codex(t testing.TB) string { t.Helper(); return binary(t, EnvCodex, "codex") }

// MCPMemory returns the path of the pinned reference MCP server
// (@modelcontextprotocol/server-memory), like Claude.
func MCPMemory(t testing.TB) string { t.Helper(); return binary(t, EnvMCPMemory, "mcp-server-memory") }

func binary(t testing.TB, env, name string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set, so %s cannot run: %s", env, name, install)
		}
		t.Skipf("%s is not set, so %s cannot run: %s", env, name, install)
	}
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s names no executable file (%v): %s", env, err, install)
	}
	return path
}
