package config

import (
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// An installed package's executor is added and removed while the daemon
// runs: a binding naming it validates only while it is registered.
func TestRemoveExecutor(t *testing.T) {
	reg := NewRegistry()
	info := executor.Info{Name: "deploy.runner", Transport: executor.TransportNone}
	if err := reg.AddExecutor(info, nil); err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"version":1,"scopes":{"s":{"bindings":{"b":{"executor":"deploy.runner"}}}}}`)
	if _, res := Validate(doc, reg); !res.Valid() {
		t.Fatalf("with the executor: %v", res.Diagnostics)
	}
	if err := reg.RemoveExecutor("deploy.runner"); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Executor("deploy.runner"); ok {
		t.Fatal("still registered")
	}
	if _, res := Validate(doc, reg); res.Valid() {
		t.Fatal("a binding naming a removed executor validates")
	}
	if err := reg.RemoveExecutor("deploy.runner"); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("removing twice: %v", err)
	}
	if err := reg.RemoveExtension("nobody"); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("removing an unknown extension: %v", err)
	}
}
