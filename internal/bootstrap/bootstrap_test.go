package bootstrap

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
)

func TestDefaultConfigValidatesAgainstTheRelease(t *testing.T) {
	snap, res := config.Validate(DefaultConfig(), ReleaseRegistry())
	if snap == nil {
		t.Fatalf("the default configuration does not validate: %+v", res.Diagnostics)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("the default configuration has warnings: %+v", res.Warnings)
	}
	sc, ok := snap.Scope(DefaultScope)
	if !ok || !sc.Active {
		t.Fatalf("scope %s is missing or inactive", DefaultScope)
	}
	b, ok := snap.Binding(DefaultScope, DefaultBinding)
	if !ok {
		t.Fatalf("binding %s of scope %s is missing", DefaultBinding, DefaultScope)
	}
	if b.Executor != shell.Name {
		t.Errorf("binding executor = %q, want %q", b.Executor, shell.Name)
	}
	for _, op := range []string{"emit", "create_work", "wait", "declare_outcome", "read_context"} {
		if !slices.Contains(b.Operations, op) || !snap.AuthorizeOperation(DefaultScope, op) {
			t.Errorf("builtin %s is not granted to the binding under its ceiling", op)
		}
	}
	if len(b.Secrets) != 0 || len(snap.SecretNames()) != 0 {
		t.Errorf("the default configuration names secrets: %v %v", b.Secrets, snap.SecretNames())
	}
}

func TestDefaultRouteStartsManualEventsOnTheShellBinding(t *testing.T) {
	snap, _ := config.Validate(DefaultConfig(), ReleaseRegistry())
	if snap == nil {
		t.Fatal("the default configuration does not validate")
	}
	sc, _ := snap.Scope(DefaultScope)
	if len(sc.Routes) != 1 {
		t.Fatalf("routes = %+v, want one", sc.Routes)
	}
	r := sc.Routes[0]
	if r.Binding != DefaultBinding || r.Effect != config.EffectStart {
		t.Errorf("route %s = %+v, want start on %s", r.ID, r, DefaultBinding)
	}
	if !r.Match.Matches("setup.hello", "core.manual") {
		t.Error("an operator's setup.hello does not match the route")
	}
	if r.Match.Matches("setup.hello", "github") {
		t.Error("an Event from another source matches the manual route")
	}
}

// The command is fixed: nothing an Event carries can reach the shell.
func TestDefaultCommandTakesNothingFromEventData(t *testing.T) {
	snap, _ := config.Validate(DefaultConfig(), ReleaseRegistry())
	if snap == nil {
		t.Fatal("the default configuration does not validate")
	}
	b, _ := snap.Binding(DefaultScope, DefaultBinding)
	cfg, err := shell.ParseConfig(b.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Command) != 3 || cfg.Command[0] != "sh" || cfg.Command[1] != "-c" {
		t.Fatalf("command = %q, want sh -c SCRIPT", cfg.Command)
	}
	script := cfg.Command[2]
	for i := 0; i < len(script); i++ {
		if script[i] != '$' {
			continue
		}
		name := script[i+1:]
		if !strings.HasPrefix(name, "OPEN_CONDUIT_WORK_ID") && !strings.HasPrefix(name, "OPEN_CONDUIT_SCOPE_ID") {
			t.Errorf("the script expands something other than the host's ids at %q", script[i:])
		}
	}
	if len(cfg.Env) != 0 || cfg.Dir != "" {
		t.Errorf("env %v and dir %q, want none", cfg.Env, cfg.Dir)
	}
}

func TestDefaultConfigIsACopy(t *testing.T) {
	a := DefaultConfig()
	a[0] = 'x'
	if b := DefaultConfig(); bytes.Equal(a, b) || !json.Valid(b) {
		t.Fatal("DefaultConfig returned shared bytes")
	}
}
