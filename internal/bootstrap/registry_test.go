package bootstrap

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
)

// want is an expected diagnostic: pointer and code.
type want struct {
	ptr  string
	code config.Code
}

func got(ds []config.Diagnostic) []want {
	out := []want{}
	for _, d := range ds {
		out = append(out, want{d.Pointer, d.Code})
	}
	return out
}

func one(ptr string, code config.Code) []want { return []want{{ptr, code}} }

// TestReleaseRegistry: the shell executor has the toolbelt but not resume.
func TestReleaseRegistry(t *testing.T) {
	reg := ReleaseRegistry()
	info, ok := reg.Executor("shell")
	if !ok || info.Transport != executor.TransportOS || !info.Has(executor.CapToolbelt) || info.Has(executor.CapResume) {
		t.Fatalf("shell: %+v %v", info, ok)
	}
	for _, b := range []string{"emit", "create_work", "wait", "declare_outcome", "read_context"} {
		if owner, ok := reg.OperationOwner(b); !ok || owner != "" {
			t.Errorf("builtin %s: %q %v", b, owner, ok)
		}
	}
	text := `{"version": 1, "scopes": {"a": {"bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "requires": ["toolbelt", "resume"]}}}}}`
	_, res := config.Validate([]byte(text), reg)
	if g := got(res.Diagnostics); !slices.Equal(g, one("/scopes/a/bindings/b/requires/1", config.CodeInvalidCapability)) {
		t.Fatalf("got %v", g)
	}
	if real := (&shell.Executor{}).Info(); !reflect.DeepEqual(real, ShellExecutorInfo) {
		t.Fatalf("ShellExecutorInfo %+v, the executor says %+v", ShellExecutorInfo, real)
	}
}

// TestReleaseRegistryChecksShellConfig: the shell executor's own problems
// come back at their places inside the binding's config, with member names
// that are not safe to show cut off.
func TestReleaseRegistryChecksShellConfig(t *testing.T) {
	text := `{"version": 1, "scopes": {"a": {"bindings": {
		"ok": {"executor": "shell", "config": {"command": ["sh", "-c", "true"], "env": {"LOG": "1"}, "dir": "repo"}},
		"bad": {"executor": "shell", "config": {"command": [], "env": {"Bad Name": "x", "OS_TOKEN_FILE": "y"}, "extra": 1, "dir": 5}},
		"none": {"executor": "shell"}
	}}}}`
	_, res := config.Validate([]byte(text), ReleaseRegistry())
	want := []want{
		{"/scopes/a/bindings/bad/config/command", config.CodeInvalidValue},
		{"/scopes/a/bindings/bad/config/dir", config.CodeWrongType},
		{"/scopes/a/bindings/bad/config/env", config.CodeInvalidValue},
		{"/scopes/a/bindings/bad/config/env/OS_TOKEN_FILE", config.CodeInvalidValue},
		{"/scopes/a/bindings/bad/config/extra", config.CodeUnknownField},
		{"/scopes/a/bindings/none/config/command", config.CodeMissingField},
	}
	if g := got(res.Diagnostics); !slices.Equal(g, want) {
		t.Fatalf("got  %v\nwant %v", g, want)
	}
	for _, d := range res.Diagnostics {
		// The canary of internal/config's tests.
		if s := d.Pointer; strings.Contains(strings.ToLower(s), strings.ToLower("Zq7.Canary")) || strings.Contains(s, "Zq7") {
			t.Errorf("shell diagnostic leaks the canary: %q", s)
		}
		if strings.Contains(d.Pointer+d.Remedy, "Bad Name") {
			t.Errorf("%v shows an unsafe name", d)
		}
	}
}

// TestEmptyConfigIsValid: version alone is a daemon with nothing to do.
func TestEmptyConfigIsValid(t *testing.T) {
	snap, res := config.Validate([]byte(`{"version": 1}`), ReleaseRegistry())
	if !res.Valid() || len(snap.Scopes()) != 0 {
		t.Fatalf("%v", res.Diagnostics)
	}
}

// TestDocumentedExamplesPassTheRelease: the configurations in
// docs/config.md that name nothing an extension registers pass
// open-conduit config check as this release ships.
func TestDocumentedExamplesPassTheRelease(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(text), "```json\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if !strings.Contains(block, `"version"`) {
			continue
		}
		n++
		if !strings.Contains(block, "github") && !strings.Contains(block, "extensions") && !strings.Contains(block, "playbook") {
			if _, res := config.Validate([]byte(block), ReleaseRegistry()); !res.Valid() {
				t.Errorf("documented example %d fails the release registry: %v", n, res.Diagnostics)
			}
		}
	}
	if n < 4 {
		t.Fatalf("%d examples found, want 4", n)
	}
}

// TestReleaseRegistryChecksAgentConfigs: the agent executors are
// registered resume-capable, their config problems come back at their
// places, and the playbook a config names is checked like a binding's.
func TestReleaseRegistryChecksAgentConfigs(t *testing.T) {
	reg := ReleaseRegistry()
	for _, name := range []string{"claude-code", "codex"} {
		info, ok := reg.Executor(name)
		if !ok || info.Transport != executor.TransportOS || !info.Has(executor.CapToolbelt) || !info.Has(executor.CapResume) {
			t.Fatalf("%s: %+v %v", name, info, ok)
		}
		text := `{"version": 1, "scopes": {"a": {"bindings": {
			"ok": {"executor": "` + name + `", "config": {"model": "m", "prompt": "{{range .Events}}{{end}}"}, "requires": ["resume"]},
			"bad": {"executor": "` + name + `", "config": {"model": "m", "prompt": "{{", "max_turns": 0, "tools": ["mcp__os__emit"], "colour": 1}},
			"pb": {"executor": "` + name + `", "config": {"model": "m", "prompt": "p", "playbook": "no-such-playbook"}}
		}}}}`
		_, res := config.Validate([]byte(text), reg)
		want := []want{
			{"/scopes/a/bindings/bad/config/colour", config.CodeUnknownField},
			{"/scopes/a/bindings/bad/config/max_turns", config.CodeInvalidValue},
			{"/scopes/a/bindings/bad/config/prompt", config.CodeInvalidValue},
			{"/scopes/a/bindings/bad/config/tools/0", config.CodeInvalidValue},
			{"/scopes/a/bindings/pb/config", config.CodeUnknownReference},
		}
		if g := got(res.Diagnostics); !slices.Equal(g, want) {
			t.Fatalf("%s: got  %v\nwant %v", name, g, want)
		}
	}
}
