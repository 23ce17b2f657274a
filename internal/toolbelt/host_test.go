package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// A registration is one call: its operations, gate and actions reach the
// toolbelt and the actions built on the host, and configuration's view
// gets its operations and toolsets. A refusal by any part, the catalog's
// included, registers nothing anywhere.
func TestHostRegistersEverythingOrNothing(t *testing.T) {
	act := func(name string) extension.Action {
		return extension.Action{Name: name, Summary: "Does it.", Handler: func(context.Context, extension.ActionRequest) (json.RawMessage, error) { return nil, nil }}
	}
	gate := extension.GateFunc(func(context.Context, extension.GateRequest) (*extension.WaitPlan, error) { return nil, nil })
	toolset := extension.Toolset{Name: "acme.role", Operations: []extension.ToolsetOperation{{Name: "acme.echo"}}}
	full := extension.Registration{Name: "acme", Operations: []extension.Operation{handlerOp("acme.echo", okHandler)},
		Toolsets: []extension.Toolset{toolset}, Actions: []extension.Action{act("acme.poke")}, Gate: gate}

	f := fixture(t, false)
	reg := config.NewRegistry()
	host := toolbelt.NewHost(reg)
	tb, err := toolbelt.New(func() toolbelt.Options { o := f.Env.Options(); o.Host = host; return o }())
	if err != nil {
		t.Fatal(err)
	}
	acts := toolbelt.NewActions(nil, host)

	// A catalog that already holds the name refuses: nothing of acme
	// registers on that host.
	clash := config.NewRegistry()
	if err := clash.AddExtension("acme", nil, nil); err != nil {
		t.Fatal(err)
	}
	clashing := toolbelt.NewHost(clash)
	clashTB, err := toolbelt.New(func() toolbelt.Options { o := f.Env.Options(); o.Host = clashing; return o }())
	if err != nil {
		t.Fatal(err)
	}
	if err := clashing.Register(full); !errors.Is(err, extension.ErrConflict) {
		t.Fatalf("a registration the catalog refuses: %v, want a conflict", err)
	}
	if clashTB.Declared("acme.echo") || len(toolbelt.NewActions(nil, clashing).List()) != 0 {
		t.Error("a registration the catalog refused reached the toolbelt or the actions")
	}
	if _, ok := clash.OperationOwner("acme.echo"); ok {
		t.Error("a refused registration reached the catalog")
	}

	// A part the toolbelt refuses (an action without a handler) leaves the
	// catalog untouched.
	broken := full
	broken.Actions = []extension.Action{{Name: "acme.poke", Summary: "No handler."}}
	if err := host.Register(broken); !errors.Is(err, extension.ErrInvalid) {
		t.Fatalf("an action without a handler: %v, want invalid", err)
	}
	if _, ok := reg.OperationOwner("acme.echo"); ok || slices.Contains(reg.Extensions(), "acme") || tb.Declared("acme.echo") {
		t.Error("a refused registration reached the catalog or the toolbelt")
	}

	// The whole registration, once.
	if err := host.Register(full); err != nil {
		t.Fatal(err)
	}
	if !tb.Declared("acme.echo") {
		t.Error("the toolbelt does not declare the operation")
	}
	if got := acts.List(); len(got) != 1 || got[0].Name != "acme.poke" || got[0].Registration != "acme" {
		t.Errorf("actions = %+v", got)
	}
	if owner, ok := reg.OperationOwner("acme.echo"); !ok || owner != "acme" {
		t.Errorf("the catalog names %q (%v) as the operation's owner", owner, ok)
	}
	if _, ok := reg.Toolset("acme.role"); !ok {
		t.Error("the catalog lacks the toolset")
	}
	if err := tb.Register(full); !errors.Is(err, extension.ErrConflict) {
		t.Errorf("registering again through the toolbelt: %v, want a conflict", err)
	}
}

// The toolbelt takes its Host and Logger from its caller: it refuses to be
// built without them, naming what is missing.
func TestNewRefusesMissingServices(t *testing.T) {
	f := fixture(t, false)
	for name, drop := range map[string]func(*toolbelt.Options){
		"Host":   func(o *toolbelt.Options) { o.Host = nil },
		"Logger": func(o *toolbelt.Options) { o.Logger = nil },
	} {
		o := f.Env.Options()
		drop(&o)
		if _, err := toolbelt.New(o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without a %s: %v, want a refusal naming it", name, err)
		}
	}
}

// Unregister takes a registration away again while the host serves: its
// operations are undeclared, its actions gone and the catalog forgets its
// operations, toolsets and playbooks, so that the name can be registered
// anew (an installed package reinstalled). Registering and unregistering
// while configurations are validated is safe.
func TestHostUnregisterUndeclares(t *testing.T) {
	act := extension.Action{Name: "acme.poke", Summary: "Does it.", Handler: func(context.Context, extension.ActionRequest) (json.RawMessage, error) { return nil, nil }}
	pb := extension.Playbook{Name: "acme-guide", Markdown: "---\noperations: [acme.echo]\n---\n"}
	full := extension.Registration{Name: "acme", OptIn: true, Operations: []extension.Operation{handlerOp("acme.echo", okHandler)},
		Toolsets: []extension.Toolset{{Name: "acme.role", Operations: []extension.ToolsetOperation{{Name: "acme.echo", Since: "1"}}}},
		Actions:  []extension.Action{act}, Playbooks: []extension.Playbook{pb}}
	f := fixture(t, false)
	reg := config.NewRegistry()
	host := toolbelt.NewHost(reg)
	tb, err := toolbelt.New(func() toolbelt.Options { o := f.Env.Options(); o.Host = host; return o }())
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Unregister("acme"); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("unregistering what is not registered: %v", err)
	}
	if err := host.Register(full); err != nil {
		t.Fatal(err)
	}
	if !tb.Declared("acme.echo") || !host.Registered("acme") {
		t.Fatal("not registered")
	}
	doc := []byte(`{"version":1,"extensions":{"acme":{"enabled":true}},"scopes":{}}`)
	if _, res := config.Validate(doc, reg); !res.Valid() {
		t.Fatalf("a configuration enabling the registered extension: %v", res.Diagnostics)
	}
	if err := host.Unregister("acme"); err != nil {
		t.Fatal(err)
	}
	if tb.Declared("acme.echo") || host.Registered("acme") || len(toolbelt.NewActions(nil, host).List()) != 0 {
		t.Error("the toolbelt still serves what was unregistered")
	}
	if _, ok := reg.OperationOwner("acme.echo"); ok || slices.Contains(reg.Extensions(), "acme") {
		t.Error("the catalog still holds the operation or the extension")
	}
	if _, ok := reg.Toolset("acme.role"); ok {
		t.Error("the catalog still holds the toolset")
	}
	if _, ok := reg.PlaybookOperations("acme-guide"); ok {
		t.Error("the catalog still holds the playbook")
	}
	// A configuration that enables it no longer validates.
	if _, res := config.Validate(doc, reg); res.Valid() {
		t.Error("a configuration naming the unregistered extension validates")
	}

	// Registered again, and churned while configurations validate.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 50; i++ {
			if err := host.Register(full); err != nil {
				t.Error(err)
				return
			}
			if err := host.Unregister("acme"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 50; i++ {
		config.Validate(doc, reg)
		reg.Toolsets()
	}
	<-done
	if err := host.Register(full); err != nil {
		t.Fatal(err)
	}
	if !tb.Declared("acme.echo") {
		t.Error("registering again does not declare the operation")
	}
}
