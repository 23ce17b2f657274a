package claudecode

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
)

// Where Claude Code's files are inside the agent's HOME.
const (
	configDir = ".claude"
	mcpFile   = "open-conduit-mcp.json"
)

// Driver runs Claude Code (claude -p) for agentrun.
type Driver struct{}

var _ agentrun.Driver = Driver{}

// ConfigHome is CLAUDE_CONFIG_DIR: <home>/.claude.
func (Driver) ConfigHome(home string) string { return filepath.Join(home, configDir) }

// SkillsDir is the configuration home's skills directory.
func (d Driver) SkillsDir(home string) string { return filepath.Join(d.ConfigHome(home), "skills") }

// Prepare writes the MCP configuration, whose one server is os mcp with
// the toolbelt's endpoint and token file (never the token).
func (d Driver) Prepare(seg *agentrun.Segment) error {
	cfg := map[string]any{"mcpServers": map[string]any{
		agentrun.MCPServerName: map[string]any{"type": "stdio", "command": seg.MCP.Command, "args": seg.MCP.Args, "env": seg.MCP.Env},
	}}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(d.ConfigHome(seg.Home), mcpFile), append(b, '\n'), 0o600)
}

// Command is `claude -p` reading the prompt from stdin, printing stream
// JSON, with only the MCP configuration written by Prepare, the built-in
// tools the config names (none by default) and the user settings of the
// isolated home only; a resume adds --resume SESSION.
func (d Driver) Command(seg *agentrun.Segment) ([]string, map[string]string) {
	cfg := seg.Config
	var base []string
	for _, t := range cfg.Tools {
		name, _, _ := strings.Cut(t, "(")
		if !contains(base, name) {
			base = append(base, name)
		}
	}
	allowed := append([]string{"mcp__" + agentrun.MCPServerName}, cfg.Tools...)
	args := []string{
		"-p", "--output-format", "stream-json", "--verbose",
		"--model", cfg.Model,
		"--max-turns", strconv.Itoa(cfg.MaxTurns),
		"--mcp-config", filepath.Join(d.ConfigHome(seg.Home), mcpFile), "--strict-mcp-config",
		"--tools", strings.Join(base, ","),
		"--allowedTools", strings.Join(allowed, ","),
		"--setting-sources", "user",
	}
	if seg.Resume {
		args = append(args, "--resume", seg.Session)
	}
	env := map[string]string{
		"CLAUDE_CONFIG_DIR": d.ConfigHome(seg.Home),
		"ANTHROPIC_API_KEY": seg.APIKey,
		// The toolbelt's tools are offered from the first request, not
		// behind the CLI's own tool search.
		"ENABLE_TOOL_SEARCH":  "false",
		"DISABLE_AUTOUPDATER": "1",
		"DISABLE_TELEMETRY":   "1",
	}
	if cfg.BaseURL != "" {
		env["ANTHROPIC_BASE_URL"] = cfg.BaseURL
	}
	return args, env
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FirstPrompt starts the turn on the playbook's skill as its slash
// command, the rendered prompt as its arguments.
func (Driver) FirstPrompt(prompt, playbook string) string {
	if playbook == "" {
		return prompt
	}
	return "/" + playbook + " " + prompt
}

// NewParser returns a parser of Claude Code's stream JSON.
func (Driver) NewParser() agentrun.Parser { return &parser{} }

type parser struct{ p Parser }

func (p *parser) Line(b []byte) { p.p.Line(b) }

func (p *parser) Summary() agentrun.Summary {
	r := p.p.Result()
	s := agentrun.Summary{Session: r.SessionID, Finished: r.Done, OK: r.Done && !r.IsError && r.Subtype == "success", Succeeded: r.SucceededTools}
	if r.Done {
		s.Detail = r.Subtype
		s.Usage = &executor.Usage{
			InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
			CacheReadTokens: r.Usage.CacheReadInputTokens, CacheCreationTokens: r.Usage.CacheCreationInputTokens,
			CostUSD: r.CostUSD, Turns: r.NumTurns,
		}
	}
	return s
}
