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
	CodeNullValue    = "null_value"
	CodeWrongType    = "wrong_type"
	CodeMissingField = "missing_field"
	CodeInvalidValue = "invalid_value"
	CodeTooLarge     = "too_large"
)

// Problem is one thing wrong with a config. It never contains a configured
// value.
type Problem struct {
	// Pointer is the RFC 6901 pointer of the offending member inside the
	// binding's config ("" for the config itself).
	Pointer string
	Code    string
	Remedy  string
}

// ConfigError lists every problem of a config, in document order.
type ConfigError struct {
	Executor string
	Problems []Problem
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("invalid " + e.Executor + " executor config")
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = "(config)"
		}
		b.WriteString(ptr + ": " + p.Code + ": " + p.Remedy)
	}
	return b.String()
}

const configFields = "binary, model, playbook, prompt, tools, max_turns, timeout, workdir and secrets"

// ParseConfig parses a binding's executor config strictly: unknown,
// duplicate and null members are refused, as are wrong types and values
// the executor cannot run; every problem is reported at once as a
// *ConfigError. An empty raw config is an empty object (and misses its
// required members).
func ParseConfig(spec Spec, raw json.RawMessage) (Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	p := &parser{spec: spec}
	cfg := Config{Binary: spec.Binary, MaxTurns: DefaultTurns, Timeout: DefaultTimeout, Secrets: map[string]string{}}
	for role, env := range spec.Secrets {
		cfg.Secrets[role] = env
	}
	if !jsontext.Value(raw).IsValid(jsontext.AllowDuplicateNames(true)) {
		p.add("", CodeInvalidJSON, "write the config as one JSON object in valid UTF-8")
		return cfg, p.err()
	}
	p.dec = jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if !p.expect("", '{', `write the config as an object such as {"model": "...", "prompt": "..."}`) {
		return cfg, p.err()
	}
	seen := map[string]bool{}
	for p.dec.PeekKind() == '"' {
		name := p.readString()
		ptr := "/" + escapePointer(name)
		if seen[name] {
			p.add(ptr, CodeDuplicateKey, "give each member once")
			p.skip()
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
					p.add(ptr, CodeInvalidValue, "name the model with up to 200 letters, digits and . _ : / @ + -, starting with a letter or digit")
				}
			}
		case "playbook":
			if s, ok := p.str(ptr, "name a playbook as a string"); ok {
				cfg.Playbook = s
				if !playbookRule.MatchString(s) {
					p.add(ptr, CodeInvalidValue, "a playbook name is a lower-case letter followed by up to 62 lower-case letters, digits, '-' or '_'")
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
		default:
			p.add(ptr, CodeUnknownField, "remove it; the "+spec.Executor+" executor knows "+configFields)
			p.skip()
		}
	}
	if !seen["model"] {
		p.add("/model", CodeMissingField, `name the model the agent asks for, e.g. "model": "..."`)
	}
	if !seen["prompt"] {
		p.add("/prompt", CodeMissingField, `give the first turn's prompt as a template over the Work's input Events, e.g. "prompt": "{{range .Events}}{{.Type}}{{end}}"`)
	}
	if cfg.Tools == nil {
		cfg.Tools = []string{}
	}
	return cfg, p.err()
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
	spec     Spec
	dec      *jsontext.Decoder
	problems []Problem
}

func (p *parser) add(ptr, code, remedy string) {
	p.problems = append(p.problems, Problem{Pointer: ptr, Code: code, Remedy: remedy})
}

func (p *parser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	return &ConfigError{Executor: p.spec.Executor, Problems: p.problems}
}

// expect consumes the start of a value of kind want ('{', '[', '"' or
// '0'). If the value is of another kind it records the problem, skips the
// value and returns false. For '"' and '0' the value is left to read.
func (p *parser) expect(ptr string, want jsontext.Kind, remedy string) bool {
	switch p.dec.PeekKind() {
	case want:
		if want == '{' || want == '[' {
			p.dec.ReadToken()
		}
		return true
	case 'n':
		p.add(ptr, CodeNullValue, "remove the member or give it a value; "+remedy)
	default:
		p.add(ptr, CodeWrongType, remedy)
	}
	p.skip()
	return false
}

func (p *parser) skip() { p.dec.SkipValue() }

func (p *parser) readString() string {
	tok, _ := p.dec.ReadToken()
	return tok.String()
}

func (p *parser) end() { p.dec.ReadToken() }

func (p *parser) str(ptr, remedy string) (string, bool) {
	if !p.expect(ptr, '"', remedy) {
		return "", false
	}
	return p.readString(), true
}

func (p *parser) binary(ptr, s string) {
	const remedy = "name the agent program (looked up on PATH) or give its absolute path"
	if strings.IndexByte(s, 0) >= 0 {
		p.add(ptr, CodeInvalidValue, remedy)
		return
	}
	if strings.ContainsRune(s, '/') {
		if !filepath.IsAbs(s) || filepath.Clean(s) != s {
			p.add(ptr, CodeInvalidValue, remedy+": a path is absolute and clean")
		}
		return
	}
	if !programRule.MatchString(s) {
		p.add(ptr, CodeInvalidValue, remedy+": a name is letters, digits and . _ + -, not starting with . or -")
	}
}

func (p *parser) prompt(ptr, s string) *template.Template {
	if len(s) > MaxPromptBytes {
		p.add(ptr, CodeTooLarge, "keep the prompt template within 64 KiB; put long instructions in the playbook")
		return nil
	}
	if strings.TrimSpace(s) == "" {
		p.add(ptr, CodeInvalidValue, "write a prompt; an empty one gives the agent nothing to do")
		return nil
	}
	t, err := template.New("prompt").Option("missingkey=error").Parse(s)
	if err != nil {
		// The parse error quotes the template: give only its line.
		p.add(ptr, CodeInvalidValue, "the prompt is not a valid Go text/template"+templateLine(err.Error()))
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
	if !p.expect(ptr, '[', remedy) {
		return nil
	}
	tools := []string{}
	for i := 0; p.dec.PeekKind() != ']'; i++ {
		ep := ptr + "/" + strconv.Itoa(i)
		s, ok := p.str(ep, "write each tool name as a string")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(strings.ToLower(s), "mcp__"):
			p.add(ep, CodeInvalidValue, "remove it; the toolbelt's operations reach the agent as MCP tools through the binding's operations and grants")
		case !toolRule.MatchString(s):
			p.add(ep, CodeInvalidValue, "name a built-in tool: a letter, then letters, digits or '_', optionally with a (specifier) without commas")
		case slices.Contains(tools, s):
			p.add(ep, CodeDuplicateKey, "name each tool once")
		case len(tools) == MaxTools:
			p.add(ep, CodeInvalidValue, "name at most 64 tools")
		default:
			tools = append(tools, s)
		}
	}
	p.end()
	return tools
}

func (p *parser) turns(ptr string) int {
	const remedy = "give the most turns as a whole number from 1 to 500"
	if !p.expect(ptr, '0', remedy) {
		return DefaultTurns
	}
	tok, _ := p.dec.ReadToken()
	n, err := strconv.ParseInt(tok.String(), 10, 64)
	if err != nil || n < MinTurns || n > MaxTurns {
		p.add(ptr, CodeInvalidValue, remedy)
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
		p.add(ptr, CodeInvalidValue, remedy)
		return DefaultTimeout
	}
	return d
}

func (p *parser) workdir(ptr string) Workdir {
	const remedy = `give an absolute directory, or {"git": {"repository": "...", "ref": "..."}} for a checkout of its own per Work`
	switch p.dec.PeekKind() {
	case '"':
		dir := p.readString()
		if dir == "" || strings.IndexByte(dir, 0) >= 0 || !filepath.IsAbs(dir) {
			p.add(ptr, CodeInvalidValue, remedy)
			return Workdir{}
		}
		return Workdir{Dir: filepath.Clean(dir)}
	case '{':
	default:
		p.expect(ptr, '{', remedy)
		return Workdir{}
	}
	p.dec.ReadToken()
	var w Workdir
	seen := false
	for p.dec.PeekKind() == '"' {
		name := p.readString()
		mp := ptr + "/" + escapePointer(name)
		if name != "git" {
			p.add(mp, CodeUnknownField, "remove it; a workdir object has only git")
			p.skip()
			continue
		}
		if seen {
			p.add(mp, CodeDuplicateKey, "give git once")
			p.skip()
			continue
		}
		seen = true
		w = p.git(mp)
	}
	p.end()
	if !seen {
		p.add(ptr+"/git", CodeMissingField, remedy)
	}
	return w
}

func (p *parser) git(ptr string) Workdir {
	var w Workdir
	if !p.expect(ptr, '{', `give {"repository": "...", "ref": "..."}`) {
		return w
	}
	seen := map[string]bool{}
	for p.dec.PeekKind() == '"' {
		name := p.readString()
		mp := ptr + "/" + escapePointer(name)
		if seen[name] {
			p.add(mp, CodeDuplicateKey, "give each member once")
			p.skip()
			continue
		}
		seen[name] = true
		switch name {
		case "repository":
			if s, ok := p.str(mp, "give the repository's URL or absolute path as a string"); ok {
				w.Repository = s
				if rem := checkRepository(s); rem != "" {
					p.add(mp, CodeInvalidValue, rem)
				}
			}
		case "ref":
			if s, ok := p.str(mp, "name a branch, tag or commit as a string"); ok {
				w.Ref = s
				if !validRef(s) {
					p.add(mp, CodeInvalidValue, "name a branch, tag or commit: no spaces, control characters, .., ~ ^ : ? * [ \\, not starting with - or ending with / or .lock")
				}
			}
		default:
			p.add(mp, CodeUnknownField, "remove it; git knows repository and ref")
			p.skip()
		}
	}
	p.end()
	if !seen["repository"] {
		p.add(ptr+"/repository", CodeMissingField, "name the repository to check out, by URL or absolute path")
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
	if !p.expect(ptr, '{', `map each secret the agent needs to the binding's secret by its variable name, e.g. {"api_key": "MODEL_API_KEY"}`) {
		return
	}
	seen := map[string]bool{}
	for p.dec.PeekKind() == '"' {
		role := p.readString()
		mp := ptr + "/" + escapePointer(role)
		if seen[role] {
			p.add(mp, CodeDuplicateKey, "give each secret once")
			p.skip()
			continue
		}
		seen[role] = true
		env, ok := p.str(mp, "name the binding's secret by its environment variable name, as a string")
		if !ok {
			continue
		}
		if _, known := p.spec.Secrets[role]; !known || !roleRule.MatchString(role) {
			p.add(mp, CodeUnknownField, "remove it; the "+p.spec.Executor+" executor needs "+strings.Join(sortedKeys(p.spec.Secrets), ", "))
			continue
		}
		if !envRule.MatchString(env) {
			p.add(mp, CodeInvalidValue, "name the binding's secret by its environment variable name: upper-case letters, digits and '_', not starting with a digit")
			continue
		}
		into[role] = env
	}
	p.end()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escapePointer escapes a member name for an RFC 6901 pointer.
func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
