package mgmttest

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// CanaryReference is the text of the secret reference StackConfig plants:
// it must never appear in a response or in the SQLite file.
const CanaryReference = "OC_CANARY_REFERENCE_7f3a"

// StackConfig is the configuration a Stack starts with by default: a
// setup scope (one shell binding with a grant and a secret selection, a
// route starting Work for deploy.* events) and a team scope under it with
// two bindings.
var StackConfig = []byte(`{
  "version": 1,
  "secrets": {"canary": "env:` + CanaryReference + `"},
  "scopes": {
    "setup": {
      "authorization": {"operations": ["emit", "create_work", "wait", "declare_outcome", "read_context"], "reads": ["work", "events"]},
      "bindings": {"shell": {"executor": "shell", "config": {"command": ["sh", "-c", "echo hi"]}, "operations": ["emit", "declare_outcome"],
        "secrets": {"TOKEN": "canary"}, "grants": {"extra": {"operations": ["wait"]}}}},
      "routes": [{"id": "deploys", "match": {"type": "deploy.*"}, "binding": "shell"}]
    },
    "team": {
      "parent": "setup",
      "authorization": {"operations": ["emit"], "reads": ["work"]},
      "bindings": {"a": {"executor": "shell", "config": {"command": ["true"]}}, "b": {"executor": "shell", "config": {"command": ["true"]}}}
    }
  }
}
`)

// StackOptions configure a Stack.
type StackOptions struct {
	// StateDir reuses a state directory (a restart); empty makes one.
	StateDir string
	// Default is the default configuration (StackConfig when nil).
	Default []byte
	// ConfigFile, when set, is written to <state>/config.json first.
	ConfigFile []byte
	Clock      *clock.Fake
	// IDs is kept across restarts; nil makes one.
	IDs *ids.Generator
	// Registry validates configurations; nil is bootstrap.ReleaseRegistry().
	Registry *config.Registry
	// Extensions are registered on the Stack's Host (with Registry as its
	// catalog) before the configuration is restored, as the daemon does.
	Extensions []extension.Registration
	// LiveLogs says where a running attempt writes its log (the log
	// routes); nil serves stored logs only.
	LiveLogs management.LiveLogs
	// Owner is the daemon's owner id the log routes compare attempts'
	// owners with (empty: every attempt is taken for this daemon's).
	Owner string
	// OnCommit, when set, is told of every committed write transaction
	// of the Stack's store (sqlite.Options.OnCommit).
	OnCommit func(time.Duration)
}

// Stack is the management server with every resource and action route,
// built by management.NewServers as the daemon builds it, on a real SQLite
// store in its state directory, with the real runtime, config service and
// artifacts: what the daemon serves, without a scheduler or a toolbelt.
type Stack struct {
	*Harness
	Store     *sqlite.Store
	IDs       *ids.Generator
	Runtime   *kernel.Runtime
	Control   *kernel.Control
	Artifacts *storage.Artifacts
	Config    *configsvc.Service
	Resources *management.Resources
	Cursors   *management.Cursors
	// Host holds the Extensions; Actions serves their actions.
	Host    *toolbelt.Host
	Actions *toolbelt.Actions
}

// StartStack starts a Stack and stops it when the test ends. A config
// that does not restore fails the test; use OpenStack to see the error.
func StartStack(t testing.TB, opts StackOptions) *Stack {
	t.Helper()
	s, err := OpenStack(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// OpenStack is StartStack returning Restore's error instead of failing.
func OpenStack(t testing.TB, opts StackOptions) (*Stack, error) {
	t.Helper()
	ctx := context.Background()
	if opts.StateDir == "" {
		opts.StateDir = NewStateDir(t)
	}
	if opts.Default == nil {
		opts.Default = StackConfig
	}
	if opts.Clock == nil {
		opts.Clock = clock.NewFake(Epoch)
	}
	if opts.IDs == nil {
		opts.IDs = ids.NewGenerator(opts.Clock, rand.NewChaCha8([32]byte{7}))
	}
	if err := statedir.Prepare(opts.StateDir); err != nil {
		t.Fatal(err)
	}
	if opts.ConfigFile != nil {
		if err := os.WriteFile(filepath.Join(opts.StateDir, configsvc.ConfigFileName), opts.ConfigFile, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(opts.StateDir, "coordination.db"), Clock: opts.Clock, OnCommit: opts.OnCommit})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Registry == nil {
		opts.Registry = bootstrap.ReleaseRegistry()
	}
	host := toolbelt.NewHost(opts.Registry)
	for _, ext := range opts.Extensions {
		if err := host.Register(ext); err != nil {
			store.Close()
			t.Fatalf("cannot register extension %s: %v", ext.Name, err)
		}
	}
	cfg, err := configsvc.New(configsvc.Options{Store: store, StateDir: opts.StateDir, Default: opts.Default, Clock: opts.Clock, Registry: opts.Registry, Logger: DiscardLogger()})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	if err := cfg.Restore(ctx); err != nil {
		store.Close()
		return nil, err
	}
	t.Cleanup(func() { store.Close() })
	rt, err := kernel.New(kernel.Options{Clock: opts.Clock, IDs: opts.IDs, Routes: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctl := kernel.NewControl(kernel.ControlOptions{Runtime: rt, Store: store, Scopes: cfg})
	arts, err := storage.NewArtifacts(store, filepath.Join(opts.StateDir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := management.LoadCursorKey(ctx, store, rand.NewChaCha8([32]byte{9}), opts.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	cursors, err := management.NewCursors(key, nil, opts.Clock)
	if err != nil {
		t.Fatal(err)
	}
	acts := toolbelt.NewActions(ctl, host)
	srv, err := management.NewServers(management.Parts{
		Store: store, Control: ctl, Actions: acts, Config: cfg, Artifacts: arts, Cursors: cursors,
		Clock: opts.Clock, Entropy: rand.NewChaCha8([32]byte{11}), Logger: DiscardLogger(), Version: "test",
		LiveLogs: opts.LiveLogs, Owner: opts.Owner,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := serve(t, &Harness{StateDir: opts.StateDir, Server: srv.Management, Credentials: management.StoreCredentials(store),
		Idempotency: management.StoreIdempotency(store), Clock: opts.Clock})
	return &Stack{Harness: h, Store: store, IDs: opts.IDs, Runtime: rt, Control: ctl, Artifacts: arts, Config: cfg, Resources: srv.Resources, Cursors: cursors,
		Host: host, Actions: acts}, nil
}

// Stop stops the server, releases the lock and closes the store, so that
// the state directory can be opened again (a restart).
func (s *Stack) Stop() error {
	return errors.Join(s.Harness.Stop(), s.Store.Close())
}
