package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
)

// skillNamer names the playbook of a binding config's "skill" member, and
// counts how often it is asked.
type skillNamer struct{ asked int }

func (n *skillNamer) PlaybookName(config json.RawMessage) string {
	n.asked++
	var c struct {
		Skill string `json:"skill"`
	}
	_ = json.Unmarshal(config, &c)
	return c.Skill
}

func pb(name string, ops ...string) extension.Playbook {
	return extension.Playbook{Name: name, Markdown: "---\nname: " + name + "\noperations: [" + strings.Join(ops, ", ") + "]\n---\n# " + name + "\n"}
}

// TestBindingPlaybook: validation records each binding's playbook, named
// by its executor from its config or by its playbook member, and the
// operations the playbook declares; an unknown one is unknown_reference.
func TestBindingPlaybook(t *testing.T) {
	cases := []struct {
		name       string
		mut        func(t *testing.T, d jdoc)
		want       []want
		playbook   string
		operations []string
		asked      int
	}{
		{"the member names it", func(t *testing.T, d jdoc) {}, nil, "triage", []string{"emit", "github.issue.view", "github.issue.comment"}, 0},
		{"the executor names it", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{"skill": "review"}`))
			del(t, d, agent+"/playbook")
		}, nil, "review", []string{"github.pr.review"}, 1},
		{"the executor and the member agree", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{"skill": "triage"}`))
		}, nil, "triage", []string{"emit", "github.issue.view", "github.issue.comment"}, 1},
		{"the executor names none", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{}`))
		}, nil, "triage", []string{"emit", "github.issue.view", "github.issue.comment"}, 1},
		{"no playbook", func(t *testing.T, d jdoc) { del(t, d, agent+"/playbook") }, nil, "", nil, 0},
		{"the executor and the member disagree", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{"skill": "review"}`))
		}, one(agent+"/playbook", CodeInvalidValue), "", nil, 1},
		{"the executor names an unknown one", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{"skill": "unlisted"}`))
			del(t, d, agent+"/playbook")
		}, one(agent+"/config", CodeUnknownReference), "", nil, 1},
		{"the executor names a malformed one", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{"skill": "Bad!"}`))
			del(t, d, agent+"/playbook")
		}, one(agent+"/config", CodeUnknownReference), "", nil, 1},
		{"the member names an unknown one", func(t *testing.T, d jdoc) { set(t, d, agent+"/playbook", "unlisted") },
			one(agent+"/playbook", CodeUnknownReference), "", nil, 0},
		{"a refused config is not asked", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/config", raw(`{"skill": "review", "refuse": true}`))
		}, one(agent+"/config", CodeInvalidValue), "", nil, 0},
		{"the operator's playbook", func(t *testing.T, d jdoc) { set(t, d, agent+"/playbook", "mine") }, nil, "mine", []string{"emit"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := testRegistry(t)
			namer := &skillNamer{}
			refusing := func(raw json.RawMessage) error {
				if strings.Contains(string(raw), "refuse") {
					return errRefused
				}
				return nil
			}
			reg.executors["agent"] = registeredExecutor{info: reg.executors["agent"].info, check: refusing}
			must(t, reg.SetPlaybookNamer("agent", namer))
			must(t, reg.AddPlaybooks([]extension.Playbook{pb("review", "github.pr.review")}))
			if errs := reg.SetOperatorPlaybooks([]extension.Playbook{pb("mine", "emit")}); len(errs) != 0 {
				t.Fatal(errs)
			}
			d := decode(t, baseConfig)
			c.mut(t, d)
			snap, res := Validate(encode(t, d), reg)
			if g := got(res.Diagnostics); !slices.Equal(g, orNone(c.want)) {
				t.Fatalf("diagnostics %v, want %v", g, c.want)
			}
			if namer.asked != c.asked {
				t.Fatalf("the namer was asked %d times, want %d", namer.asked, c.asked)
			}
			if c.want != nil {
				return
			}
			b, _ := snap.Binding("ops", "agent")
			if b.Playbook != c.playbook || !slices.Equal(b.PlaybookOperations, c.operations) {
				t.Fatalf("playbook %q %v, want %q %v", b.Playbook, b.PlaybookOperations, c.playbook, c.operations)
			}
		})
	}
}

func TestSetPlaybookNamerNeedsTheExecutor(t *testing.T) {
	if err := testRegistry(t).SetPlaybookNamer("ghost", &skillNamer{}); !errors.Is(err, extension.ErrNotFound) {
		t.Fatal(err)
	}
}

// TestOperatorPlaybooks: the operator's playbooks are replaced as a whole,
// never take an extension's name, and a refused one is left out with a
// problem.
func TestOperatorPlaybooks(t *testing.T) {
	reg := testRegistry(t)
	must(t, reg.AddPlaybooks([]extension.Playbook{pb("review", "github.pr.review")}))
	errs := reg.SetOperatorPlaybooks([]extension.Playbook{
		pb("mine", "emit"), pb("review", "emit"), pb("mine", "wait"), {Name: "broken", Markdown: "no frontmatter"}, pb("triage"),
	})
	if len(errs) != 4 || !errors.Is(errs[0], extension.ErrConflict) || !errors.Is(errs[1], extension.ErrConflict) ||
		!errors.Is(errs[2], extension.ErrInvalid) || !errors.Is(errs[3], extension.ErrConflict) {
		t.Fatalf("%v", errs)
	}
	if ops, ok := reg.PlaybookOperations("mine"); !ok || !slices.Equal(ops, []string{"emit"}) {
		t.Fatalf("%v %v", ops, ok)
	}
	if ops, _ := reg.PlaybookOperations("review"); !slices.Equal(ops, []string{"github.pr.review"}) {
		t.Fatalf("the operator's playbook replaced the extension's: %v", ops)
	}
	var names []string
	for _, p := range reg.Playbooks() {
		names = append(names, p.Name)
		if !strings.HasPrefix(p.Markdown, "---\nname: "+p.Name+"\n") {
			t.Fatalf("%s: %q", p.Name, p.Markdown)
		}
	}
	// triage was added without Markdown (AddPlaybook), so it is not listed.
	if !slices.Equal(names, []string{"mine", "review"}) {
		t.Fatalf("%v", names)
	}
	reg.SetOperatorPlaybooks(nil)
	if _, ok := reg.PlaybookOperations("mine"); ok {
		t.Fatal("a removed operator playbook is still registered")
	}
	d := decode(t, baseConfig)
	set(t, d, agent+"/playbook", "mine")
	if _, res := Validate(encode(t, d), reg); !slices.Equal(got(res.Diagnostics), one(agent+"/playbook", CodeUnknownReference)) {
		t.Fatalf("%v", res.Diagnostics)
	}
}

func TestAddPlaybooksRefusesAll(t *testing.T) {
	reg := NewRegistry()
	for _, pbs := range [][]extension.Playbook{
		{pb("a", "emit"), pb("a", "wait")},
		{pb("b", "emit"), {Name: "c", Markdown: "---\noperations: emit\n---\n"}},
		{pb("d"), {Name: "Bad", Markdown: pb("x").Markdown}},
	} {
		if err := reg.AddPlaybooks(pbs); err == nil {
			t.Fatalf("%v accepted", pbs)
		}
	}
	if len(reg.playbookSet()) != 0 {
		t.Fatalf("a refused set registered some: %v", reg.playbookSet())
	}
	must(t, reg.AddPlaybook("a", nil))
	if err := reg.AddPlaybooks([]extension.Playbook{pb("a")}); !errors.Is(err, extension.ErrConflict) {
		t.Fatal(err)
	}
	if err := reg.AddPlaybook("a", nil); !errors.Is(err, extension.ErrConflict) {
		t.Fatal(err)
	}
}

func TestReadPlaybooks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("triage.md", pb("triage", "emit").Markdown)
	write("a-first.md", pb("a-first").Markdown)
	write("Bad Name.md", pb("x").Markdown)
	write("broken.md", "---\noperations: [Secret.Value]\n---\n")
	write("huge.md", pb("huge").Markdown+strings.Repeat("x", MaxPlaybookSize))
	write("notes.txt", "not a playbook")
	if err := os.MkdirAll(filepath.Join(dir, "skills", "triage"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "triage.md"), filepath.Join(dir, "linked.md")); err != nil {
		t.Fatal(err)
	}
	pbs, problems := ReadPlaybooks(dir)
	if len(pbs) != 2 || pbs[0].Name != "a-first" || pbs[1].Name != "triage" || pbs[1].Markdown != pb("triage", "emit").Markdown {
		t.Fatalf("%v", pbs)
	}
	if len(problems) != 3 {
		t.Fatalf("%v", problems)
	}
	for _, p := range problems {
		if strings.Contains(p.Error(), "Secret.Value") {
			t.Fatalf("%v quotes the file", p)
		}
	}
	if pbs, problems := ReadPlaybooks(filepath.Join(dir, "missing")); pbs != nil || problems != nil {
		t.Fatal(pbs, problems)
	}
}
