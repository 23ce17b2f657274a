package extension

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPlaybookOperations(t *testing.T) {
	cases := []struct {
		name, md string
		want     []string
	}{
		{"flow list", "---\nname: triage\noperations: [emit, github.issue.view]\n---\n# Triage\n", []string{"emit", "github.issue.view"}},
		{"quoted items", "---\noperations: [\"emit\", 'wait']\n---\n", []string{"emit", "wait"}},
		{"empty list", "---\noperations: []\n---\n", []string{}},
		{"block list", "---\nname: triage\noperations:\n  - emit\n  - github.issue.view\ndescription: Triage issues.\n---\nbody\n", []string{"emit", "github.issue.view"}},
		{"empty block", "---\noperations:\n---\n", []string{}},
		{"continuation and comments", "---\n# a comment\ndescription: Triage\n  issues one by one.\n\noperations: [emit]\n---\n", []string{"emit"}},
		{"CRLF", "---\r\noperations: [emit]\r\n---\r\n", []string{"emit"}},
		{"a body that looks like frontmatter", "---\noperations: [emit]\n---\noperations: [wait]\n---\n", []string{"emit"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlaybookOperations(c.md)
			if err != nil || got == nil || !slices.Equal(got, c.want) {
				t.Fatalf("%q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestPlaybookOperationsMalformed(t *testing.T) {
	cases := []struct{ name, md, says string }{
		{"no frontmatter", "# Triage\noperations: [emit]\n", "starts with"},
		{"empty document", "", "starts with"},
		{"leading blank line", "\n---\noperations: [emit]\n---\n", "starts with"},
		{"not closed", "---\noperations: [emit]\n", "no closing"},
		{"no operations", "---\nname: triage\n---\n", "no operations"},
		{"operations twice", "---\noperations: [emit]\noperations: [wait]\n---\n", "line 3 repeats"},
		{"not a list", "---\noperations: emit\n---\n", "is a list"},
		{"unclosed list", "---\noperations: [emit, wait\n---\n", "is a list"},
		{"bad name", "---\noperations: [emit, Git.Push]\n---\n", "not an operation name"},
		{"empty item", "---\noperations: [emit,]\n---\n", "not an operation name"},
		{"nested list", "---\noperations: [[emit]]\n---\n", "not an operation name"},
		{"repeated operation", "---\noperations: [emit, emit]\n---\n", "twice"},
		{"repeated in block", "---\noperations:\n  - emit\n  - emit\n---\n", "twice"},
		{"block line without dash", "---\noperations:\n  emit\n---\n", "line 3"},
		{"block line dash glued", "---\noperations:\n  -emit\n---\n", "line 3"},
		{"line without colon", "---\noperations: [emit]\njust words\n---\n", "line 3 is not"},
		{"bad key", "---\n-x: y\noperations: [emit]\n---\n", "line 2 is not"},
		{"indented first line", "---\n  operations: [emit]\n---\n", "continues no key"},
		{"unbalanced quote", "---\noperations: [\"emit]\n---\n", "not an operation name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlaybookOperations(c.md)
			if !errors.Is(err, ErrInvalid) || got != nil {
				t.Fatalf("%q, %v; want ErrInvalid", got, err)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%v does not say %q", err, c.says)
			}
			if strings.Contains(err.Error(), "Git.Push") {
				t.Fatalf("%v quotes the document", err)
			}
		})
	}
}

func TestCheckPlaybook(t *testing.T) {
	ok := "---\noperations: [emit]\n---\n"
	if err := CheckPlaybook(Playbook{Name: "triage_2", Markdown: ok}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Playbook{
		{Name: "", Markdown: ok}, {Name: "Triage", Markdown: ok}, {Name: "a.b", Markdown: ok},
		{Name: "1st", Markdown: ok}, {Name: strings.Repeat("a", 64), Markdown: ok},
		{Name: "triage", Markdown: "no frontmatter"},
	} {
		if err := CheckPlaybook(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", p.Name, err)
		}
	}
	if err := CheckPlaybook(Playbook{Name: strings.Repeat("a", 63), Markdown: ok}); err != nil {
		t.Fatal(err)
	}
}
