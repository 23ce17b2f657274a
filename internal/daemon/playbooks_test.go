package daemon

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
)

func playbookText(name, ops string) string {
	return "---\nname: " + name + "\ndescription: A test skill.\noperations: [" + ops + "]\n---\n# " + name + "\n"
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// skills lists the playbooks written under <state>/playbooks/skills, and
// checks each is <name>/SKILL.md, owner-only, holding want[name]; the
// playbooks of the extensions the release bundles are always among them.
func skills(t *testing.T, state string, want map[string]string) {
	t.Helper()
	want = maps.Clone(want)
	for _, reg := range bootstrap.Extensions(bootstrap.Ports{}) {
		for _, pb := range reg.Playbooks {
			want[pb.Name] = pb.Markdown
		}
	}
	dir := filepath.Join(state, PlaybooksDir, SkillsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got, wantNames []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	for name, text := range want {
		wantNames = append(wantNames, name)
		path := filepath.Join(dir, name, SkillFile)
		data, err := os.ReadFile(path)
		if err != nil || string(data) != text {
			t.Errorf("%s holds %q (%v), want %q", path, data, err, text)
		}
		if m := mode(t, path); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", path, m)
		}
	}
	slices.Sort(wantNames)
	if !slices.Equal(got, wantNames) {
		t.Fatalf("skills %v, want %v", got, wantNames)
	}
}

// The daemon writes every playbook, the extensions' and the operator's,
// as skills/<name>/SKILL.md under its playbook directory at start and
// after every apply; an apply may name an operator playbook added just
// before it, and validation records the binding's playbook and what it
// declares.
func TestPlaybooksAreWrittenAsSkills(t *testing.T) {
	state := shortDir(t)
	pbDir := filepath.Join(state, PlaybooksDir)
	shipped := playbookText("echoing", "echo.credential, emit")
	mine := playbookText("mine", "emit")
	writeFile(t, filepath.Join(pbDir, "mine.md"), mine)
	writeFile(t, filepath.Join(pbDir, "broken.md"), "# no frontmatter\n")
	writeFile(t, filepath.Join(pbDir, "echoing.md"), playbookText("echoing", "wait"))
	writeFile(t, filepath.Join(pbDir, SkillsDir, "gone", SkillFile), playbookText("gone", ""))

	ext := echoExtension("echo", "echo.credential")
	ext.Playbooks = []extension.Playbook{{Name: "echoing", Markdown: shipped}}
	r := start(t, state, func(o *Options) { o.Extensions = []extension.Registration{ext} })
	// The extension's playbook wins over the operator's of the same name;
	// a malformed one and a stale skill are left out.
	skills(t, state, map[string]string{"echoing": shipped, "mine": mine})
	for _, want := range []string{"broken.md", "echoing is one an extension ships"} {
		if !strings.Contains(r.logs.String(), want) {
			t.Errorf("the logs do not say %q:\n%s", want, r.logs.String())
		}
	}
	if m := mode(t, pbDir); m != 0o700 {
		t.Errorf("the playbook directory has mode %04o", m)
	}

	// The operator adds a playbook and removes one, then applies a
	// config whose binding names the new one.
	later := playbookText("later", "emit, declare_outcome")
	writeFile(t, filepath.Join(pbDir, "later.md"), later)
	if err := os.Remove(filepath.Join(pbDir, "mine.md")); err != nil {
		t.Fatal(err)
	}
	cfg := `{"version": 1, "scopes": {"t": {
  "authorization": {"operations": ["emit", "declare_outcome"]},
  "bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "operations": ["emit", "declare_outcome"], "playbook": "later"}}}}}`
	r.apply([]byte(cfg), r.d.cfg.Active().Generation)
	skills(t, state, map[string]string{"echoing": shipped, "later": later})
	b, ok := r.d.cfg.Active().Binding("t", "b")
	if !ok || b.Playbook != "later" || !slices.Equal(b.PlaybookOperations, []string{"emit", "declare_outcome"}) {
		t.Fatalf("binding %+v", b)
	}

	// A config naming a playbook nobody has any more is refused.
	gone := []byte(strings.Replace(cfg, `"later"`, `"mine"`, 1))
	if _, err := r.client.ApplyConfig(operator, gone, r.d.cfg.Active().Generation, "", nil); err == nil || !strings.Contains(err.Error(), "invalid_config") {
		t.Fatalf("an apply naming a removed playbook: %v", err)
	}
	if _, res := r.d.cfg.(*configsvc.Service).Validate(gone); len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != config.CodeUnknownReference ||
		res.Diagnostics[0].Pointer != "/scopes/t/bindings/b/playbook" {
		t.Fatalf("%v", res.Diagnostics)
	}
}
