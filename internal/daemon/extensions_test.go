package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
)

// echoExtension is a registration with one operation that serves
// git.credential.
func echoExtension(name, op string) extension.Registration {
	return extension.Registration{Name: name, Operations: []extension.Operation{{
		Name: op, Summary: "Answer a credential.", Capabilities: []string{"git.credential"},
		Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"username":"u","password":"p"}`), nil
		},
	}}}
}

// An extension passed in Options is registered on the toolbelt and added
// to the registry, so a configuration that grants its operation validates
// and the daemon starts with it.
func TestOptionsExtensionsAreRegistered(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"version": 1, "scopes": {"t": {
  "authorization": {"operations": ["echo.credential"]},
  "bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "operations": ["echo.credential"]}}}}}`
	if err := os.WriteFile(filepath.Join(state, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state, func(o *Options) { o.Extensions = []extension.Registration{echoExtension("echo", "echo.credential")} })
	if owner, ok := r.d.opts.Registry.OperationOwner("echo.credential"); !ok || owner != "echo" {
		t.Fatalf("the registry names %q (%v) as the operation's owner, want echo", owner, ok)
	}
	// The toolbelt holds it: registering it again is a conflict.
	if err := r.d.tb.Register(echoExtension("echo", "echo.credential")); !errors.Is(err, extension.ErrConflict) {
		t.Fatalf("registering the extension again: %v, want a conflict", err)
	}
}

// A refused registration stops the start and releases the state
// directory's lock.
func TestOptionsExtensionRefusedStopsTheStart(t *testing.T) {
	state := shortDir(t)
	opts := options(t, state, &syncBuffer{})
	opts.Extensions = []extension.Registration{echoExtension("echo", "other.credential")}
	d, err := New(context.Background(), opts)
	if err == nil {
		d.Close()
		t.Fatal("a registration outside its namespace was accepted")
	}
	if !errors.Is(err, extension.ErrInvalid) || !strings.Contains(err.Error(), "echo") {
		t.Fatalf("refusal %v, want invalid naming the extension", err)
	}
	// Nothing was held: a daemon without the extension starts.
	start(t, state)
}
