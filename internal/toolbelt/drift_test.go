package toolbelt_test

import (
	"context"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// playbookBinding validates a configuration whose binding b1 of scope s1
// starts on the playbook deploy, which the registry says uses emit and
// read_context, and returns what the snapshot records of the binding's
// playbook.
func playbookBinding(t *testing.T) []string {
	t.Helper()
	reg := config.NewRegistry()
	if err := reg.AddExecutor(executor.Info{Name: "shell", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := reg.AddPlaybook("deploy", []string{"emit", "read_context"}); err != nil {
		t.Fatal(err)
	}
	snap, res := config.Validate([]byte(`{"version": 1, "scopes": {"s1": {
		"authorization": {"operations": ["emit", "read_context", "create_work"], "reads": ["work"]},
		"bindings": {"b1": {"executor": "shell", "operations": ["emit", "read_context", "create_work"], "playbook": "deploy"}}}}}`), reg)
	if !res.Valid() {
		t.Fatalf("%v", res.Diagnostics)
	}
	b, ok := snap.Binding("s1", "b1")
	if !ok || len(b.PlaybookOperations) != 2 {
		t.Fatalf("the binding's playbook operations: %+v", b)
	}
	return b.PlaybookOperations
}

// TestRefusalOfAPlaybookOperationIsConfigDrift: once an apply narrows the
// ceiling under a running attempt whose binding's playbook declares emit,
// the refused emit is recorded with toolbelt.refusal config_drift. The
// negative controls: a refused operation the playbook does not declare,
// and a playbook operation refused for another reason (a superseded
// token), are recorded without it.
func TestRefusalOfAPlaybookOperationIsConfigDrift(t *testing.T) {
	playbook := playbookBinding(t)
	h := toolbelttest.Harness{Name: "with a playbook", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		o := env.Options()
		inner := o.Bindings
		o.Bindings = func(gen int64, scope, binding string) (toolbelt.BindingAuthority, bool) {
			ba, ok := inner(gen, scope, binding)
			if ok && binding == toolbelttest.Binding {
				ba.Playbook = playbook
			}
			return ba, ok
		}
		return toolbelt.New(o)
	}}
	f, err := toolbelttest.NewFixture(t.TempDir(), h, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	ctx := context.Background()
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.before"}`, ""); err != nil {
		t.Fatal(err)
	}
	// The apply: emit and create_work leave the scope's ceiling.
	f.Env.Ceiling.Deny(toolbelttest.Scope, "emit")
	f.Env.Ceiling.Deny(toolbelttest.Scope, "create_work")
	if _, err := f.Call(a.Token, "emit", `{"type":"test.after"}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("emit after the narrowing: %v, want forbidden", err)
	}
	if _, err := f.Call(a.Token, "create_work", `{}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("create_work after the narrowing: %v, want forbidden", err)
	}
	// A superseded token's emit is refused by the token link, not a grant.
	f.Env.Ceiling.Allow(toolbelttest.Scope, "emit")
	b, err := f.Recover(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.stale"}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("the superseded token's emit: %v, want forbidden", err)
	}
	if _, err := f.Call(b.Token, "emit", `{"type":"test.again"}`, ""); err != nil {
		t.Fatalf("emit with the ceiling restored: %v", err)
	}
	recs, err := f.Env.Store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: a.Execution.ID, Kind: storage.ToolbeltRejected})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ op, refusal string }{{"emit", storage.RefusalConfigDrift}, {"create_work", ""}, {"emit", ""}}
	if len(recs) != len(want) {
		t.Fatalf("rejections: %+v, want %d", recs, len(want))
	}
	for i, w := range want {
		if recs[i].Operation != w.op || recs[i].Result != "forbidden" || recs[i].Refusal != w.refusal {
			t.Errorf("rejection %d: %+v, want %s forbidden with refusal %q", i, recs[i], w.op, w.refusal)
		}
	}
	ok, err := f.Env.Store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: a.Execution.ID, Kind: storage.ToolbeltCalled})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ok {
		if r.Refusal != "" {
			t.Errorf("a call that passed has a refusal: %+v", r)
		}
	}
}
