package shell

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Config is a shell binding's executor config:
//
//	{"command": ["sh", "-c", "./run.sh"], "env": {"LOG_LEVEL": "debug"}, "dir": "repo"}
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
	Problems []Problem
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("invalid shell executor config")
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
	p := &configParser{}
	var cfg Config
	if !jsontext.Value(raw).IsValid(jsontext.AllowDuplicateNames(true)) {
		p.add("", CodeInvalidJSON, "write the config as one JSON object in valid UTF-8")
		return cfg, p.err()
	}
	p.dec = jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowDuplicateNames(true))
	if !p.expect("", '{', `write the config as an object such as {"command": ["sh", "-c", "./run.sh"]}`) {
		return cfg, p.err()
	}
	seen := map[string]bool{}
	for p.dec.PeekKind() == '"' {
		name := p.readString()
		ptr := "/" + escapePointer(name)
		switch {
		case seen[name]:
			p.add(ptr, CodeDuplicateKey, "give each member once")
			p.skip()
			continue
		case name == "command":
			cfg.Command = p.command(ptr)
		case name == "env":
			cfg.Env = p.env(ptr)
		case name == "dir":
			cfg.Dir = p.dir(ptr)
		default:
			p.add(ptr, CodeUnknownField, "remove it; the shell executor knows command, env and dir")
			p.skip()
		}
		seen[name] = true
	}
	if !seen["command"] {
		p.add("/command", CodeMissingField, `name the program to run, e.g. "command": ["sh", "-c", "./run.sh"]`)
	}
	return cfg, p.err()
}

// configParser walks a syntactically valid document, collecting problems.
type configParser struct {
	dec      *jsontext.Decoder
	problems []Problem
}

func (p *configParser) add(ptr, code, remedy string) {
	p.problems = append(p.problems, Problem{Pointer: ptr, Code: code, Remedy: remedy})
}

func (p *configParser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	return &ConfigError{Problems: p.problems}
}

// expect consumes the start of a value of kind want ('{', '[' or '"'). If the
// value is of another kind it records the problem, skips the value and
// returns false. For '"' the string is left to read.
func (p *configParser) expect(ptr string, want jsontext.Kind, remedy string) bool {
	switch p.dec.PeekKind() {
	case want:
		if want != '"' {
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

func (p *configParser) skip() { p.dec.SkipValue() }

func (p *configParser) readString() string {
	tok, _ := p.dec.ReadToken()
	return tok.String()
}

// end consumes the closing '}' or ']'.
func (p *configParser) end() { p.dec.ReadToken() }

func (p *configParser) command(ptr string) []string {
	const remedy = `give the program and its arguments as an array of strings, e.g. ["sh", "-c", "./run.sh"]`
	if !p.expect(ptr, '[', remedy) {
		return nil
	}
	var argv []string
	for i := 0; p.dec.PeekKind() != ']'; i++ {
		ep := ptr + "/" + strconv.Itoa(i)
		if !p.expect(ep, '"', "write each argument as a string") {
			continue
		}
		arg := p.readString()
		switch {
		case strings.IndexByte(arg, 0) >= 0:
			p.add(ep, CodeInvalidValue, "remove the NUL byte; a command line cannot carry one")
		case i == 0 && arg == "":
			p.add(ep, CodeInvalidValue, "name the program to run as the first element")
		}
		argv = append(argv, arg)
	}
	p.end()
	if len(argv) == 0 {
		p.add(ptr, CodeInvalidValue, remedy)
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
	if !p.expect(ptr, '{', `give the variables as an object of strings, e.g. {"LOG_LEVEL": "debug"}`) {
		return nil
	}
	env := map[string]string{}
	for p.dec.PeekKind() == '"' {
		name := p.readString()
		ep := ptr + "/" + escapePointer(name)
		if _, dup := env[name]; dup {
			p.add(ep, CodeDuplicateKey, "give each variable once")
			p.skip()
			continue
		}
		if !p.expect(ep, '"', "write the value as a string") {
			env[name] = ""
			continue
		}
		value := p.readString()
		switch {
		case !envName.MatchString(name):
			p.add(ep, CodeInvalidValue, "name the variable with letters, digits and underscores, not starting with a digit")
		case reservedEnv(name):
			p.add(ep, CodeInvalidValue, "remove it; the host sets OS_ENDPOINT, OS_TOKEN_FILE and OPEN_CONDUIT_* itself")
		case strings.IndexByte(value, 0) >= 0:
			p.add(ep, CodeInvalidValue, "remove the NUL byte; an environment value cannot carry one")
		}
		env[name] = value
	}
	p.end()
	return env
}

func (p *configParser) dir(ptr string) string {
	const remedy = "give an absolute path, or a path inside the execution's work directory"
	if !p.expect(ptr, '"', remedy) {
		return ""
	}
	dir := p.readString()
	if dir == "" || strings.IndexByte(dir, 0) >= 0 || !filepath.IsAbs(dir) && !filepath.IsLocal(dir) {
		p.add(ptr, CodeInvalidValue, remedy+" (no .. that leaves it)")
	}
	return dir
}

// escapePointer escapes a member name for an RFC 6901 pointer.
func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
