package claudecode

import (
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor/agentrun/agentruntest"
)

// TestSandboxedByDefault: a config without "sandbox" runs Claude Code
// under bwrap (agentruntest.CheckSandboxedByDefault), its MCP
// configuration naming the toolbelt as the agent sees it inside.
func TestSandboxedByDefault(t *testing.T) {
	agentruntest.CheckSandboxedByDefault(t, theAgent, agentruntest.Sandboxed{
		Stream: []string{initLine, resultLine}, Subcommand: "-p", MCPConfig: ".claude/open-conduit-mcp.json",
	})
}

// TestSandboxUnavailableHoldsRatherThanRuns: with no bwrap, a default
// (sandboxed) binding is refused before anything starts.
func TestSandboxUnavailableHoldsRatherThanRuns(t *testing.T) {
	agentruntest.CheckSandboxUnavailableHoldsRatherThanRuns(t, theAgent)
}
