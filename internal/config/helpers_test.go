package config

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// errRefused is what the test shell executor's config check returns.
var errRefused = errors.New("refused")

// testRegistry is the registry the tests validate against: two executors
// (shell without resume, agent with it), the builtins, a github extension
// with two toolsets whose members joined in different versions, and an
// introspection extension, opt-in as the release's is.
func testRegistry(t testing.TB) *Registry {
	t.Helper()
	reg := NewRegistry()
	check := func(raw json.RawMessage) error {
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			return err
		}
		if _, ok := c["command"]; !ok && len(c) > 0 {
			return errRefused
		}
		return nil
	}
	must(t, reg.AddExecutor(executor.Info{Name: "shell", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}}, check))
	must(t, reg.AddExecutor(executor.Info{Name: "agent", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt, executor.CapResume}}, nil))
	must(t, reg.AddExtension("github",
		[]string{"github.issue.view", "github.issue.comment", "github.pr.create", "github.pr.edit", "github.pr.review", "github.git.credential"},
		[]extension.Toolset{
			{Name: "github.author", Operations: []extension.ToolsetOperation{
				{Name: "github.issue.view", Since: "1.0.0"},
				{Name: "github.issue.comment", Since: "1.0.0"},
				{Name: "github.pr.create", Since: "1.0.0"},
				{Name: "github.git.credential", Since: "1.3.0"},
				{Name: "github.pr.edit", Since: "1.4.0"},
				{Name: "emit", Since: "1.0.0"},
			}},
			{Name: "github.reviewer", Operations: []extension.ToolsetOperation{
				{Name: "github.issue.view", Since: "1.0.0"},
				{Name: "github.pr.review", Since: "1.0.0"},
			}},
		}))
	must(t, reg.AddExtension("introspection", []string{"introspection.scopes"}, nil))
	must(t, reg.SetExtensionOptIn("introspection")) // as the release's is
	must(t, reg.AddPlaybook("triage", []string{"emit", "github.issue.view", "github.issue.comment"}))
	return reg
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// baseConfig is a valid configuration using every member of the format.
const baseConfig = `{
  "version": 1,
  "limits": {"causal_max_depth": 8, "causal_per_minute": 60, "max_running": 4, "attempt_timeout": "1h", "lease": "30s"},
  "secrets": {"gh": "env:GH_TOKEN", "slack": "keyring:open-conduit/slack", "db": "file:db_password", "vault": "cmd:pass show ci/token"},
  "extensions": {"introspection": {"enabled": true, "scopes": ["ops"]}},
  "scopes": {
    "root": {
      "authorization": {
        "operations": ["emit", "create_work", "wait", "declare_outcome", "read_context", "@github.author", "@github.reviewer", "!github.pr.edit"],
        "reads": ["work", "events", "executions"]
      }
    },
    "ops": {
      "parent": "root",
      "enabled": true,
      "removed": false,
      "authorization": {"operations": ["emit", "wait", "declare_outcome", "@github.author", "github.pr.review"], "reads": ["work", "events"]},
      "bindings": {
        "agent": {
          "executor": "shell",
          "config": {"command": ["sh", "-c", "./run.sh"]},
          "operations": ["emit", "declare_outcome", "@github.author"],
          "secrets": {"GH_TOKEN": "gh"},
          "grants": {"review": {"operations": ["github.pr.review"]}},
          "requires": ["toolbelt"],
          "playbook": "triage"
        }
      },
      "routes": [
        {"id": "manual", "match": {"type": "deploy.*", "source": "core.manual"}, "binding": "agent", "effect": "start"},
        {"id": "github", "match": {"type": "github.*"}, "binding": "agent"},
        {"id": "noise", "match": {"type": "slack.message"}, "effect": "drop"}
      ]
    },
    "old": {"removed": true, "parent": "gone", "bindings": {"x": {"executor": "retired"}}}
  }
}`

// doc is a configuration as a generic value, for mutations.
type jdoc = map[string]any

func decode(t testing.TB, s string) jdoc {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v jdoc
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tokens splits an RFC 6901 pointer (no escapes are used in tests).
func tokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	return strings.Split(ptr[1:], "/")
}

// set puts v at ptr, creating objects on the way; "-" appends to an array.
func set(t testing.TB, root jdoc, ptr string, v any) {
	t.Helper()
	toks := tokens(ptr)
	var cur any = root
	for i, tok := range toks {
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[tok] = v
				return
			}
			if _, ok := c[tok]; !ok {
				c[tok] = map[string]any{}
			}
			cur = c[tok]
		case []any:
			parent := resolvePtr(t, root, "/"+strings.Join(toks[:i], "/"))
			_ = parent
			if tok == "-" && last {
				setPtr(t, root, toks[:i], append(c, v))
				return
			}
			n, err := strconv.Atoi(tok)
			if err != nil || n >= len(c) {
				t.Fatalf("bad index %s in %s", tok, ptr)
			}
			if last {
				c[n] = v
				return
			}
			cur = c[n]
		default:
			t.Fatalf("cannot descend into %T at %s", cur, ptr)
		}
	}
}

func setPtr(t testing.TB, root jdoc, toks []string, v any) {
	t.Helper()
	set(t, root, "/"+strings.Join(toks, "/"), v)
}

func resolvePtr(t testing.TB, root jdoc, ptr string) any {
	t.Helper()
	var cur any = root
	for _, tok := range tokens(ptr) {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			n, _ := strconv.Atoi(tok)
			cur = c[n]
		}
	}
	return cur
}

// del removes the member at ptr.
func del(t testing.TB, root jdoc, ptr string) {
	t.Helper()
	toks := tokens(ptr)
	parent := resolvePtr(t, root, "/"+strings.Join(toks[:len(toks)-1], "/"))
	if len(toks) == 1 {
		parent = root
	}
	m, ok := parent.(map[string]any)
	if !ok {
		t.Fatalf("no object at the parent of %s", ptr)
	}
	if _, ok := m[toks[len(toks)-1]]; !ok {
		t.Fatalf("nothing at %s", ptr)
	}
	delete(m, toks[len(toks)-1])
}

// raw is a JSON value spelled out, set as is.
type raw string

func (r raw) MarshalJSON() ([]byte, error) { return []byte(r), nil }
