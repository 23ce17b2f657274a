// Package storagetest is the conformance suite of coordination storage: the
// whole contract of storage.Store (the kernel's events, Work, inputs, keys,
// executions with their leases and epochs, declarations, waits and timers;
// the toolbelt's tokens, request records and call records; the management
// API's credentials, idempotency records, configuration generations, scope
// records and cursor key; artifacts' metadata and bytes; the human
// extension's approvals; and the duty leases of several daemons), written
// once and run against every engine (SQLite and PostgreSQL) so that they
// keep the same rules.
//
// Every case is a named Case in a registry (Cases), grouped by area, one
// file per area, and runs on a fresh database of its own, reopening it
// where it proves that something persists. A new engine runs the suite
// unchanged: give it an Engine and call ExerciseEngine and
// CheckNegativeControls from its tests.
//
// Every case also names its negative control: a deliberately wrong store (a
// wrapper around a real one that breaks exactly one rule, see broken*.go)
// that the case must fail. CheckNegativeControls fails when a case has no
// control, when a case passes against its control, or when a control is no
// working store apart from its rule (it also fails the cases of other
// areas it is tried on), so that no case passes vacuously.
//
// A case must never reach past the storage interfaces (no SQL, no engine
// type, no file of the engine's), so that it means the same on every
// engine; timestamps are whole milliseconds from T0, which every engine
// keeps. The package is for tests only and must never be imported by
// production code: its controls are stores that lose fences, records and
// revocations on purpose, and its helpers seed records without any of the
// kernel's rules.
package storagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Case is one conformance case. Run gets an Env holding a fresh, empty store
// and returns nil when the store keeps the case's rules.
type Case struct {
	Name string
	// Area is the part of the contract the case belongs to (events, work,
	// executions, …); the registry sets it.
	Area string
	Run  func(ctx context.Context, env *Env) error
	// Control is the deliberately wrong store this case must fail.
	Control Control
}

// Control is a negative control: a wrapper that turns a working store into
// one that breaks exactly one rule.
type Control struct {
	Name string
	// Breaks says which rule the wrapped store breaks.
	Breaks string
	// New returns the wrapper for one run of a case. The run applies it to
	// the store at every open of the case's database (the first and each
	// reopen), so a control may keep state across a reopen.
	New func() func(storage.Store) storage.Store
}

// Engine is how the suite opens stores of one implementation.
type Engine struct {
	// Name names the engine in messages.
	Name string
	// Fresh makes a new, empty database of the engine for one case and
	// returns the function that opens it. The suite calls open once at the
	// start of the case and again each time the case reopens the database,
	// after closing the store it had, so a case can prove what persists.
	// Every store open returns is the engine's to close when the test ends
	// (t.Cleanup), including one the suite closed already before a reopen.
	Fresh func(t *testing.T) (open func() (storage.Store, error))
}

// Env is a case's world: the store under test and a directory of its own.
type Env struct {
	// Store is the store under test (wrapped by the control when the case
	// runs against one). Reopen replaces it.
	Store storage.Store
	// Dir is an empty directory that lives as long as the case (artifact
	// bytes go there).
	Dir string

	open func() (storage.Store, error)
	wrap func(storage.Store) storage.Store
}

// Reopen closes the store and opens the same database again, so that what
// a case reads afterwards is what persisted. Under Exercise, whose opener
// cannot reopen, it keeps the store and proves nothing more.
func (e *Env) Reopen() error {
	if e.open == nil {
		return nil
	}
	if err := e.Store.Close(); err != nil {
		return fmt.Errorf("close before reopening: %w", err)
	}
	s, err := e.open()
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	e.Store = e.wrap(s)
	return nil
}

// Cases lists every conformance case, area by area.
func Cases() []Case {
	var out []Case
	for _, a := range []struct {
		name  string
		cases []Case
	}{
		{"events", eventCases()},
		{"work", workCases()},
		{"executions", executionCases()},
		{"waits", waitCases()},
		{"tokens", tokenCases()},
		{"replay", replayCases()},
		{"calls", callCases()},
		{"operators", operatorCases()},
		{"idempotency", idempotencyCases()},
		{"generations", generationCases()},
		{"cursorkey", cursorKeyCases()},
		{"artifacts", artifactCases()},
		{"approvals", approvalCases()},
		{"egress", egressCases()},
		{"duties", dutyCases()},
	} {
		for _, c := range a.cases {
			c.Area = a.name
			out = append(out, c)
		}
	}
	return out
}

func identity(s storage.Store) storage.Store { return s }

// RunCase runs c on a fresh database of e, with each open of it wrapped by
// wrap (nil for none).
func RunCase(t *testing.T, e Engine, c Case, wrap func(storage.Store) storage.Store) error {
	t.Helper()
	if wrap == nil {
		wrap = identity
	}
	open := e.Fresh(t)
	s, err := open()
	if err != nil {
		return fmt.Errorf("open %s: %w", e.Name, err)
	}
	env := &Env{Store: wrap(s), Dir: t.TempDir(), open: open, wrap: wrap}
	return c.Run(context.Background(), env)
}

// ExerciseEngine runs every case against a fresh database of e, reopening
// it where a case proves persistence.
func ExerciseEngine(t *testing.T, e Engine) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := RunCase(t, e, c, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// CheckNegativeControls runs every case against its negative control on
// fresh databases of e, and fails when a case has no control, when a case
// passes against its control, or when a control is not otherwise a working
// store (it fails a case of every other area too).
func CheckNegativeControls(t *testing.T, e Engine) {
	t.Helper()
	cases := Cases()
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Errorf("two cases are named %s", c.Name)
		}
		seen[c.Name] = true
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Control.Name == "" || c.Control.New == nil {
				t.Fatalf("case %s has no negative control", c.Name)
			}
			err := RunCase(t, e, c, c.Control.New())
			if err == nil {
				t.Fatalf("case %s passed against control %s (%s); it must fail", c.Name, c.Control.Name, c.Control.Breaks)
			}
			t.Logf("%s fails as it must against %s: %v", c.Name, c.Control.Name, err)
			// The control breaks its rule, not the store: it passes a
			// case of another area.
			var others []string
			for _, o := range cases {
				if o.Area == c.Area {
					continue
				}
				if RunCase(t, e, o, c.Control.New()) == nil {
					return
				}
				others = append(others, o.Name)
				if len(others) == 3 {
					break
				}
			}
			t.Errorf("control %s is not a working store apart from its rule: it also fails %v", c.Control.Name, others)
		})
	}
}

// runLegacy runs c on open(t), whose store cannot be reopened.
func runLegacy(t *testing.T, open func(t *testing.T) storage.Store, c Case) error {
	t.Helper()
	env := &Env{Store: open(t), Dir: t.TempDir()}
	return c.Run(context.Background(), env)
}

// Exercise runs every case against a fresh store from open. open cannot
// reopen a database, so the cases' reopens keep the store: use
// ExerciseEngine to prove persistence too.
func Exercise(t *testing.T, open func(t *testing.T) storage.Store) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if err := runLegacy(t, open, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Failures runs every case against a fresh store from open and returns the
// names of the cases that failed, with their errors.
func Failures(t *testing.T, open func(t *testing.T) storage.Store) map[string]error {
	t.Helper()
	out := map[string]error{}
	for _, c := range Cases() {
		if err := runLegacy(t, open, c); err != nil {
			out[c.Name] = err
		}
	}
	return out
}

// plain adapts a case that needs nothing but the store.
func plain(run func(ctx context.Context, s storage.Store) error) func(ctx context.Context, env *Env) error {
	return func(ctx context.Context, env *Env) error { return run(ctx, env.Store) }
}

// T0 is the suite's epoch: every timestamp is derived from it, in whole
// milliseconds (an engine need not keep nanoseconds).
var T0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec int) time.Time { return T0.Add(time.Duration(sec) * time.Second) }

func want(cond bool, format string, args ...any) error {
	if !cond {
		return fmt.Errorf(format, args...)
	}
	return nil
}

func wantErr(err, target error, what string) error {
	if !errors.Is(err, target) {
		return fmt.Errorf("%s: got error %v, want %v", what, err, target)
	}
	return nil
}

// wantSomeErr requires a refusal without naming its kind.
func wantSomeErr(err error, what string) error {
	if err == nil {
		return fmt.Errorf("%s was accepted; it must be refused", what)
	}
	return nil
}

// first returns the first non-nil error.
func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// sameJSON reports whether a and b hold the same JSON value (an engine may
// store JSON in a normal form).
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// same reports whether two records hold the same values: times compare
// with Equal (an engine may hand them back in another location), a nil
// slice equals an empty one and JSON compares as values.
func same(a, b any) bool { return sameValue(reflect.ValueOf(a), reflect.ValueOf(b)) }

var (
	timeType = reflect.TypeFor[time.Time]()
	jsonType = reflect.TypeFor[json.RawMessage]()
)

func sameValue(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch {
	case a.Type() == timeType:
		return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
	case a.Type() == jsonType:
		x, y := a.Bytes(), b.Bytes()
		if len(x) == 0 || len(y) == 0 {
			return len(x) == len(y)
		}
		return sameJSON(x, y)
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	}
	return a.Equal(b)
}

// list renders ids for comparison.
func list[T any](rows []T, id func(T) string) string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, id(r))
	}
	return fmt.Sprint(out)
}

func insertEvent(ctx context.Context, tx storage.Tx, id string, mod func(p *storage.InsertEventParams)) (storage.Event, error) {
	p := &storage.InsertEventParams{ID: id, Type: "test.happened", Source: "test", Scope: "s1", Root: id, Data: []byte(`{}`), AcceptedAt: T0}
	if mod != nil {
		mod(p)
	}
	return tx.InsertEvent(ctx, p)
}

// SeedWork inserts a ready Work in scope s1 with binding b1, its
// core.work.created event and its own id as a key.
func SeedWork(ctx context.Context, s storage.Store, workID string) (storage.Work, error) {
	var w storage.Work
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		ev, err := insertEvent(ctx, tx, "evt_created_"+workID, func(p *storage.InsertEventParams) {
			p.Type, p.Source, p.Work, p.CorrelationKey = "core.work.created", "core.host", workID, workID
		})
		if err != nil {
			return err
		}
		w, err = tx.InsertWork(ctx, &storage.InsertWorkParams{ID: workID, Scope: "s1", Binding: "b1", State: storage.WorkReady, CreatedEvent: ev.ID, CreatedAt: T0})
		if err != nil {
			return err
		}
		return tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: "s1", Key: workID, Work: workID, At: T0})
	})
	return w, err
}

// SeedExecution seeds a Work and a running execution of it at epoch 1,
// owned by owner-a with a lease until 30s after T0.
func SeedExecution(ctx context.Context, s storage.Store, workID, exeID string) (storage.Execution, error) {
	if _, err := SeedWork(ctx, s, workID); err != nil {
		return storage.Execution{}, err
	}
	var e storage.Execution
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		e, err = tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: exeID, Work: workID, Scope: "s1", Binding: "b1", Executor: "x",
			Generation: 1, Owner: "owner-a", LeaseExpiresAt: at(30), Deadline: at(600), CreatedAt: T0})
		return err
	})
	return e, err
}

// finish ends an execution at its epoch.
func finish(ctx context.Context, s storage.Store, exeID string, epoch int64) error {
	finished := storage.ExecutionFinished
	return s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exeID, Epoch: epoch, State: &finished, Now: at(1)})
		return err
	})
}
