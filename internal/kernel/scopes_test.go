package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// ruleScopes is a configuration with every shape the rules tell apart.
var ruleScopes = kernel.ScopeTable{
	"one":  {Generation: 4, Active: true, Bindings: map[string]kernel.BindingView{"only": {Grants: []string{"deploy", "read"}}}},
	"two":  {Generation: 4, Active: true, Bindings: map[string]kernel.BindingView{"beta": {}, "alpha": {Grants: []string{"deploy"}}}},
	"none": {Generation: 4, Active: true, Bindings: map[string]kernel.BindingView{}},
	"off":  {Generation: 4, Active: false, Bindings: map[string]kernel.BindingView{"only": {}}},
}

// rulesControl is the operator controls over b's store and runtime, seeing
// scopes.
func (b *bundle) rulesControl(scopes kernel.Scopes) *kernel.Control {
	return kernel.NewControl(kernel.ControlOptions{Runtime: b.rt, Store: b.store, Scopes: scopes})
}

// generations is a Scopes whose answer depends on the generation asked.
type generations map[int64]kernel.ScopeTable

func (g generations) Scope(ctx context.Context, gen int64, id string) (kernel.ScopeView, bool) {
	t, ok := g[gen]
	if !ok {
		return kernel.ScopeView{Generation: gen}, false
	}
	return t.Scope(ctx, gen, id)
}

func TestCreateWorkRules(t *testing.T) {
	b := setup(t)
	ctl := b.rulesControl(ruleScopes)
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name    string
		req     kernel.CreateWorkRequest
		code    string
		binding string   // the binding the created Work runs on
		quotes  []string // what the refusal's message names
	}{
		{name: "no scope", req: kernel.CreateWorkRequest{Binding: "only"}, code: kernel.ErrInvalidWork.Code, quotes: []string{"scope is required"}},
		{name: "unknown scope", req: kernel.CreateWorkRequest{Scope: "nope"}, code: kernel.ErrScopeInactive.Code, quotes: []string{"scope nope"}},
		{name: "inactive scope", req: kernel.CreateWorkRequest{Scope: "off", Binding: "only"}, code: kernel.ErrScopeInactive.Code, quotes: []string{"scope off", "generation 4"}},
		{name: "long scope is clipped", req: kernel.CreateWorkRequest{Scope: long}, code: kernel.ErrScopeInactive.Code, quotes: []string{strings.Repeat("x", 64) + "…"}},
		{name: "default binding", req: kernel.CreateWorkRequest{Scope: "one"}, binding: "only"},
		{name: "default of several", req: kernel.CreateWorkRequest{Scope: "two"}, code: kernel.ErrBindingRequired.Code, quotes: []string{"2 bindings (alpha, beta)", "name one with binding"}},
		{name: "default of none", req: kernel.CreateWorkRequest{Scope: "none"}, code: kernel.ErrBindingRequired.Code, quotes: []string{"0 bindings"}},
		{name: "named binding", req: kernel.CreateWorkRequest{Scope: "two", Binding: "beta"}, binding: "beta"},
		{name: "unknown binding", req: kernel.CreateWorkRequest{Scope: "two", Binding: "gamma"}, code: kernel.ErrUnknownBinding.Code, quotes: []string{"scope two has no binding gamma"}},
		{name: "grants of the binding", req: kernel.CreateWorkRequest{Scope: "one", Grants: []string{"read", "deploy"}}, binding: "only"},
		{name: "a grant of another binding", req: kernel.CreateWorkRequest{Scope: "two", Binding: "beta", Grants: []string{"deploy"}}, code: kernel.ErrUnknownGrant.Code, quotes: []string{"binding beta of scope two has no grant deploy"}},
		{name: "unknown grant", req: kernel.CreateWorkRequest{Scope: "one", Grants: []string{"deploy", "admin"}}, code: kernel.ErrUnknownGrant.Code, quotes: []string{"no grant admin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			before, err := b.store.ListWork(ctx, &storage.ListWorkParams{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := ctl.CreateWork(operator, c.req)
			if c.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if res.Work.Binding != c.binding || res.Work.Scope != c.req.Scope {
					t.Fatalf("created %+v, want binding %s", res.Work, c.binding)
				}
				return
			}
			mustCode(t, err, c.code)
			if !errors.Is(err, extension.ErrInvalid) {
				t.Errorf("%v is not of kind invalid", err)
			}
			for _, q := range c.quotes {
				if !strings.Contains(err.Error(), q) {
					t.Errorf("message %q does not say %q", err, q)
				}
			}
			if len(err.Error()) > 300 {
				t.Errorf("message echoes the request unbounded: %d bytes", len(err.Error()))
			}
			after, err := b.store.ListWork(ctx, &storage.ListWorkParams{})
			if err != nil || len(after) != len(before) {
				t.Fatalf("a refused request left Work behind: %d before, %d after (%v)", len(before), len(after), err)
			}
		})
	}
}

func TestCreateWorkChildStaysInItsParentsScope(t *testing.T) {
	b := setup(t)
	parent := b.createWork(t, kernel.CreateWorkRequest{Scope: "s1"})
	_, err := b.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s2", Binding: "b1", Parent: parent.ID})
	mustCode(t, err, kernel.ErrInvalidWork.Code)
	child, err := b.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: "b1", Parent: parent.ID})
	if err != nil || child.Work.Parent != parent.ID {
		t.Fatalf("child = %+v, %v", child, err)
	}
}

// TestWorkBindingGeneration: the rules read the generation they are
// asked about, the active one (0) for an operator and an attempt's pinned
// one for the toolbelt.
func TestWorkBindingGeneration(t *testing.T) {
	ctx := context.Background()
	g := generations{
		0: {"s": {Generation: 3, Active: true, Bindings: map[string]kernel.BindingView{"new": {}}}},
		2: {"s": {Generation: 2, Active: true, Bindings: map[string]kernel.BindingView{"old": {Grants: []string{"g"}}}}},
	}
	for _, c := range []struct {
		gen     int64
		binding string
		grants  []string
		code    string
	}{
		{0, "new", nil, ""},
		{0, "old", nil, kernel.ErrUnknownBinding.Code},
		{2, "old", []string{"g"}, ""},
		{2, "new", nil, kernel.ErrUnknownBinding.Code},
		{2, "", nil, ""},
		{7, "old", nil, kernel.ErrScopeInactive.Code},
	} {
		got, err := kernel.WorkBinding(ctx, g, c.gen, "s", c.binding, c.grants)
		if kernel.CodeOf(err) != c.code {
			t.Errorf("generation %d binding %q: %v, want code %q", c.gen, c.binding, err, c.code)
		}
		if err == nil && c.binding == "" && got != "old" {
			t.Errorf("generation %d: default binding %q, want old", c.gen, got)
		}
	}
}

func TestEmitRules(t *testing.T) {
	b := setup(t)
	scopes := kernel.ScopeTable{
		"s1":  {Generation: 2, Active: true},
		"s2":  {Generation: 2, Active: true},
		"off": {Generation: 2},
	}
	ctl := b.rulesControl(scopes)
	root, err := ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: "note.added"})
	if err != nil {
		t.Fatal(err)
	}
	// An event accepted in a scope that is inactive now.
	stale, err := b.accept(t, storage.Event{Type: "note.added", Source: kernel.SourceManual, Scope: "off", Actor: "operator:ann"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		req    kernel.EmitRequest
		code   string
		scope  string // of the accepted event
		quotes []string
	}{
		{name: "no type", req: kernel.EmitRequest{Scope: "s1"}, code: kernel.ErrInvalidEvent.Code, quotes: []string{"type is required"}},
		{name: "no scope, no parent", req: kernel.EmitRequest{Type: "a.b"}, code: kernel.ErrInvalidEvent.Code, quotes: []string{"scope is required"}},
		{name: "unknown scope", req: kernel.EmitRequest{Scope: "nope", Type: "a.b"}, code: kernel.ErrScopeInactive.Code, quotes: []string{"scope nope"}},
		{name: "inactive scope", req: kernel.EmitRequest{Scope: "off", Type: "a.b"}, code: kernel.ErrScopeInactive.Code, quotes: []string{"scope off", "generation 2"}},
		{name: "unknown parent", req: kernel.EmitRequest{Type: "a.b", Parent: "evt_nope"}, code: kernel.ErrParentNotFound.Code, quotes: []string{"evt_nope"}},
		{name: "another scope than the parent's", req: kernel.EmitRequest{Scope: "s2", Type: "a.b", Parent: root.Event.ID}, code: kernel.ErrInvalidEvent.Code, quotes: []string{"parent's scope s1"}},
		{name: "the parent's scope became inactive", req: kernel.EmitRequest{Type: "a.b", Parent: stale.ID}, code: kernel.ErrScopeInactive.Code},
		{name: "takes the parent's scope", req: kernel.EmitRequest{Type: "a.b", Parent: root.Event.ID}, scope: "s1"},
		{name: "names the parent's scope", req: kernel.EmitRequest{Scope: "s1", Type: "a.b", Parent: root.Event.ID}, scope: "s1"},
		{name: "a root", req: kernel.EmitRequest{Scope: "s2", Type: "a.b"}, scope: "s2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			last, err := b.store.LastSeq(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			res, err := ctl.Emit(operator, c.req)
			if c.code == "" {
				if err != nil || res.Event.Scope != c.scope {
					t.Fatalf("emit = %+v, %v; want scope %s", res.Event, err, c.scope)
				}
				return
			}
			mustCode(t, err, c.code)
			if !errors.Is(err, extension.ErrInvalid) {
				t.Errorf("%v is not of kind invalid", err)
			}
			for _, q := range c.quotes {
				if !strings.Contains(err.Error(), q) {
					t.Errorf("message %q does not say %q", err, q)
				}
			}
			if now, _ := b.store.LastSeq(context.Background()); now != last {
				t.Errorf("a refused emit accepted an event (seq %d -> %d)", last, now)
			}
		})
	}
}

func TestNewControlNeedsScopes(t *testing.T) {
	b := setup(t)
	defer func() {
		if recover() == nil {
			t.Error("NewControl without Scopes did not panic")
		}
	}()
	kernel.NewControl(kernel.ControlOptions{Runtime: b.rt, Store: b.store})
}
