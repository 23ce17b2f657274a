package kernel_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type bundle struct {
	path   string
	store  *sqlite.Store
	clock  *clock.Fake
	rt     *kernel.Runtime
	ctl    *kernel.Control
	routes kernel.RouteTable
	ids    *ids.Generator
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{path: filepath.Join(t.TempDir(), "state.db"), clock: clock.NewFake(t0), routes: kernel.RouteTable{}}
	b.open(t)
	return b
}

// open (re)opens the database file and builds the runtime over it.
func (b *bundle) open(t *testing.T) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: b.path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b.store = s
	if b.ids == nil {
		// One generator across reopens: a restarted daemon draws fresh
		// entropy, it never repeats identifiers.
		b.ids = ids.NewGenerator(b.clock, rand.NewChaCha8([32]byte{1}))
	}
	b.rt, err = kernel.New(kernel.Options{Clock: b.clock, IDs: b.ids, Routes: b.routes})
	if err != nil {
		t.Fatal(err)
	}
	b.ctl = kernel.NewControl(kernel.ControlOptions{Runtime: b.rt, Store: s, Scopes: scopes})
}

// scopes is the configuration the tests' operator controls see.
var scopes = kernel.ScopeTable{
	"s1": {Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"b1": {Grants: []string{"deploy"}}}},
	"s2": {Generation: 1, Active: true, Bindings: map[string]kernel.BindingView{"b1": {}}},
}

// reopen closes the file and opens it again: whatever a test reads next
// comes from disk.
func (b *bundle) reopen(t *testing.T) {
	t.Helper()
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	b.open(t)
}

func (b *bundle) accept(t *testing.T, ev storage.Event) (storage.Event, error) {
	t.Helper()
	var out storage.Event
	err := b.store.WithTx(context.Background(), func(tx storage.Tx) error {
		var err error
		out, err = b.rt.AcceptInTx(context.Background(), tx, ev)
		return err
	})
	return out, err
}

func (b *bundle) derive(t *testing.T, ev storage.Event, l kernel.CausalLimits) (storage.Event, error) {
	t.Helper()
	var out storage.Event
	err := b.store.WithTx(context.Background(), func(tx storage.Tx) error {
		var err error
		out, err = b.rt.AcceptDerivedInTx(context.Background(), tx, ev, l)
		return err
	})
	return out, err
}

func mustCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := kernel.CodeOf(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}
