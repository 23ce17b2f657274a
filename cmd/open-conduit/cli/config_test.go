package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
)

const cfgValid = `{
  "version": 1,
  "secrets": {"gh": "env:GH_TOKEN"},
  "scopes": {
    "ops": {
      "authorization": {"operations": ["emit", "wait", "declare_outcome"], "reads": ["work"]},
      "bindings": {"agent": {"executor": "shell", "config": {"command": ["true"]}, "operations": ["emit"], "secrets": {"GH_TOKEN": "gh"}, "requires": ["toolbelt"]}},
      "routes": [{"id": "manual", "match": {"type": "ops.*", "source": "core.manual"}, "binding": "agent"}]
    }
  }
}`

// cfgInvalid has three independent problems.
const cfgInvalid = `{
  "version": 1,
  "colour": "blue",
  "secrets": {"gh": "vault:ci/token"},
  "scopes": {"ops": {"bindings": {"agent": {"executor": "shell", "config": {"command": ["true"]}, "requires": ["resume"]}}}}
}`

func cfgFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func cfgRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

func TestConfigCheckValid(t *testing.T) {
	path := cfgFile(t, cfgValid)
	snap, res := config.Validate([]byte(cfgValid), bootstrap.ReleaseRegistry())
	if !res.Valid() {
		t.Fatalf("the test config is invalid: %v", res.Diagnostics)
	}
	code, out, errOut := cfgRun(t, "config", "check", path)
	if code != ExitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if out != "valid: hash "+snap.Hash+"\n" {
		t.Fatalf("output %q", out)
	}

	code, out, _ = cfgRun(t, "config", "check", path, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %q", out)
	}
	if keys := cfgKeys(m); !slices.Equal(keys, []string{"diagnostics", "hash", "valid", "warnings"}) {
		t.Fatalf("keys %v", keys)
	}
	if string(m["valid"]) != "true" || string(m["hash"]) != `"`+snap.Hash+`"` || string(m["diagnostics"]) != "[]" || string(m["warnings"]) != "[]" {
		t.Fatalf("output %s", out)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("not one line: %q", out)
	}
}

func cfgKeys(m map[string]json.RawMessage) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestConfigCheckInvalid(t *testing.T) {
	path := cfgFile(t, cfgInvalid)
	code, out, errOut := cfgRun(t, "config", "check", path)
	if code != ExitFailed {
		t.Fatalf("exit %d", code)
	}
	want := []string{
		"/colour: unknown_field: ",
		"/scopes/ops/bindings/agent/requires/0: invalid_capability: ",
		"/secrets/gh: invalid_secret_reference: ",
		"invalid: 3 problems",
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("output %q", out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d %q, want prefix %q", i, lines[i], w)
		}
	}
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
	if strings.Contains(out, "ci/token") || strings.Contains(out, "blue") {
		t.Error("the output echoes a configured value")
	}

	code, out, _ = cfgRun(t, "config", "check", "--json", path)
	if code != ExitFailed {
		t.Fatalf("exit %d", code)
	}
	var got struct {
		Valid       *bool                        `json:"valid"`
		Diagnostics []map[string]json.RawMessage `json:"diagnostics"`
		Warnings    []json.RawMessage            `json:"warnings"`
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if keys := cfgKeys(m); !slices.Equal(keys, []string{"diagnostics", "valid", "warnings"}) {
		t.Fatalf("keys %v: an invalid config has no hash", keys)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Valid == nil || *got.Valid || len(got.Diagnostics) != 3 || got.Warnings == nil {
		t.Fatalf("output %s", out)
	}
	for _, d := range got.Diagnostics {
		if keys := cfgKeys(d); !slices.Equal(keys, []string{"code", "pointer", "remedy"}) {
			t.Fatalf("diagnostic keys %v", keys)
		}
	}
	if string(got.Diagnostics[1]["pointer"]) != `"/scopes/ops/bindings/agent/requires/0"` || string(got.Diagnostics[1]["code"]) != `"invalid_capability"` {
		t.Fatalf("diagnostic %v", got.Diagnostics[1])
	}
}

func TestConfigCheckUsage(t *testing.T) {
	path := cfgFile(t, cfgValid)
	for _, args := range [][]string{
		{"config", "check"},
		{"config", "check", path, path},
		{"config", "check", "--yaml", path},
		{"config"},
	} {
		code, out, errOut := cfgRun(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, ExitUsage)
		}
		if out != "" || errOut == "" {
			t.Errorf("%v: stdout %q, stderr %q", args, out, errOut)
		}
	}
	code, _, errOut := cfgRun(t, "config", "check", filepath.Join(t.TempDir(), "missing.json"))
	if code != ExitFailed || !strings.Contains(errOut, "cannot read the configuration file") {
		t.Fatalf("missing file: exit %d, %q", code, errOut)
	}
}

func TestConfigCheckTooLarge(t *testing.T) {
	path := cfgFile(t, `{"version": 1}`+strings.Repeat(" ", config.MaxSize))
	code, out, _ := cfgRun(t, "config", "check", "--json", path)
	if code != ExitFailed || !strings.Contains(out, `"code":"too_large"`) {
		t.Fatalf("exit %d, %s", code, out)
	}
}

// TestConfigSubcommandsJoinConfig: another file's subcommand sits beside
// check.
func TestConfigSubcommandsJoinConfig(t *testing.T) {
	saved := configSubcommands
	t.Cleanup(func() { configSubcommands = saved })
	configSubcommands = append(slices.Clone(saved), func(s Streams) *cobra.Command {
		return &cobra.Command{Use: "probe", RunE: func(c *cobra.Command, _ []string) error {
			_, err := s.Out.Write([]byte("probed\n"))
			return err
		}}
	})
	code, out, _ := cfgRun(t, "config", "probe")
	if code != ExitOK || out != "probed\n" {
		t.Fatalf("exit %d, %q", code, out)
	}
	if code, _, _ := cfgRun(t, "config", "check", cfgFile(t, cfgValid)); code != ExitOK {
		t.Fatalf("check lost: exit %d", code)
	}
}

// config check knows the operator's playbooks beside the file.
func TestConfigCheckReadsPlaybooksBesideTheFile(t *testing.T) {
	path := cfgFile(t, strings.Replace(cfgValid, `"requires": ["toolbelt"]`, `"requires": ["toolbelt"], "playbook": "mine"`, 1))
	code, out, _ := cfgRun(t, "config", "check", path)
	if code != ExitFailed || !strings.Contains(out, "/scopes/ops/bindings/agent/playbook: unknown_reference") {
		t.Fatalf("exit %d: %s", code, out)
	}
	dir := filepath.Join(filepath.Dir(path), "playbooks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.md"), []byte("---\noperations: [emit]\n---\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := cfgRun(t, "config", "check", path); code != ExitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
}
