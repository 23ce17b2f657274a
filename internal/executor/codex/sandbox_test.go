package codex

import (
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor/agentrun/agentruntest"
)

// TestSandboxedByDefault: a config without "sandbox" runs Codex under
// bwrap (agentruntest.CheckSandboxedByDefault), with CODEX_HOME in the
// execution's home and its MCP configuration naming the toolbelt as the
// agent sees it inside.
func TestSandboxedByDefault(t *testing.T) {
	agentruntest.CheckSandboxedByDefault(t, theAgent, agentruntest.Sandboxed{
		Stream: []string{started, turn, completed}, Subcommand: "exec", MCPConfig: ".codex/config.toml",
		Env: func(home string) []string { return []string{"CODEX_HOME=" + filepath.Join(home, ".codex")} },
	})
}

// TestSandboxUnavailableHoldsRatherThanRuns: with no bwrap, a default
// (sandboxed) binding is refused before anything starts.
func TestSandboxUnavailableHoldsRatherThanRuns(t *testing.T) {
	agentruntest.CheckSandboxUnavailableHoldsRatherThanRuns(t, theAgent)
}
