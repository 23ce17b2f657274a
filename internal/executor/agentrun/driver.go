package agentrun

import (
	"io"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

// MCPServerName is the name the toolbelt's MCP server (os mcp) has in the
// agent's configuration: its tools reach the agent as mcp__os__TOOL.
const MCPServerName = "os"

// The toolbelt tools whose success ends the agent's turn.
const (
	WaitTool    = "mcp__" + MCPServerName + "__wait"
	OutcomeTool = "mcp__" + MCPServerName + "__declare_outcome"
)

// Driver is what one agent CLI adds to the runner: its configuration home,
// its command line and environment, and the reading of its stream.
type Driver interface {
	// ConfigHome is the CLI's configuration home inside the agent's HOME.
	ConfigHome(home string) string
	// Prepare writes what the CLI reads from its configuration home for
	// seg (its MCP configuration, settings): every segment writes it
	// again. It never writes seg.APIKey.
	Prepare(seg *Segment) error
	// SkillsDir is where the CLI finds skills (<dir>/<name>/SKILL.md).
	SkillsDir(home string) string
	// Command returns the CLI's arguments (after the program) and the
	// environment it adds, secrets included: the prompt is on its stdin.
	Command(seg *Segment) (args []string, env map[string]string)
	// FirstPrompt turns the rendered prompt into the first turn's text,
	// starting it on the playbook ("" for none).
	FirstPrompt(prompt, playbook string) string
	// NewParser returns a parser of the CLI's stream.
	NewParser() Parser
}

// Parser reads a stream one line at a time.
type Parser interface {
	Line(line []byte)
	Summary() Summary
}

// Summary is what the runner needs of a stream.
type Summary struct {
	// Session is the session (thread) a resume continues.
	Session string
	// Finished: the stream reported its final result.
	Finished bool
	// OK: that result says the agent finished normally.
	OK bool
	// Detail is a fixed word of the CLI for a result that is not OK
	// (e.g. "error_max_turns"); never the model's text.
	Detail string
	// Usage is what the segment consumed (nil when nothing was reported).
	Usage *executor.Usage
	// Succeeded names the tools whose calls succeeded, in order, as
	// mcp__SERVER__TOOL for an MCP tool.
	Succeeded []string
}

// Parse reads a whole stream with p, lines bounded by agent.MaxLine.
func Parse(r io.Reader, p Parser) Summary {
	agent.ReadLines(r, 0, p.Line)
	return p.Summary()
}

// Segment is one segment as a driver sees it.
type Segment struct {
	Config  agent.Config
	Request executor.RunRequest
	// Home is the agent's HOME (persisting across segments).
	Home string
	// Dir is the segment's own directory.
	Dir string
	// Workdir is the agent's working directory.
	Workdir string
	// Resume: continue Session rather than start one.
	Resume  bool
	Session string
	// APIKey is the model API key's value: for the environment only.
	APIKey string
	// MCP is the toolbelt's MCP server.
	MCP MCPServer
}

// MCPServer is how the agent starts os mcp: the token reaches it only as
// the host's token file.
type MCPServer struct {
	Command string
	Args    []string
	Env     map[string]string
}
