package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

type warned struct {
	ptr, code string
}

func warningsOf(t *testing.T, d jdoc) []Warning {
	t.Helper()
	snap, res := Validate(encode(t, d), testRegistry(t))
	if !res.Valid() || snap == nil {
		t.Fatalf("warnings must not fail a config: %v", res.Diagnostics)
	}
	return res.Warnings
}

func warnedOf(ws []Warning) []warned {
	out := []warned{}
	for _, w := range ws {
		out = append(out, warned{w.Pointer, w.Code})
	}
	return out
}

func TestGrantWarnings(t *testing.T) {
	author10 := `["emit", "declare_outcome", "github.issue.view", "github.issue.comment", "github.pr.create"]`
	cases := []struct {
		name string
		mut  func(t *testing.T, d jdoc)
		want []warned
	}{
		{"base", func(*testing.T, jdoc) {}, nil},
		{"toolset 1.0.0 spelled out", func(t *testing.T, d jdoc) { set(t, d, agent+"/operations", raw(author10)) },
			[]warned{{agent + "/operations", WarnToolsetSpelledOut}}},
		{"toolset 1.3.0 spelled out", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/operations", raw(`["github.git.credential", "emit", "github.issue.view", "github.issue.comment", "github.pr.create"]`))
		}, []warned{{agent + "/operations", WarnToolsetSpelledOut}}},
		{"only part of a version", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/operations", raw(`["emit", "github.issue.view", "github.issue.comment", "github.issue.view"]`))
		}, nil},
		{"spelled out and named", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/operations", raw(`["emit", "github.issue.view", "github.issue.comment", "github.pr.create", "@github.author"]`))
		}, nil},
		{"denied members do not count", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/operations", raw(`["emit", "github.issue.view", "github.issue.comment", "!github.pr.create"]`))
		}, nil},
		{"in a grant", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/grants/review/operations", raw(`["github.issue.view", "github.pr.review", "github.issue.comment", "github.pr.create", "emit"]`))
		}, []warned{{agent + "/grants/review/operations", WarnToolsetSpelledOut}}},
		{"in a scope's authorization", func(t *testing.T, d jdoc) {
			set(t, d, "/scopes/ops/authorization/operations", raw(`["emit", "wait", "declare_outcome", "github.issue.view", "github.issue.comment", "github.pr.create", "github.pr.review"]`))
			set(t, d, agent+"/operations", raw(`["emit", "github.issue.view", "github.issue.comment"]`))
		}, []warned{{"/scopes/ops/authorization/operations", WarnToolsetSpelledOut}}},
		{"playbook operations not granted", func(t *testing.T, d jdoc) { set(t, d, agent+"/operations", raw(`["emit"]`)) },
			[]warned{{agent + "/playbook", WarnPlaybookNotGranted}}},
		{"playbook operations granted by a grant", func(t *testing.T, d jdoc) {
			set(t, d, agent+"/operations", raw(`["emit"]`))
			set(t, d, agent+"/grants/review/operations", raw(`["@github.reviewer", "github.issue.comment"]`))
		}, nil},
		{"playbook operations narrowed away by the ceiling", func(t *testing.T, d jdoc) {
			set(t, d, "/scopes/ops/authorization/operations", raw(`["emit", "wait", "declare_outcome", "@github.reviewer"]`))
			set(t, d, agent+"/operations", raw(`["emit", "@github.author"]`))
			set(t, d, agent+"/grants", raw(`{}`))
		}, []warned{{agent + "/playbook", WarnPlaybookNotGranted}}},
		{"disabled scope", func(t *testing.T, d jdoc) {
			set(t, d, "/scopes/ops/enabled", false)
			set(t, d, agent+"/operations", raw(author10))
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decode(t, baseConfig)
			c.mut(t, d)
			if got := warnedOf(warningsOf(t, d)); !slices.Equal(got, orNoWarnings(c.want)) {
				t.Fatalf("warnings %v, want %v", got, c.want)
			}
		})
	}
}

func orNoWarnings(w []warned) []warned {
	if w == nil {
		return []warned{}
	}
	return w
}

// TestToolsetWarningSaysWhatToDo: the warning names what the list lacks and
// the command that grants the toolset instead.
func TestToolsetWarningSaysWhatToDo(t *testing.T) {
	d := decode(t, baseConfig)
	set(t, d, agent+"/operations", raw(`["declare_outcome", "emit", "github.issue.view", "github.issue.comment", "github.pr.create"]`))
	ws := warningsOf(t, d)
	if len(ws) != 1 {
		t.Fatalf("%v", ws)
	}
	m := ws[0].Message
	for _, want := range []string{"github.author", "1.0.0", "github.git.credential, github.pr.edit",
		`open-conduit config set /scopes/ops/bindings/agent/operations '["declare_outcome","@github.author"]'`} {
		if !strings.Contains(m, want) {
			t.Errorf("message %q lacks %q", m, want)
		}
	}
	// The suggested list is valid and grants what the toolset grants
	// within the ceiling.
	set(t, d, agent+"/operations", raw(`["declare_outcome","@github.author"]`))
	snap, res := Validate(encode(t, d), testRegistry(t))
	if !res.Valid() || len(res.Warnings) != 0 {
		t.Fatalf("%v %v", res.Diagnostics, res.Warnings)
	}
	ops, _ := snap.BindingOperations("ops", "agent")
	if !slices.Contains(ops, "github.git.credential") {
		t.Fatalf("%v", ops)
	}
	// The playbook warning names the playbook and the operations.
	d = decode(t, baseConfig)
	set(t, d, agent+"/operations", raw(`["emit"]`))
	ws = warningsOf(t, d)
	if len(ws) != 1 || !strings.Contains(ws[0].Message, "triage") || !strings.Contains(ws[0].Message, "github.issue.view, github.issue.comment") {
		t.Fatalf("%v", ws)
	}
	b, _ := json.Marshal(ws[0])
	if !strings.Contains(string(b), `"pointer":"/scopes/ops/bindings/agent/playbook","code":"playbook_not_granted","message":`) {
		t.Fatalf("json %s", b)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.0.0", "1.0.0", 0}, {"1.2", "1.10", -1}, {"v1.8.0", "1.7.9", 1}, {"1", "1.0.0", 0}, {"", "0.0", 0}, {"", "1.0", -1}, {"1.0-rc", "1.0", 1},
	} {
		if got := compareVersions(c.a, c.b); got != c.want {
			t.Errorf("compareVersions(%q, %q) = %d", c.a, c.b, got)
		}
	}
}
