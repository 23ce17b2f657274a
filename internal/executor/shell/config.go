package shell

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

// Config is a shell binding's executor config:
//
//	{"command": ["sh", "-c", "./run.sh"], "env": {"LOG_LEVEL": "debug"}, "dir": "repo",
//	 "sandbox": {"enabled": true}}
type Config struct {
	// Command is the program and its arguments; the program is looked up
	// on the command's PATH. Required, non-empty.
	Command []string
	// Env adds variables to the command's environment.
	Env map[string]string
	// Dir is the working directory: absolute, or relative to the
	// execution's work directory (<execution dir>/work), which is the
	// default.
	Dir string
	// Sandbox says whether the command runs inside a sandbox (package
	// sandbox); off unless the config says so.
	Sandbox sandbox.Config
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
)

// Problem is one thing wrong with a config (executor.ConfigProblem).
type Problem = executor.ConfigProblem

// ConfigError lists every problem of a config, in document order
// (executor.ConfigError).
type ConfigError = executor.ConfigError

// ValidateConfig checks a binding's executor config and reports every
// problem at once as a *ConfigError.
func ValidateConfig(raw json.RawMessage) error {
	_, err := ParseConfig(raw)
	return err
}

// ParseConfig parses a binding's executor config strictly: unknown, duplicate
// and null members are refused, as are wrong types and values the executor
// cannot run. An empty raw config is an empty object.
func ParseConfig(raw json.RawMessage) (Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	p := &configParser{ConfigWalker: executor.ConfigWalker{Executor: "shell"}}
	var cfg Config
	if !jsontext.Value(raw).IsValid(jsontext.AllowDuplicateNames(true)) {
		p.Add("", CodeInvalidJSON, "write the config as one JSON object in valid UTF-8")
		return cfg, p.Err()
	}
	p.Dec = jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if !p.Expect("", '{', `write the config as an object such as {"command": ["sh", "-c", "./run.sh"]}`) {
		return cfg, p.Err()
	}
	seen := map[string]bool{}
	for p.Dec.PeekKind() == '"' {
		name := p.ReadString()
		ptr := "/" + executor.EscapePointer(name)
		switch {
		case seen[name]:
			p.Add(ptr, CodeDuplicateKey, "give each member once")
			p.Skip()
			continue
		case name == "command":
			cfg.Command = p.command(ptr)
		case name == "env":
			cfg.Env = p.env(ptr)
		case name == "dir":
			cfg.Dir = p.dir(ptr)
		case name == "sandbox":
			cfg.Sandbox = sandbox.Parse(&p.ConfigWalker, ptr, false)
		default:
			p.Add(ptr, CodeUnknownField, "remove it; the shell executor knows command, env, dir and sandbox")
			p.Skip()
		}
		seen[name] = true
	}
	if !seen["command"] {
		p.Add("/command", CodeMissingField, `name the program to run, e.g. "command": ["sh", "-c", "./run.sh"]`)
	}
	return cfg, p.Err()
}

// configParser walks a syntactically valid document, collecting problems.
type configParser struct {
	executor.ConfigWalker
}

func (p *configParser) command(ptr string) []string {
	const remedy = `give the program and its arguments as an array of strings, e.g. ["sh", "-c", "./run.sh"]`
	if !p.Expect(ptr, '[', remedy) {
		return nil
	}
	var argv []string
	for i := 0; p.Dec.PeekKind() != ']'; i++ {
		ep := ptr + "/" + strconv.Itoa(i)
		if !p.Expect(ep, '"', "write each argument as a string") {
			continue
		}
		arg := p.ReadString()
		switch {
		case strings.IndexByte(arg, 0) >= 0:
			p.Add(ep, CodeInvalidValue, "remove the NUL byte; a command line cannot carry one")
		case i == 0 && arg == "":
			p.Add(ep, CodeInvalidValue, "name the program to run as the first element")
		}
		argv = append(argv, arg)
	}
	p.End()
	if len(argv) == 0 {
		p.Add(ptr, CodeInvalidValue, remedy)
	}
	return argv
}

// envName is a portable environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv reports whether the host sets name itself, so that neither a
// binding nor a secret may.
func reservedEnv(name string) bool {
	return name == "OS_ENDPOINT" || name == "OS_TOKEN_FILE" || strings.HasPrefix(name, "OPEN_CONDUIT_")
}

func (p *configParser) env(ptr string) map[string]string {
	if !p.Expect(ptr, '{', `give the variables as an object of strings, e.g. {"LOG_LEVEL": "debug"}`) {
		return nil
	}
	env := map[string]string{}
	for p.Dec.PeekKind() == '"' {
		name := p.ReadString()
		ep := ptr + "/" + executor.EscapePointer(name)
		if _, dup := env[name]; dup {
			p.Add(ep, CodeDuplicateKey, "give each variable once")
			p.Skip()
			continue
		}
		if !p.Expect(ep, '"', "write the value as a string") {
			env[name] = ""
			continue
		}
		value := p.ReadString()
		switch {
		case !envName.MatchString(name):
			p.Add(ep, CodeInvalidValue, "name the variable with letters, digits and underscores, not starting with a digit")
		case reservedEnv(name):
			p.Add(ep, CodeInvalidValue, "remove it; the host sets OS_ENDPOINT, OS_TOKEN_FILE and OPEN_CONDUIT_* itself")
		case strings.IndexByte(value, 0) >= 0:
			p.Add(ep, CodeInvalidValue, "remove the NUL byte; an environment value cannot carry one")
		}
		env[name] = value
	}
	p.End()
	return env
}

func (p *configParser) dir(ptr string) string {
	const remedy = "give an absolute path, or a path inside the execution's work directory"
	if !p.Expect(ptr, '"', remedy) {
		return ""
	}
	dir := p.ReadString()
	if dir == "" || strings.IndexByte(dir, 0) >= 0 || !filepath.IsAbs(dir) && !filepath.IsLocal(dir) {
		p.Add(ptr, CodeInvalidValue, remedy+" (no .. that leaves it)")
	}
	return dir
}
