package toolbelt_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

func playbook(name string, ops string) extension.Playbook {
	return extension.Playbook{Name: name, Markdown: "---\nname: " + name + "\noperations: [" + ops + "]\n---\n# " + name + "\n"}
}

// A registration's playbooks reach the catalog with the rest of it, or
// nothing does; the host lists them, and its operations and toolsets, for
// the reference.
func TestHostRegistersPlaybooks(t *testing.T) {
	reg := config.NewRegistry()
	host := toolbelt.NewHost(reg)
	acme := extension.Registration{Name: "acme", Operations: []extension.Operation{handlerOp("acme.echo", okHandler)},
		Toolsets:  []extension.Toolset{{Name: "acme.role", Operations: []extension.ToolsetOperation{{Name: "acme.echo", Since: "1.0.0"}, {Name: "emit", Since: "1.0.0"}}}},
		Playbooks: []extension.Playbook{playbook("echoing", "acme.echo, emit")}}

	for name, bad := range map[string][]extension.Playbook{
		"malformed frontmatter": {{Name: "echoing", Markdown: "# no frontmatter"}},
		"a bad name":            {playbook("Echoing", "emit")},
		"listed twice":          {playbook("echoing", "emit"), playbook("echoing", "emit")},
	} {
		r := acme
		r.Playbooks = bad
		if err := host.Register(r); err == nil {
			t.Fatalf("%s: registered", name)
		}
		if _, ok := reg.OperationOwner("acme.echo"); ok || len(host.Playbooks()) != 0 {
			t.Fatalf("%s: a refused registration registered something", name)
		}
	}
	if err := host.Register(acme); err != nil {
		t.Fatal(err)
	}
	if ops, ok := reg.PlaybookOperations("echoing"); !ok || !slices.Equal(ops, []string{"acme.echo", "emit"}) {
		t.Fatalf("%v %v", ops, ok)
	}
	if got := reg.Playbooks(); len(got) != 1 || got[0] != acme.Playbooks[0] {
		t.Fatalf("%v", got)
	}
	// Another registration may not take the name, and registers nothing.
	other := extension.Registration{Name: "other", Operations: []extension.Operation{handlerOp("other.echo", okHandler)},
		Playbooks: []extension.Playbook{playbook("echoing", "emit")}}
	if err := host.Register(other); !errors.Is(err, extension.ErrConflict) {
		t.Fatalf("%v, want a conflict", err)
	}
	if _, ok := reg.OperationOwner("other.echo"); ok {
		t.Fatal("a refused registration reached the catalog")
	}
	// Nor may a name the catalog holds already.
	clash := config.NewRegistry()
	if err := clash.AddPlaybook("echoing", nil); err != nil {
		t.Fatal(err)
	}
	if err := toolbelt.NewHost(clash).Register(acme); !errors.Is(err, extension.ErrConflict) {
		t.Fatalf("%v, want a conflict", err)
	}
	if _, ok := clash.OperationOwner("acme.echo"); ok {
		t.Fatal("a refused registration reached the catalog")
	}

	if got := host.Playbooks(); len(got) != 1 || got[0].Name != "echoing" {
		t.Fatalf("%v", got)
	}
	if got := host.Toolsets(); len(got) != 1 || got[0].Name != "acme.role" || len(got[0].Operations) != 2 {
		t.Fatalf("%v", got)
	}
	var names []string
	for _, op := range host.Operations() {
		names = append(names, op.Name)
		if op.Summary == "" || len(op.InputSchema) == 0 {
			t.Errorf("%s has no summary or schema", op.Name)
		}
	}
	want := append(slices.Clone(extension.Builtins), "acme.echo")
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("%v, want %v", names, want)
	}
}
