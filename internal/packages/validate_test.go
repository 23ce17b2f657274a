package packages

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const goodPlaybook = "---\noperations: [deploy.run]\n---\n# Deploying\n"

// writePackage writes a package directory: the manifest and the files
// given (a name ending in * is made executable).
func writePackage(t *testing.T, manifest string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if manifest != "" {
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range files {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const goodManifest = `{
  "name": "deploy",
  "version": "1.2.0",
  "summary": "Deploys a service",
  "run": {"command": ["./server", "--stdio"], "env": {"MODE": "prod"}},
  "provides": {
    "operations": [
      {"name": "deploy.run", "summary": "Deploy one service", "input_schema": {"type": "object"}},
      {"name": "deploy.announce", "summary": "Announce a deploy", "kind": "emit"}
    ],
    "toolsets": [{"name": "deploy.operator", "operations": [{"name": "deploy.run", "since": "1.0.0"}, {"name": "emit", "since": "1.0.0"}]}],
    "operation_gate": true,
    "executors": [{"kind": "runner", "playbook": "deploying"}],
    "playbooks": [{"name": "deploying", "file": "playbooks/deploying.md"}]
  },
  "permissions": ["operation.gate", "event.emit", "executor.run"]
}`

var goodFiles = map[string]string{"server*": "#!/bin/sh\n", "playbooks/deploying.md": goodPlaybook}

func TestCheckAcceptsAGoodManifest(t *testing.T) {
	c := Check(writePackage(t, goodManifest, goodFiles), CheckOptions{})
	if !c.Valid() || len(c.Warnings) != 0 {
		t.Fatalf("diagnostics %v, warnings %v", c.Diagnostics, c.Warnings)
	}
	if c.Manifest.Name != "deploy" || len(c.Playbooks) != 1 || c.Playbooks[0].Markdown != goodPlaybook {
		t.Fatalf("checked %+v", c)
	}
}

// An executor's "dir" is read as written: absent (nil), false or true.
func TestCheckExecutorDir(t *testing.T) {
	for _, c := range []struct {
		member string
		want   string
	}{{"", "absent"}, {`, "dir": false`, "false"}, {`, "dir": true`, "true"}} {
		m := edit(t, `"kind": "runner"`, `"kind": "runner"`+c.member)
		ch := Check(writePackage(t, m, goodFiles), CheckOptions{})
		if !ch.Valid() {
			t.Fatalf("%q: diagnostics %v", c.member, ch.Diagnostics)
		}
		got := "absent"
		if d := ch.Manifest.Provides.Executors[0].Dir; d != nil {
			got = map[bool]string{false: "false", true: "true"}[*d]
		}
		if got != c.want {
			t.Errorf("%q: dir read as %s, want %s", c.member, got, c.want)
		}
	}
}

// edit replaces old with new in the good manifest, failing when old is
// not there (so a case can never pass by editing nothing).
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	m := goodManifest
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(m, pairs[i]) {
			t.Fatalf("the good manifest has no %q", pairs[i])
		}
		m = strings.Replace(m, pairs[i], pairs[i+1], 1)
	}
	return m
}

func TestCheckRefusals(t *testing.T) {
	cases := []struct {
		name     string
		manifest func(t *testing.T) string
		files    map[string]string
		taken    []string
		pointer  string
		code     string
	}{
		{name: "no manifest", manifest: func(*testing.T) string { return "" }, pointer: "", code: CodeManifestMissing},
		{name: "not JSON", manifest: func(*testing.T) string { return `{"name":` }, code: CodeInvalidJSON, pointer: "/name"},
		{name: "unknown member", manifest: func(t *testing.T) string { return edit(t, `"summary":`, `"colour": "red", "summary":`) }, pointer: "/colour", code: CodeUnknownField},
		{name: "unknown nested member", manifest: func(t *testing.T) string { return edit(t, `"kind": "runner"`, `"kind": "runner", "x": 1`) }, pointer: "/provides/executors/0/x", code: CodeUnknownField},
		{name: "wrong type", manifest: func(t *testing.T) string { return edit(t, `"version": "1.2.0"`, `"version": 12`) }, pointer: "/version", code: CodeWrongType},
		{name: "duplicate member", manifest: func(t *testing.T) string { return edit(t, `"version": "1.2.0"`, `"version": "1.2.0", "version": "2"`) }, code: CodeDuplicate},
		{name: "bad name", manifest: func(t *testing.T) string { return edit(t, `"name": "deploy"`, `"name": "Deploy.x"`) }, pointer: "/name", code: CodeInvalidName},
		{name: "squats github", manifest: func(t *testing.T) string {
			return strings.ReplaceAll(goodManifest, "deploy", "github")
		}, pointer: "/name", code: CodeNameTaken},
		{name: "squats emit", manifest: func(t *testing.T) string {
			return strings.ReplaceAll(goodManifest, `"deploy`, `"emit`)
		}, pointer: "/name", code: CodeNameTaken},
		{name: "squats core", manifest: func(t *testing.T) string { return strings.ReplaceAll(goodManifest, `"deploy`, `"core`) }, pointer: "/name", code: CodeNameTaken},
		{name: "another package's name", manifest: func(*testing.T) string { return goodManifest }, taken: []string{"deploy"}, pointer: "/name", code: CodeNameTaken},
		{name: "no version", manifest: func(t *testing.T) string { return edit(t, `"version": "1.2.0"`, `"version": ""`) }, pointer: "/version", code: CodeMissingField},
		{name: "bad version", manifest: func(t *testing.T) string { return edit(t, `"version": "1.2.0"`, `"version": "1 2"`) }, pointer: "/version", code: CodeInvalidVersion},
		{name: "bad kind", manifest: func(t *testing.T) string {
			return edit(t, `"summary": "Deploys`, `"kind": "wasm", "summary": "Deploys`)
		}, pointer: "/kind", code: CodeInvalidKind},
		{name: "no command", manifest: func(t *testing.T) string { return edit(t, `"command": ["./server", "--stdio"]`, `"command": []`) }, pointer: "/run/command", code: CodeMissingField},
		{name: "command missing", manifest: func(t *testing.T) string { return edit(t, `"./server"`, `"./absent"`) }, pointer: "/run/command/0", code: CodeFileMissing},
		{name: "command outside", manifest: func(t *testing.T) string { return edit(t, `"./server"`, `"../server"`) }, pointer: "/run/command/0", code: CodePathOutside},
		{name: "command not executable", manifest: func(*testing.T) string { return goodManifest }, files: map[string]string{"server": "#!/bin/sh\n", "playbooks/deploying.md": goodPlaybook}, pointer: "/run/command/0", code: CodeInvalidValue},
		{name: "env secret reference", manifest: func(t *testing.T) string { return edit(t, `"MODE": "prod"`, `"TOKEN": "keyring:svc/user"`) }, pointer: "/run/env/TOKEN", code: CodeEnvNotLiteral},
		{name: "env expansion", manifest: func(t *testing.T) string { return edit(t, `"MODE": "prod"`, `"MODE": "${HOME}"`) }, pointer: "/run/env/MODE", code: CodeEnvNotLiteral},
		{name: "env bad name", manifest: func(t *testing.T) string { return edit(t, `"MODE": "prod"`, `"1MODE": "prod"`) }, pointer: "/run/env/1MODE", code: CodeInvalidName},
		{name: "operation outside namespace", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "deploy.run", "summary"`, `{"name": "github.run", "summary"`, `{"name": "deploy.run", "since"`, `{"name": "emit", "since": "1.0.0"}, {"name": "deploy.announce", "since"`)
		}, pointer: "/provides/operations/0/name", code: CodeOutsideNamespace},
		{name: "operation is a builtin", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "deploy.announce", "summary"`, `{"name": "emit", "summary"`)
		}, pointer: "/provides/operations/1/name", code: CodeNameTaken},
		{name: "operation twice", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "deploy.announce", "summary"`, `{"name": "deploy.run", "summary"`)
		}, pointer: "/provides/operations/1/name", code: CodeDuplicate},
		{name: "operation without summary", manifest: func(t *testing.T) string { return edit(t, `"summary": "Deploy one service"`, `"summary": ""`) }, pointer: "/provides/operations/0/summary", code: CodeMissingField},
		{name: "schema not an object", manifest: func(t *testing.T) string {
			return edit(t, `"input_schema": {"type": "object"}`, `"input_schema": {"type": "string"}`)
		}, pointer: "/provides/operations/0/input_schema", code: CodeInvalidSchema},
		{name: "operation kind", manifest: func(t *testing.T) string { return edit(t, `"kind": "emit"`, `"kind": "stream"`) }, pointer: "/provides/operations/1/kind", code: CodeInvalidValue},
		{name: "sensitive emit", manifest: func(t *testing.T) string { return edit(t, `"kind": "emit"`, `"kind": "emit", "sensitive": true`) }, pointer: "/provides/operations/1/sensitive", code: CodeInvalidValue},
		{name: "toolset outside namespace", manifest: func(t *testing.T) string { return edit(t, `"deploy.operator"`, `"slack.operator"`) }, pointer: "/provides/toolsets/0/name", code: CodeOutsideNamespace},
		{name: "toolset grants another's operation", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "deploy.run", "since"`, `{"name": "github.issue.view", "since"`)
		}, pointer: "/provides/toolsets/0/operations/0/name", code: CodeOutsideNamespace},
		{name: "toolset grants an unknown operation", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "deploy.run", "since"`, `{"name": "deploy.nothing", "since"`)
		}, pointer: "/provides/toolsets/0/operations/0/name", code: CodeUnknownOperation},
		{name: "toolset member without since", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "emit", "since": "1.0.0"}`, `{"name": "emit", "since": ""}`)
		}, pointer: "/provides/toolsets/0/operations/1/since", code: CodeMissingField},
		{name: "playbook file missing", manifest: func(*testing.T) string { return goodManifest }, files: map[string]string{"server*": "#!/bin/sh\n"}, pointer: "/provides/playbooks/0/file", code: CodeFileMissing},
		{name: "playbook file outside", manifest: func(t *testing.T) string { return edit(t, `"playbooks/deploying.md"`, `"/etc/passwd"`) }, pointer: "/provides/playbooks/0/file", code: CodePathOutside},
		{name: "playbook without frontmatter", manifest: func(*testing.T) string { return goodManifest }, files: map[string]string{"server*": "#!/bin/sh\n", "playbooks/deploying.md": "# no frontmatter\n"}, pointer: "/provides/playbooks/0/file", code: CodeInvalidPlaybook},
		{name: "playbook bad name", manifest: func(t *testing.T) string {
			return edit(t, `{"name": "deploying", "file"`, `{"name": "Deploying", "file"`, `"playbook": "deploying"`, `"playbook": "Deploying"`)
		}, pointer: "/provides/playbooks/0/name", code: CodeInvalidName},
		{name: "executor playbook unknown", manifest: func(t *testing.T) string { return edit(t, `"playbook": "deploying"`, `"playbook": "elsewhere"`) }, pointer: "/provides/executors/0/playbook", code: CodeUnknownPlaybook},
		{name: "playbook name taken", manifest: func(*testing.T) string { return goodManifest }, taken: []string{"deploying"}, pointer: "/provides/playbooks/0/name", code: CodeNameTaken},
		{name: "executor bad kind", manifest: func(t *testing.T) string { return edit(t, `"kind": "runner"`, `"kind": "Runner"`) }, pointer: "/provides/executors/0/kind", code: CodeInvalidName},
		{name: "undeclared permission", manifest: func(t *testing.T) string { return edit(t, `"executor.run"]`, `"executor.run", "network.any"]`) }, pointer: "/permissions/3", code: CodeUnknownPermission},
		{name: "gate without its permission", manifest: func(t *testing.T) string { return edit(t, `["operation.gate", `, `[`) }, pointer: "/provides/operation_gate", code: CodePermissionRequired},
		{name: "emit without its permission", manifest: func(t *testing.T) string { return edit(t, `"event.emit", `, ``) }, pointer: "/provides/operations/1/kind", code: CodePermissionRequired},
		{name: "executor without its permission", manifest: func(t *testing.T) string { return edit(t, `, "executor.run"`, ``) }, pointer: "/provides/executors", code: CodePermissionRequired},
		{name: "start gate without its permission", manifest: func(t *testing.T) string {
			return edit(t, `"operation_gate": true`, `"operation_gate": true, "start_gate": true`)
		}, pointer: "/provides/start_gate", code: CodePermissionRequired},
		{name: "mcp with provides", manifest: func(t *testing.T) string { return edit(t, `"summary": "Deploys`, `"kind": "mcp", "summary": "Deploys`) }, pointer: "/provides", code: CodeMCPProvides},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = goodFiles
			}
			opts := CheckOptions{Taken: func(name string) (string, bool) {
				return "another installed package", slices.Contains(tc.taken, name)
			}, Playbook: func(_, name string) bool { return slices.Contains(tc.taken, name) }}
			c := Check(writePackage(t, tc.manifest(t), files), opts)
			found := slices.ContainsFunc(c.Diagnostics, func(d Diagnostic) bool {
				return d.Code == tc.code && (tc.pointer == "" || d.Pointer == tc.pointer)
			})
			if !found {
				t.Fatalf("want %s at %q, got %v", tc.code, tc.pointer, c.Diagnostics)
			}
			for _, d := range c.Diagnostics {
				if d.Remedy == "" {
					t.Errorf("diagnostic %v has no remedy", d)
				}
				for _, secret := range []string{"keyring:svc/user", "${HOME}", "/etc/passwd"} {
					if strings.Contains(d.Remedy, secret) {
						t.Errorf("diagnostic %v quotes the manifest's value", d)
					}
				}
			}
		})
	}
}

func TestCheckWarnsOfAnUnusedPermission(t *testing.T) {
	m := strings.Replace(goodManifest, `"executor.run"]`, `"executor.run", "work.start_gate"]`, 1)
	c := Check(writePackage(t, m, goodFiles), CheckOptions{})
	if !c.Valid() {
		t.Fatalf("diagnostics %v", c.Diagnostics)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Code != WarnPermissionUnused || c.Warnings[0].Pointer != "/permissions/3" {
		t.Fatalf("warnings %v", c.Warnings)
	}
}

func TestCheckAcceptsAnMCPManifestAndAnotherRegistrationsPlaybook(t *testing.T) {
	mcp := `{"name": "memory", "version": "0.6.3", "kind": "mcp", "run": {"command": ["npx", "server-memory"]}}`
	if c := Check(writePackage(t, mcp, nil), CheckOptions{}); !c.Valid() {
		t.Fatalf("mcp: %v", c.Diagnostics)
	}
	m := strings.Replace(goodManifest, `"playbook": "deploying"`, `"playbook": "github-author"`, 1)
	c := Check(writePackage(t, m, goodFiles), CheckOptions{Playbook: func(_, name string) bool { return name == "github-author" }})
	if !c.Valid() {
		t.Fatalf("diagnostics %v", c.Diagnostics)
	}
}
