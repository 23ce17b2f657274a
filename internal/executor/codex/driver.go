package codex

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
)

// Where Codex's files are inside the agent's HOME.
const configDir = ".codex"

// providerName is the model provider the executor configures: the
// config's base_url (or OpenAI's), the key from the environment.
const providerName = "open-conduit"

// DefaultBaseURL is the model API a config without base_url reaches.
const DefaultBaseURL = "https://api.openai.com/v1"

// apiKeyEnv is the variable the provider reads its key from.
const apiKeyEnv = "OPENAI_API_KEY"

// Driver runs Codex (codex exec) for agentrun.
type Driver struct{}

var _ agentrun.Driver = Driver{}

// ConfigHome is CODEX_HOME: <home>/.codex.
func (Driver) ConfigHome(home string) string { return filepath.Join(home, configDir) }

// SkillsDir is the configuration home's skills directory.
func (d Driver) SkillsDir(home string) string { return filepath.Join(d.ConfigHome(home), "skills") }

// Prepare writes config.toml: the model and its provider, no approvals,
// Codex's own tools off unless the config names them, and os mcp as the
// one MCP server (its endpoint and token file, never the token).
func (d Driver) Prepare(seg *agentrun.Segment) error {
	cfg := seg.Config
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	has := func(t string) bool { return slices.Contains(cfg.Tools, t) }
	web := "disabled"
	if has("web_search") {
		web = "live"
	}
	var b strings.Builder
	line := func(k string, v any) { b.WriteString(k + " = " + toml(v) + "\n") }
	line("model", cfg.Model)
	line("model_provider", providerName)
	line("approval_policy", "never")
	line("sandbox_mode", "workspace-write")
	line("web_search", web)
	b.WriteString("\n[features]\n")
	line("shell_tool", has("shell"))
	line("unified_exec", has("shell"))
	line("view_image", has("view_image"))
	line("goals", false)
	// Codex's shell snapshot is a script of the agent's whole environment
	// (the model API key included) under CODEX_HOME, removed only when
	// Codex exits by itself: a stopped agent would leave the key there.
	line("shell_snapshot", false)
	b.WriteString("\n[agents]\n")
	line("enabled", false)
	b.WriteString("\n[model_providers." + providerName + "]\n")
	line("name", providerName)
	line("base_url", base)
	line("wire_api", "responses")
	line("env_key", apiKeyEnv)
	b.WriteString("\n[mcp_servers." + agentrun.MCPServerName + "]\n")
	line("command", seg.MCP.Command)
	line("args", seg.MCP.Args)
	// The toolbelt decides what a call may do: Codex asks no approval
	// (with approval_policy never it would refuse every call).
	line("default_tools_approval_mode", "approve")
	keys := make([]string, 0, len(seg.MCP.Env))
	for k := range seg.MCP.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var env []string
	for _, k := range keys {
		env = append(env, k+" = "+toml(seg.MCP.Env[k]))
	}
	b.WriteString("env = { " + strings.Join(env, ", ") + " }\n")
	return atomicfile.WriteFile(filepath.Join(d.ConfigHome(seg.Home), "config.toml"), []byte(b.String()), 0o600)
}

// toml writes a string, bool or list of strings as TOML: a JSON string
// is a valid TOML basic string.
func toml(v any) string {
	switch v := v.(type) {
	case bool:
		if v {
			return "true"
		}
		return "false"
	default:
		out, _ := json.Marshal(v)
		return string(out)
	}
}

// Command is `codex exec --json` (or `codex exec resume --json SESSION`)
// reading the prompt from stdin ("-").
func (Driver) Command(seg *agentrun.Segment) ([]string, map[string]string) {
	args := []string{"exec"}
	if seg.Resume {
		args = append(args, "resume")
	}
	args = append(args, "--json", "--skip-git-repo-check", "--model", seg.Config.Model)
	if seg.Resume {
		args = append(args, seg.Session)
	}
	args = append(args, "-")
	env := map[string]string{
		"CODEX_HOME": Driver{}.ConfigHome(seg.Home),
		apiKeyEnv:    seg.APIKey,
	}
	return args, env
}

// FirstPrompt starts the turn on the playbook's skill by naming it.
func (Driver) FirstPrompt(prompt, playbook string) string {
	if playbook == "" {
		return prompt
	}
	return "$" + playbook + "\n\nFollow the " + playbook + " skill for this task.\n\n" + prompt
}

// NewParser returns a parser of Codex's JSON events.
func (Driver) NewParser() agentrun.Parser { return &parser{} }

type parser struct{ p Parser }

func (p *parser) Line(b []byte) { p.p.Line(b) }

func (p *parser) Summary() agentrun.Summary {
	r := p.p.Result()
	s := agentrun.Summary{Session: r.ThreadID, Finished: r.Done() || r.Failed, OK: r.Done() && !r.Failed, Succeeded: r.SucceededTools}
	if r.Failed {
		s.Detail = "turn_failed"
	}
	if r.TurnsCompleted > 0 {
		s.Usage = &executor.Usage{
			InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
			CacheReadTokens: r.Usage.CachedInputTokens, Turns: int64(r.TurnsCompleted),
		}
	}
	return s
}

// knownTools are Codex's own tools a config may turn on.
var knownTools = []string{"shell", "view_image", "web_search"}

func checkTool(name string) string {
	if slices.Contains(knownTools, name) {
		return ""
	}
	return "name one of Codex's own tools the executor can turn on: shell, view_image or web_search"
}
