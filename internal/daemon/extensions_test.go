package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/introspection"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/storage"
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

// The release registers the introspection extension: a configuration
// that enables it for one scope and grants its toolset validates, with
// the daemon and offline alike (daemon.ReleaseRegistry; the bare
// executor registry refuses it), and the pinned generation says for which
// scope it is enabled.
func TestReleaseRegistersIntrospection(t *testing.T) {
	cfg := `{"version": 1, "extensions": {"introspection": {"enabled": true, "scopes": ["t"]}}, "scopes": {
  "t": {"authorization": {"operations": ["@introspection.reader"], "reads": ["work"]},
    "bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "operations": ["@introspection.reader"]}}},
  "u": {"authorization": {"operations": []},
    "bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}}}}}}`
	reg, err := ReleaseRegistry()
	if err != nil {
		t.Fatal(err)
	}
	if _, res := config.Validate([]byte(cfg), reg); !res.Valid() {
		t.Fatalf("offline, the configuration is refused: %v", res.Diagnostics)
	}
	if _, res := config.Validate([]byte(cfg), bootstrap.ReleaseRegistry()); res.Valid() {
		t.Fatal("the executors' registry alone knows the introspection extension")
	}

	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	if owner, ok := r.d.opts.Registry.OperationOwner("introspection.work"); !ok || owner != "introspection" {
		t.Fatalf("the registry names %q (%v) as introspection.work's owner", owner, ok)
	}
	exts := extensionsOf(r.d.cfg)
	for scope, want := range map[string]bool{"t": true, "u": false} {
		if on := exts(0, "introspection").In(scope); on != want {
			t.Errorf("enabled for scope %s: %v, want %v", scope, on, want)
		}
	}
	if on := exts(0, "other").In("t"); on {
		t.Errorf("an extension the release does not register is enabled: %v", on)
	}
	// The toolbelt holds it: registering it again is a conflict.
	if err := r.d.tb.Register(introspection.Registration(nil)); !errors.Is(err, extension.ErrConflict) {
		t.Fatalf("registering introspection again: %v, want a conflict", err)
	}
}

// snapshotSource is a configSource holding one active snapshot.
type snapshotSource struct{ snap *config.Snapshot }

func (s snapshotSource) Active() *config.Snapshot { return s.snap }
func (s snapshotSource) Snapshot(context.Context, int64) (*config.Snapshot, error) {
	return s.snap, nil
}
func (s snapshotSource) OnApply(func(*config.Snapshot)) {}

// An introspection entry enables it for the scopes it lists, every scope
// when it lists none, no scope for [] or enabled false or no entry (it is
// opt-in).
func TestIntrospectionFollowsTheEntry(t *testing.T) {
	reg, err := ReleaseRegistry()
	if err != nil {
		t.Fatal(err)
	}
	scopes := `"scopes": {"t": {"bindings": {}}, "u": {"bindings": {}}}`
	for entry, want := range map[string][2]bool{
		`"introspection": {"scopes": ["t"]}`:  {true, false},
		`"introspection": {}`:                 {true, true},
		`"introspection": {"scopes": []}`:     {false, false},
		`"introspection": {"enabled": false}`: {false, false},
		``:                                    {false, false},
		`"introspection": {"enabled": true, "scopes": ["u"]}`: {false, true},
	} {
		snap, res := config.Validate([]byte(`{"version": 1, "extensions": {`+entry+`}, `+scopes+`}`), reg)
		if !res.Valid() {
			t.Fatalf("%s: %v", entry, res.Diagnostics)
		}
		for i, scope := range []string{"t", "u"} {
			if on := extensionsOf(snapshotSource{snap})(3, introspection.Name).In(scope); on != want[i] {
				t.Errorf("entry {%s}: enabled for %s = %v, want %v", entry, scope, on, want[i])
			}
		}
	}
}

// Whether an extension's operations are served follows each apply,
// without a restart: a running attempt's next call is refused once an
// apply disables introspection, an attempt pinned to a generation that
// has no entry is refused (it is opt-in), and one pinned to a generation
// that enables it again calls it.
func TestApplyEnablingIntrospectionChangesTheNextCall(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	flags := filepath.Join(filepath.Dir(state), "flags")
	if err := os.MkdirAll(flags, 0o700); err != nil {
		t.Fatal(err)
	}
	// The first call, a mark, a pause until the test says go, the second.
	script := `os call introspection.work >/dev/null && touch ` + flags + `/called; ` +
		`while [ ! -f ` + flags + `/go ]; do sleep 0.05; done; os call introspection.work >/dev/null`
	doc := func(entry string) []byte {
		script, _ := json.Marshal(script)
		return []byte(`{"version": 1, "extensions": {` + entry + `}, "scopes": {"t": {
  "authorization": {"operations": ["@introspection.reader"], "reads": ["work"]},
  "bindings": {"b": {"executor": "shell", "config": {"command": ["sh", "-c", ` + string(script) + `]}, "operations": ["@introspection.reader"]}}}}}`)
	}
	enabled, disabled := `"introspection": {"enabled": true}`, `"introspection": {"enabled": false}`
	if err := os.WriteFile(filepath.Join(state, ConfigFile), doc(enabled), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	results := func(w storage.Work) []string {
		t.Helper()
		exes := r.executions(w.ID)
		if len(exes) != 1 {
			t.Fatalf("Work %s has %d executions", w.ID, len(exes))
		}
		calls, err := r.d.store.ListToolbeltCalls(context.Background(), &storage.ListToolbeltCallsParams{Execution: exes[0].ID})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range calls {
			if c.Operation == introspection.OpWork {
				out = append(out, c.Result)
			}
		}
		return out
	}
	apply := func(entry string) {
		t.Helper()
		r.apply(doc(entry), r.d.cfg.Active().Generation)
	}
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(flags, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Enabled: the first call passes; disabled by an apply while the
	// attempt runs, its next call is refused.
	a := r.create("t", "b")
	deadline := time.Now().Add(guard)
	for {
		if _, err := os.Stat(filepath.Join(flags, "called")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first call never passed:\n%s", r.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	apply(disabled)
	touch("go")
	r.terminal(a.ID)
	if got := results(a); !slices.Equal(got, []string{"ok", "forbidden"}) {
		t.Fatalf("the attempt's calls %v, want ok then forbidden once disabled", got)
	}

	// No entry: opt-in, so not enabled.
	apply(``)
	b := r.terminal(r.create("t", "b").ID)
	if got := results(b); !slices.Equal(got, []string{"forbidden", "forbidden"}) {
		t.Fatalf("with no entry, the calls %v, want forbidden twice", got)
	}

	// Enabled again: both calls pass.
	apply(enabled)
	c := r.terminal(r.create("t", "b").ID)
	if got := results(c); !slices.Equal(got, []string{"ok", "ok"}) {
		t.Fatalf("enabled again, the calls %v, want ok twice", got)
	}
}
