package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// The kernel's causal default is the configuration's: an embedder or test
// that passes zero limits gets what an operator who sets none gets.
func TestKernelCausalDefaultIsTheConfigurations(t *testing.T) {
	if got := causalOf(config.DefaultLimits()); got != kernel.DefaultCausalLimits {
		t.Fatalf("the configuration's default causal limits %+v, the kernel's %+v: they must agree", got, kernel.DefaultCausalLimits)
	}
}

// snapshots is a configSource over validated snapshots by generation.
type snapshots struct {
	active *config.Snapshot
	byGen  map[int64]*config.Snapshot
}

func (s *snapshots) Active() *config.Snapshot { return s.active }
func (s *snapshots) Snapshot(_ context.Context, g int64) (*config.Snapshot, error) {
	if snap, ok := s.byGen[g]; ok {
		return snap, nil
	}
	return nil, errors.New("no such generation")
}
func (s *snapshots) OnApply(func(*config.Snapshot)) {}

// The host's view of a generation is its extensions entries: enabled,
// scopes and config; no entry is enabled everywhere; a generation that
// cannot be read enables nothing.
func TestExtensionsOfFollowsTheGeneration(t *testing.T) {
	reg := config.NewRegistry()
	for _, name := range []string{"human", "other"} {
		if err := reg.AddExtension(name, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.SetExtensionConfig("human", func(json.RawMessage) error { return nil }); err != nil {
		t.Fatal(err)
	}
	validate := func(doc string) *config.Snapshot {
		snap, res := config.Validate([]byte(doc), reg)
		if snap == nil {
			t.Fatalf("invalid: %v", res.Diagnostics)
		}
		return snap
	}
	on := validate(`{"version": 1, "extensions": {"human": {"scopes": ["a"], "config": {"k": 1}}}, "scopes": {"a": {}}}`)
	off := validate(`{"version": 1, "extensions": {"human": {"enabled": false}}, "scopes": {"a": {}}}`)
	src := &snapshots{active: off, byGen: map[int64]*config.Snapshot{1: on}}
	exts := extensionsOf(src)
	if e := exts(1, "human"); !e.In("a") || e.In("b") || string(e.Config) != `{"k":1}` {
		t.Fatalf("generation 1 says %+v", e)
	}
	if e := exts(0, "human"); e.Enabled {
		t.Fatalf("the active generation disables human, the port says %+v", e)
	}
	if e := exts(1, "other"); !e.In("a") || !e.In("b") {
		t.Fatalf("an extension without an entry is %+v, want enabled everywhere", e)
	}
	if e := exts(7, "other"); e.Enabled {
		t.Fatalf("an unreadable generation enables %+v", e)
	}
}

// activeOnly is a configuration source that only has an active snapshot.
type activeOnly struct{ snap *config.Snapshot }

func (a *activeOnly) Active() *config.Snapshot { return a.snap }
func (a *activeOnly) Snapshot(context.Context, int64) (*config.Snapshot, error) {
	return a.snap, nil
}
func (a *activeOnly) OnApply(func(*config.Snapshot)) {}

// The toolbelt's emit rule is the active snapshot's authorization.emit,
// read on every call: an apply that narrows it applies to the next one.
func TestEmitAllowedFollowsTheActiveConfiguration(t *testing.T) {
	validate := func(emit string) *config.Snapshot {
		t.Helper()
		doc := `{"version": 1, "scopes": {"team": {"authorization": {"operations": ["emit"]` + emit + `}}}}`
		snap, res := config.Validate([]byte(doc), config.NewRegistry())
		if !res.Valid() {
			t.Fatalf("invalid: %v", res.Diagnostics)
		}
		return snap
	}
	src := &activeOnly{snap: validate("")}
	allowed := emitAllowed(src)
	if !allowed("team", "b", "deploy.done") || !allowed("team", "b", "ci.passed") {
		t.Fatal("without authorization.emit every family is allowed")
	}
	src.snap = validate(`, "emit": ["deploy"]`)
	if !allowed("team", "b", "deploy.done") || allowed("team", "b", "ci.passed") || allowed("elsewhere", "b", "deploy.done") {
		t.Fatal("the narrowed rule is not the one applied")
	}
}

// The configuration and the host's port agree on every extension: an
// opt-in one is enabled only where an entry enables it, one that is not
// is enabled everywhere without an entry, and an entry says what it says
// whichever it is.
func TestExtensionEnabledAndThePortAgree(t *testing.T) {
	reg := config.NewRegistry()
	for _, name := range []string{"optin", "plain"} {
		if err := reg.AddExtension(name, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.SetExtensionOptIn("optin"); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetExtensionOptIn("nobody"); err == nil {
		t.Fatal("an unregistered extension was made opt-in")
	}
	type want struct{ a, b bool }
	for _, tt := range []struct {
		entries      string
		optin, plain want
	}{
		{``, want{false, false}, want{true, true}},
		{`"optin": {}, "plain": {}`, want{true, true}, want{true, true}},
		{`"optin": {"scopes": ["a"]}, "plain": {"scopes": ["b"]}`, want{true, false}, want{false, true}},
		{`"optin": {"enabled": false}, "plain": {"enabled": false}`, want{false, false}, want{false, false}},
		{`"optin": {"scopes": []}, "plain": {"scopes": []}`, want{false, false}, want{false, false}},
	} {
		snap, res := config.Validate([]byte(`{"version": 1, "extensions": {`+tt.entries+`}, "scopes": {"a": {}, "b": {}}}`), reg)
		if snap == nil {
			t.Fatalf("{%s}: %v", tt.entries, res.Diagnostics)
		}
		exts := extensionsOf(&snapshots{active: snap})
		for name, w := range map[string]want{"optin": tt.optin, "plain": tt.plain, "unregistered": {}} {
			on, scopes := snap.ExtensionEnabled(name)
			e := exts(0, name)
			for scope, wantOn := range map[string]bool{"a": w.a, "b": w.b} {
				cfgSays := on && (scopes == nil || slices.Contains(scopes, scope))
				if cfgSays != wantOn || e.In(scope) != wantOn {
					t.Errorf("{%s}: %s in %s: the configuration says %v, the port %v, want %v", tt.entries, name, scope, cfgSays, e.In(scope), wantOn)
				}
			}
		}
	}
}
