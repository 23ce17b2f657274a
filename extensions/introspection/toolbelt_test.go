package introspection_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/introspection"
	"github.com/open-conduit/open-conduit/internal/daemon/introspectport"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// granting is the production toolbelt whose bindings also grant the
// introspection operations.
var granting = toolbelttest.Harness{Name: "toolbelt.Toolbelt granting introspection", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
	o := env.Options()
	bindings := o.Bindings
	o.Bindings = func(gen int64, scope, binding string) (toolbelt.BindingAuthority, bool) {
		a, ok := bindings(gen, scope, binding)
		if ok {
			a.Operations = append(slices.Clone(a.Operations), introspection.Registration(nil).Toolsets[0].Names()...)
		}
		return a, ok
	}
	return toolbelt.New(o)
}}

// Through the real toolbelt, a granted execution reads its own tree (its
// Work and the child it created) and is refused another Work's, with the
// extension's verdict verbatim; the scope's read ceiling refuses too.
func TestThroughTheToolbelt(t *testing.T) {
	f, err := toolbelttest.NewFixture(t.TempDir(), granting, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	err = f.Register(introspection.Registration(&introspectport.Port{
		Store: f.Env.Store,
		Reads: f.Env.Ceiling.AuthorizeRead,
	}))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Call(parent.Token, "create_work", `{}`, "child-1")
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		WorkID string `json:"work_id"`
	}
	if err := json.Unmarshal(res.Result, &created); err != nil {
		t.Fatal(err)
	}

	g, err := f.TB.Guidance(context.Background(), parent.Token, extension.Assertions{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, op := range g.Operations {
		listed = append(listed, op.Name)
	}
	if !slices.Contains(listed, "introspection.work") || !slices.Contains(listed, "introspection.chain") {
		t.Fatalf("guidance lists %v, without the introspection operations", listed)
	}

	res, err = f.Call(parent.Token, "introspection.work", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var tree workResult
	if err := json.Unmarshal(res.Result, &tree); err != nil {
		t.Fatal(err)
	}
	if tree.Work.ID != parent.Work.ID || !slices.Equal(workIDs(tree.Descendants), []string{created.WorkID}) {
		t.Fatalf("the parent's tree %s, want its Work and child %s", res.Result, created.WorkID)
	}
	if _, err := f.Call(parent.Token, "introspection.events", `{"work":"`+created.WorkID+`"}`, ""); err != nil {
		t.Fatalf("the parent reads its child's Events: %v", err)
	}

	// Another execution is refused the parent's child and the parent.
	for _, id := range []string{created.WorkID, parent.Work.ID} {
		_, err = f.Call(other.Token, "introspection.work", `{"work":"`+id+`"}`, "")
		mustCode(t, err, "not_in_tree")
	}
	// Its own tree it reads.
	if _, err := f.Call(other.Token, "introspection.work", `{}`, ""); err != nil {
		t.Fatal(err)
	}

	// The scope's read ceiling without executions refuses that read.
	f.Env.Ceiling.Deny(toolbelttest.Scope, "read:executions")
	_, err = f.Call(parent.Token, "introspection.executions", `{}`, "")
	mustCode(t, err, "read_not_allowed")
	if _, err := f.Call(parent.Token, "introspection.waits", `{}`, ""); err != nil {
		t.Fatalf("waits are still readable: %v", err)
	}
}

// The handlers do not check the generation: the host does. An attempt
// pinned to a generation that does not enable introspection for its scope
// is refused every operation with the bare forbidden (undeclared), and
// so is every attempt once the active generation disables it; the
// guidance does not describe them.
func TestAGenerationWithoutItCannotCall(t *testing.T) {
	f, err := toolbelttest.NewFixture(t.TempDir(), granting, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Register(introspection.Registration(&introspectport.Port{Store: f.Env.Store, Reads: f.Env.Ceiling.AuthorizeRead})); err != nil {
		t.Fatal(err)
	}
	at, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(at.Token, "introspection.work", `{}`, ""); err != nil {
		t.Fatalf("enabled, the call is refused: %v", err)
	}
	forbidden := func(what string) {
		t.Helper()
		for _, op := range introspection.Registration(nil).Toolsets[0].Names() {
			_, err := f.Call(at.Token, op, `{}`, "")
			if !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) {
				t.Fatalf("%s: %s answered %v, want the bare forbidden", what, op, err)
			}
		}
		g, err := f.TB.Guidance(context.Background(), at.Token, extension.Assertions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range g.Operations {
			if strings.HasPrefix(op.Name, "introspection.") {
				t.Fatalf("%s: the guidance describes %s", what, op.Name)
			}
		}
	}
	f.Env.Extensions.Set(toolbelttest.Pinned, introspection.Name, toolbelt.Enablement{Enabled: true, Scopes: []string{"elsewhere"}})
	forbidden("the pinned generation enables it for another scope")
	f.Env.Extensions.Set(toolbelttest.Pinned, introspection.Name, toolbelt.Enablement{})
	forbidden("the pinned generation does not enable it")
	f.Env.Extensions.Set(toolbelttest.Pinned, introspection.Name, toolbelt.Enablement{Enabled: true})
	f.Env.Extensions.Set(0, introspection.Name, toolbelt.Enablement{})
	forbidden("the active generation does not enable it")
	// Negative control: enabled again, the same token calls.
	f.Env.Extensions.Set(0, introspection.Name, toolbelt.Enablement{Enabled: true})
	if _, err := f.Call(at.Token, "introspection.events", `{}`, ""); err != nil {
		t.Fatalf("enabled again, the call is refused: %v", err)
	}
}
