package toolbelt_test

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
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var operator = kernel.WithActor(context.Background(), "operator:ann")

// bundle is a kernel over a real SQLite file, for the tests of what the
// toolbelt package adds on top of it without a token (operator actions).
type bundle struct {
	path  string
	store *sqlite.Store
	clock *clock.Fake
	rt    *kernel.Runtime
	ctl   *kernel.Control
	acts  *toolbelt.Actions
	ids   *ids.Generator
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{path: filepath.Join(t.TempDir(), "state.db"), clock: clock.NewFake(t0)}
	b.ids = ids.NewGenerator(b.clock, rand.NewChaCha8([32]byte{1}))
	b.open(t)
	return b
}

// open (re)opens the database file and builds the kernel over it.
func (b *bundle) open(t *testing.T) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: b.path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b.store = s
	if b.rt, err = kernel.New(kernel.Options{Clock: b.clock, IDs: b.ids, Routes: kernel.RouteTable{}}); err != nil {
		t.Fatal(err)
	}
	b.ctl = kernel.NewControl(kernel.ControlOptions{Runtime: b.rt, Store: s, Scopes: kernel.ScopeTable{
		"s1": {Active: true, Bindings: map[string]kernel.BindingView{"b1": {}}},
		"s2": {Active: true, Bindings: map[string]kernel.BindingView{"b1": {}}},
	}})
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

func (b *bundle) createWork(t *testing.T, req kernel.CreateWorkRequest) storage.Work {
	t.Helper()
	if req.Scope == "" {
		req.Scope = "s1"
	}
	if req.Binding == "" {
		req.Binding = "b1"
	}
	res, err := b.ctl.CreateWork(operator, req)
	if err != nil {
		t.Fatal(err)
	}
	return res.Work
}

// inputsOf lists the events queued as inputs of a Work, in order.
func inputsOf(t *testing.T, rd storage.Reader, work string) []string {
	t.Helper()
	ins, err := rd.ListInputs(context.Background(), &storage.ListInputsParams{Work: work})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.Event)
	}
	return out
}

func mustCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := kernel.CodeOf(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}
