package agent

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

// Spec is what one agent executor adds to the shared config rules.
type Spec struct {
	// Executor is the executor's name, used in messages ("claude-code").
	Executor string
	// Binary is the program looked up on PATH when the config names none.
	Binary string
	// Secrets maps each secret role the agent knows (e.g. "api_key") to
	// the environment variable name of the binding's secret used when the
	// config does not name one.
	Secrets map[string]string
	// CheckTool, when set, returns a remedy for a tool name the agent does
	// not know ("" for one it does), on top of the shared rules.
	CheckTool func(name string) string
}

// Bounds of the limits a config may set, and their defaults.
const (
	MinTurns           = 1
	MaxTurns           = 500
	DefaultTurns       = 50
	MinTimeout         = 10 * time.Second
	MaxTimeout         = 24 * time.Hour
	DefaultTimeout     = 30 * time.Minute
	MaxPromptBytes     = 64 * 1024
	MaxTools           = 64
	maxModelLen        = 200
	maxRefLen          = 255
	maxRepositoryBytes = 4096
)

// Config is an agent binding's executor config:
//
//	{"model": "claude-sonnet-4-5", "playbook": "answer-issue",
//	 "prompt": "Answer {{(index .Events 0).Type}}",
//	 "tools": ["Read", "Grep"], "max_turns": 20, "timeout": "15m",
//	 "workdir": {"git": {"repository": "https://example.org/repo.git", "ref": "main"}},
//	 "secrets": {"api_key": "ANTHROPIC_API_KEY"}}
type Config struct {
	// Binary is the agent program: a name looked up on PATH when the
	// segment starts, or an absolute path. Defaults to the Spec's Binary.
	Binary string
	// Model names the model the agent asks for. Required.
	Model string
	// Playbook names the playbook the agent's turns start on; "" for none.
	Playbook string
	// Prompt is the text/template source of the first turn's prompt,
	// executed over the Work's input Events. Required.
	Prompt string
	// Template is Prompt, parsed.
	Template *template.Template
	// Tools are the agent's own built-in tools it may use beyond the
	// toolbelt's MCP tools; empty (the default) is none.
	Tools []string
	// MaxTurns bounds the agent's turns in one segment.
	MaxTurns int
	// Timeout bounds one segment's running time (the attempt's deadline
	// still applies when it is earlier).
	Timeout time.Duration
	// Workdir is where the agent works.
	Workdir Workdir
	// Secrets maps each secret role to the environment variable name of
	// the binding secret that fills it; never a value.
	Secrets map[string]string
	// Sandbox says whether the agent runs inside a sandbox (package
	// sandbox); on unless the config turns it off.
	Sandbox sandbox.Config
	// BaseURL is the model API's base URL ("" for the vendor's own): an
	// http or https URL without user info, query or fragment, so tests and
	// local model endpoints can serve the agent.
	BaseURL string
}

// Workdir is an agent's working directory: Dir, or a git repository of
// which each Work gets its own clone or worktree under the state
// directory. Both empty is the execution's own work directory.
type Workdir struct {
	Dir        string
	Repository string
	// Ref is the branch, tag or commit checked out; "" is the
	// repository's default branch.
	Ref string
}

// Codes of config problems; they are the codes config validation uses.
const (
	CodeInvalidJSON  = "invalid_json"
	CodeDuplicateKey = "duplicate_key"
	CodeUnknownField = "unknown_field"
	CodeNullValue    = executor.CodeNullValue
	CodeWrongType    = executor.CodeWrongType
	CodeMissingField = "missing_field"
	CodeInvalidValue = "invalid_value"
	CodeTooLarge     = "too_large"
)

// Problem is one thing wrong with a config (executor.ConfigProblem).
type Problem = executor.ConfigProblem

// ConfigError lists every problem of a config, in document order
// (executor.ConfigError).
type ConfigError = executor.ConfigError

const configFields = "binary, model, base_url, playbook, prompt, tools, max_turns, timeout, workdir, secrets and sandbox"

// ParseConfig parses a binding's executor config strictly: unknown,
// duplicate and null members are refused, as are wrong types and values
// the executor cannot run; every problem is reported at once as a
// *ConfigError. An empty raw config is an empty object (and misses its
// required members).
func ParseConfig(spec Spec, raw json.RawMessage) (Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	p := &parser{ConfigWalker: executor.ConfigWalker{Executor: spec.Executor}, spec: spec}
	cfg := Config{Binary: spec.Binary, MaxTurns: DefaultTurns, Timeout: DefaultTimeout, Secrets: map[string]string{}, Sandbox: sandbox.Config{Enabled: true}}
	for role, env := range spec.Secrets {
		cfg.Secrets[role] = env
	}
	if !jsontext.Value(raw).IsValid(jsontext.AllowDuplicateNames(true)) {
		p.Add("", CodeInvalidJSON, "write the config as one JSON object in valid UTF-8")
		return cfg, p.Err()
	}
	p.Dec = jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if !p.Expect("", '{', `write the config as an object such as {"model": "...", "prompt": "..."}`) {
		return cfg, p.Err()
	}
	seen := map[string]bool{}
	for p.Dec.PeekKind() == '"' {
		name := p.ReadString()
		ptr := "/" + executor.EscapePointer(name)
		if seen[name] {
			p.Add(ptr, CodeDuplicateKey, "give each member once")
			p.Skip()
			continue
		}
		seen[name] = true
		switch name {
		case "binary":
			if s, ok := p.str(ptr, "name the agent program, or give its absolute path"); ok {
				cfg.Binary = s
				p.binary(ptr, s)
			}
		case "model":
			if s, ok := p.str(ptr, "name the model as a string"); ok {
				cfg.Model = s
				if !modelRule.MatchString(s) {
					p.Add(ptr, CodeInvalidValue, "name the model with up to 200 letters, digits and . _ : / @ + -, starting with a letter or digit")
				}
			}
		case "base_url":
			if s, ok := p.str(ptr, "give the model API's base URL as a string"); ok {
				cfg.BaseURL = s
				if rem := checkBaseURL(s); rem != "" {
					p.Add(ptr, CodeInvalidValue, rem)
				}
			}
		case "playbook":
			if s, ok := p.str(ptr, "name a playbook as a string"); ok {
				cfg.Playbook = s
				if !playbookRule.MatchString(s) {
					p.Add(ptr, CodeInvalidValue, "a playbook name is a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_'")
				}
			}
		case "prompt":
			if s, ok := p.str(ptr, "write the prompt template as a string"); ok {
				cfg.Prompt = s
				cfg.Template = p.prompt(ptr, s)
			}
		case "tools":
			cfg.Tools = p.tools(ptr)
		case "max_turns":
			cfg.MaxTurns = p.turns(ptr)
		case "timeout":
			cfg.Timeout = p.timeout(ptr)
		case "workdir":
			cfg.Workdir = p.workdir(ptr)
		case "secrets":
			p.secrets(ptr, cfg.Secrets)
		case "sandbox":
			cfg.Sandbox = sandbox.Parse(&p.ConfigWalker, ptr, true)
		default:
			p.Add(ptr, CodeUnknownField, "remove it; the "+spec.Executor+" executor knows "+configFields)
			p.Skip()
		}
	}
	if !seen["model"] {
		p.Add("/model", CodeMissingField, `name the model the agent asks for, e.g. "model": "..."`)
	}
	if !seen["prompt"] {
		p.Add("/prompt", CodeMissingField, `give the first turn's prompt as a template over the Work's input Events, e.g. "prompt": "{{range .Events}}{{.Type}}{{end}}"`)
	}
	if cfg.Tools == nil {
		cfg.Tools = []string{}
	}
	return cfg, p.Err()
}

var (
	modelRule    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$`)
	playbookRule = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	programRule  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]{0,254}$`)
	toolRule     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}(\([^\x00-\x1f,()]{1,200}\))?$`)
	envRule      = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	roleRule     = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
)

// parser walks a syntactically valid document, collecting problems.
type parser struct {
	executor.ConfigWalker
	spec Spec
}

func (p *parser) str(ptr, remedy string) (string, bool) {
	if !p.Expect(ptr, '"', remedy) {
		return "", false
	}
	return p.ReadString(), true
}

func (p *parser) binary(ptr, s string) {
	const remedy = "name the agent program (looked up on PATH) or give its absolute path"
	if strings.IndexByte(s, 0) >= 0 {
		p.Add(ptr, CodeInvalidValue, remedy)
		return
	}
	if strings.ContainsRune(s, '/') {
		if !filepath.IsAbs(s) || filepath.Clean(s) != s {
			p.Add(ptr, CodeInvalidValue, remedy+": a path is absolute and clean")
		}
		return
	}
	if !programRule.MatchString(s) {
		p.Add(ptr, CodeInvalidValue, remedy+": a name is letters, digits and . _ + -, not starting with . or -")
	}
}

func (p *parser) prompt(ptr, s string) *template.Template {
	if len(s) > MaxPromptBytes {
		p.Add(ptr, CodeTooLarge, "keep the prompt template within 64 KiB; put long instructions in the playbook")
		return nil
	}
	if strings.TrimSpace(s) == "" {
		p.Add(ptr, CodeInvalidValue, "write a prompt; an empty one gives the agent nothing to do")
		return nil
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(s)
	if err != nil {
		// The parse error quotes the template: give only its line.
		p.Add(ptr, CodeInvalidValue, "the prompt is not a valid Go text/template"+templateLine(err.Error()))
		return nil
	}
	return t
}

// templateLine extracts the line number from a text/template parse error
// ("template: prompt:3: ..."), never its quoted text.
func templateLine(msg string) string {
	rest, ok := strings.CutPrefix(msg, "template: prompt:")
	if !ok {
		return ""
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 {
		return ""
	}
	return " (line " + rest[:n] + ")"
}

func (p *parser) tools(ptr string) []string {
	const remedy = `list the agent's built-in tools it may use, e.g. ["Read", "Grep"]; [] allows none`
	if !p.Expect(ptr, '[', remedy) {
		return nil
	}
	tools := []string{}
	for i := 0; p.Dec.PeekKind() != ']'; i++ {
		ep := ptr + "/" + strconv.Itoa(i)
		s, ok := p.str(ep, "write each tool name as a string")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(strings.ToLower(s), "mcp__"):
			p.Add(ep, CodeInvalidValue, "remove it; the toolbelt's operations reach the agent as MCP tools through the binding's operations and grants")
		case !toolRule.MatchString(s):
			p.Add(ep, CodeInvalidValue, "name a built-in tool: a letter, then letters, digits or '_', optionally with a (specifier) without commas")
		case p.spec.CheckTool != nil && p.spec.CheckTool(s) != "":
			p.Add(ep, CodeInvalidValue, p.spec.CheckTool(s))
		case slices.Contains(tools, s):
			p.Add(ep, CodeDuplicateKey, "name each tool once")
		case len(tools) == MaxTools:
			p.Add(ep, CodeInvalidValue, "name at most 64 tools")
		default:
			tools = append(tools, s)
		}
	}
	p.End()
	return tools
}

func (p *parser) turns(ptr string) int {
	const remedy = "give the most turns as a whole number from 1 to 500"
	if !p.Expect(ptr, '0', remedy) {
		return DefaultTurns
	}
	tok, _ := p.Dec.ReadToken()
	n, err := strconv.ParseInt(tok.String(), 10, 64)
	if err != nil || n < MinTurns || n > MaxTurns {
		p.Add(ptr, CodeInvalidValue, remedy)
		return DefaultTurns
	}
	return int(n)
}

func (p *parser) timeout(ptr string) time.Duration {
	const remedy = `give a duration from 10s to 24h, e.g. "30m"`
	s, ok := p.str(ptr, remedy)
	if !ok {
		return DefaultTimeout
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinTimeout || d > MaxTimeout {
		p.Add(ptr, CodeInvalidValue, remedy)
		return DefaultTimeout
	}
	return d
}

func (p *parser) workdir(ptr string) Workdir {
	const remedy = `give an absolute directory, or {"git": {"repository": "...", "ref": "..."}} for a checkout of its own per Work`
	switch p.Dec.PeekKind() {
	case '"':
		dir := p.ReadString()
		if dir == "" || strings.IndexByte(dir, 0) >= 0 || !filepath.IsAbs(dir) {
			p.Add(ptr, CodeInvalidValue, remedy)
			return Workdir{}
		}
		return Workdir{Dir: filepath.Clean(dir)}
	case '{':
	default:
		p.Expect(ptr, '{', remedy)
		return Workdir{}
	}
	p.Dec.ReadToken()
	var w Workdir
	seen := false
	for p.Dec.PeekKind() == '"' {
		name := p.ReadString()
		mp := ptr + "/" + executor.EscapePointer(name)
		if name != "git" {
			p.Add(mp, CodeUnknownField, "remove it; a workdir object has only git")
			p.Skip()
			continue
		}
		if seen {
			p.Add(mp, CodeDuplicateKey, "give git once")
			p.Skip()
			continue
		}
		seen = true
		w = p.git(mp)
	}
	p.End()
	if !seen {
		p.Add(ptr+"/git", CodeMissingField, remedy)
	}
	return w
}

func (p *parser) git(ptr string) Workdir {
	var w Workdir
	if !p.Expect(ptr, '{', `give {"repository": "...", "ref": "..."}`) {
		return w
	}
	seen := map[string]bool{}
	for p.Dec.PeekKind() == '"' {
		name := p.ReadString()
		mp := ptr + "/" + executor.EscapePointer(name)
		if seen[name] {
			p.Add(mp, CodeDuplicateKey, "give each member once")
			p.Skip()
			continue
		}
		seen[name] = true
		switch name {
		case "repository":
			if s, ok := p.str(mp, "give the repository's URL or absolute path as a string"); ok {
				w.Repository = s
				if rem := checkRepository(s); rem != "" {
					p.Add(mp, CodeInvalidValue, rem)
				}
			}
		case "ref":
			if s, ok := p.str(mp, "name a branch, tag or commit as a string"); ok {
				w.Ref = s
				if !validRef(s) {
					p.Add(mp, CodeInvalidValue, "name a branch, tag or commit: no spaces, control characters, .., ~ ^ : ? * [ \\, not starting with - or ending with / or .lock")
				}
			}
		default:
			p.Add(mp, CodeUnknownField, "remove it; git knows repository and ref")
			p.Skip()
		}
	}
	p.End()
	if !seen["repository"] {
		p.Add(ptr+"/repository", CodeMissingField, "name the repository to check out, by URL or absolute path")
	}
	return w
}

// checkRepository returns a remedy when s is not a repository the host can
// check out: an absolute path, or an https, ssh or file URL (or scp-like
// user@host:path) carrying no password.
func checkRepository(s string) string {
	const remedy = "give an absolute path, or an https://, ssh:// or file:// URL"
	if s == "" || len(s) > maxRepositoryBytes || strings.HasPrefix(s, "-") {
		return remedy
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return remedy
		}
	}
	if filepath.IsAbs(s) {
		return ""
	}
	if !strings.Contains(s, "://") {
		// scp-like syntax: [user@]host:path
		host, path, ok := strings.Cut(s, ":")
		// "transport::address" would run a git remote helper: never.
		if ok && host != "" && path != "" && !strings.HasPrefix(path, ":") && !strings.ContainsAny(host, "/ ") {
			return ""
		}
		return remedy
	}
	u, err := url.Parse(s)
	if err != nil {
		return remedy
	}
	switch u.Scheme {
	case "https", "ssh", "file", "http":
	default:
		return remedy
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return "remove the password from the URL; give credentials as the binding's secrets"
	}
	return ""
}

// checkBaseURL returns a remedy when s is not a model API base URL: an
// absolute http or https URL with a host, and no user info, query or
// fragment (a key belongs in the binding's secrets).
func checkBaseURL(s string) string {
	const remedy = "give an http:// or https:// URL with a host and an optional path, without user info, query or fragment"
	if s == "" || len(s) > maxRepositoryBytes {
		return remedy
	}
	for _, r := range s {
		if r <= 0x20 || r == 0x7f {
			return remedy
		}
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return remedy
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#") {
		return remedy
	}
	return ""
}

// validRef follows git check-ref-format's rules, loosely.
func validRef(s string) bool {
	if s == "" || len(s) > maxRefLen || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/") ||
		strings.HasSuffix(s, "/") || strings.HasSuffix(s, ".") || strings.HasSuffix(s, ".lock") ||
		strings.Contains(s, "..") || strings.Contains(s, "//") || strings.Contains(s, "@{") || s == "@" {
		return false
	}
	for _, r := range s {
		if r <= 0x20 || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	return true
}

func (p *parser) secrets(ptr string, into map[string]string) {
	if !p.Expect(ptr, '{', `map each secret the agent needs to the binding's secret by its variable name, e.g. {"api_key": "MODEL_API_KEY"}`) {
		return
	}
	seen := map[string]bool{}
	for p.Dec.PeekKind() == '"' {
		role := p.ReadString()
		mp := ptr + "/" + executor.EscapePointer(role)
		if seen[role] {
			p.Add(mp, CodeDuplicateKey, "give each secret once")
			p.Skip()
			continue
		}
		seen[role] = true
		env, ok := p.str(mp, "name the binding's secret by its environment variable name, as a string")
		if !ok {
			continue
		}
		if _, known := p.spec.Secrets[role]; !known || !roleRule.MatchString(role) {
			p.Add(mp, CodeUnknownField, "remove it; the "+p.spec.Executor+" executor needs "+strings.Join(sortedKeys(p.spec.Secrets), ", "))
			continue
		}
		if !envRule.MatchString(env) {
			p.Add(mp, CodeInvalidValue, "name the binding's secret by its environment variable name: upper-case letters, digits and '_', not starting with a digit")
			continue
		}
		into[role] = env
	}
	p.End()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
