package daemon

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/scheduler"
)

// The scheduler's view of a binding says whether it selects a secret: a
// binding without one is quick to prepare (scheduler.Binding.NoSecrets).
func TestBindingLookupSaysWhetherABindingSelectsASecret(t *testing.T) {
	doc := `{"version": 1, "secrets": {"tok": "env:SOME_TOKEN"}, "scopes": {"a": {"bindings": {
		"plain": {"executor": "shell", "config": {"command": ["true"]}},
		"secret": {"executor": "shell", "config": {"command": ["true"]}, "secrets": {"TOKEN": "tok"}}}}}}`
	snap, res := config.Validate([]byte(doc), bootstrap.ReleaseRegistry())
	if !res.Valid() {
		t.Fatalf("invalid: %v", res.Diagnostics)
	}
	lookup := bindingLookup(&activeOnly{snap: snap})
	for binding, want := range map[string]bool{"plain": true, "secret": false} {
		b, err := lookup(context.Background(), scheduler.BindingQuery{Scope: "a", Binding: binding})
		if err != nil {
			t.Fatal(err)
		}
		if b.NoSecrets != want {
			t.Errorf("binding %s: NoSecrets %v, want %v", binding, b.NoSecrets, want)
		}
	}
}
