// Package toolbelttest is the toolbelt conformance suite: cases written
// once (Cases, ScheduledCases, Exercise) that every toolbelt implementation
// must pass, run on a persistent SQLite file and again across a reopen of
// it, and the deliberately broken implementations (negative controls) that
// each case must fail, so that no case passes vacuously.
//
// Cases set up their executions through the kernel's real paths; nothing
// of storage is faked. A Harness says how: by default the Work is
// created by the runtime and claimed and recovered through storage's
// fenced updates, and the suite issues the tokens itself; a harness with a
// Scheduled driver (internal/scheduler/toolbeltint) has the real scheduler
// claim, recover, adopt, resume and complete every attempt and issue every
// token, and also runs ScheduledCases. It must never be imported by
// production code.
package toolbelttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// T0 is the suite's start time.
var T0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// The configuration every case runs under.
const (
	Scope   = "s1"
	Binding = "b1"
	// Resumable is a second binding of Scope; a scheduled harness runs it
	// on a resume-capable executor.
	Resumable = "b2"
	// Owner is the daemon instance that holds the attempts until another
	// adopts them (Fixture.Adopt).
	Owner = "daemon-a"
	// Grant is a binding grant of Binding whose operations the Work may
	// take.
	Grant = "extra"
)

// Pinned is the configuration generation every case's attempt is pinned
// to. Generation 0 is the active one (see Enablements).
const Pinned = 1

// Lease and Deadline are the lease and attempt timeout every attempt gets;
// Recover moves the clock past the lease.
const (
	Lease    = 10 * time.Minute
	Deadline = time.Hour
)

// Toolbelt is what the suite drives: the extension contracts, the token
// issuer the scheduler calls, and issue and revocation by id.
type Toolbelt interface {
	extension.Toolbelt
	extension.Registrar
	toolbelt.TokenIssuer
	IssueToken(ctx context.Context, req toolbelt.IssueRequest) (toolbelt.IssuedToken, error)
	Revoke(ctx context.Context, tokenID string) error
}

var _ Toolbelt = (*toolbelt.Toolbelt)(nil)

// Env is what a harness builds a toolbelt on. It is rebuilt after every
// reopen of the database file and after every adoption.
type Env struct {
	Path    string
	Store   *sqlite.Store
	Runtime *kernel.Runtime
	Clock   *clock.Fake
	Ceiling *Ceiling
	// Extensions is what each generation says of each registration; the
	// cases change it while calls go on, as an apply would.
	Extensions *Enablements
	Entropy    *rand.ChaCha8
	// Owner is the daemon instance the toolbelt's lease guard requires
	// (Owner until an adoption).
	Owner string
}

// Options returns the production options of a toolbelt on env, its Host
// following env.Extensions.
func (e *Env) Options() toolbelt.Options {
	host := toolbelt.NewHost(nil)
	host.Follow(e.Extensions.At)
	return toolbelt.Options{
		Runtime: e.Runtime, Store: e.Store, Entropy: e.Entropy, Owner: e.Owner, Host: host,
		Bindings: func(gen int64, scope, binding string) (toolbelt.BindingAuthority, bool) {
			if scope != Scope || (binding != Binding && binding != Resumable) {
				return toolbelt.BindingAuthority{}, false
			}
			return toolbelt.BindingAuthority{
				Operations: []string{"emit", "create_work", "wait", "declare_outcome", "read_context", "acme.count", "acme.echo", "acme.unregistered",
					"acme.secret", "acme.credential", "acme.plain", "beta.ping"},
				Grants: map[string][]string{Grant: {"acme.extra"}},
			}, true
		},
		Scopes: kernel.ScopeTable{Scope: {Active: true, Bindings: map[string]kernel.BindingView{
			Binding: {Grants: []string{Grant}}, Resumable: {Grants: []string{Grant}},
		}}},
		Authorize:     e.Ceiling.Authorize,
		AuthorizeAt:   e.Ceiling.AuthorizeAt,
		AuthorizeRead: e.Ceiling.AuthorizeRead,
		Logger:        slog.New(slog.DiscardHandler),
	}
}

// Enablements is what the suite's configuration generations say of each
// registration: enabled in every scope with no config, until a case sets
// otherwise for a generation (0: the active one).
type Enablements struct {
	mu sync.Mutex
	m  map[enablementKey]toolbelt.Enablement
}

type enablementKey struct {
	generation int64
	reg        string
}

// Set says what generation says of reg from now on.
func (e *Enablements) Set(generation int64, reg string, en toolbelt.Enablement) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[enablementKey]toolbelt.Enablement{}
	}
	e.m[enablementKey{generation, reg}] = en
}

// At is the toolbelt.Extensions port over the table.
func (e *Enablements) At(generation int64, reg string) toolbelt.Enablement {
	e.mu.Lock()
	defer e.mu.Unlock()
	if en, ok := e.m[enablementKey{generation, reg}]; ok {
		return en
	}
	return toolbelt.Enablement{Enabled: true}
}

// Ceiling is a scope ceiling the cases narrow while calls go on, as a
// config apply would.
type Ceiling struct {
	mu     sync.Mutex
	denied map[string]bool
}

// Authorize allows every operation not denied.
func (c *Ceiling) Authorize(scope, op string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.denied[scope+" "+op] && !c.denied[scope+" *"]
}

// AuthorizeAt is the same ceiling whatever the generation: the suite
// narrows it live, as an apply's commit and activation would together.
func (c *Ceiling) AuthorizeAt(_ context.Context, _ int64, scope, op string) (bool, error) {
	return c.Authorize(scope, op), nil
}

// AuthorizeRead allows every read not denied.
func (c *Ceiling) AuthorizeRead(scope, read string) bool {
	return c.Authorize(scope, "read:"+read)
}

// Deny narrows the ceiling ("*" disables the scope); Allow widens it.
func (c *Ceiling) Deny(scope, op string) { c.set(scope, op, true) }

// Allow undoes Deny.
func (c *Ceiling) Allow(scope, op string) { c.set(scope, op, false) }

func (c *Ceiling) set(scope, op string, deny bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.denied == nil {
		c.denied = map[string]bool{}
	}
	c.denied[scope+" "+op] = deny
}

// Harness builds the implementation under test and says how the cases'
// attempts are set up.
type Harness struct {
	Name string
	New  func(env *Env) (Toolbelt, error)
	// Driver returns a fresh driver for one fixture; nil sets attempts
	// up directly through storage.
	Driver func() Driver
}

// Real is the production toolbelt, with attempts set up directly through
// storage.
var Real = Harness{Name: "toolbelt.Toolbelt", New: func(env *Env) (Toolbelt, error) {
	return toolbelt.New(env.Options())
}}

func (h Harness) driver() Driver {
	if h.Driver == nil {
		return &direct{}
	}
	return h.Driver()
}

// Scheduled reports whether h's attempts run through a scheduler, so that
// ScheduledCases apply to it.
func (h Harness) Scheduled() bool {
	_, ok := h.driver().(Scheduled)
	return ok
}

// Driver is how a fixture's attempts come about: claimed, recovered after
// their lease expired, and the token of each issued. Every method runs on
// the fixture's current Env.
type Driver interface {
	// Open starts the driver on a freshly opened Env (after every open,
	// reopen and adoption), with f.TB already built and registered.
	Open(f *Fixture) error
	// Close stops it; the database closes after.
	Close() error
	// Claim claims the ready Work w for f.Env.Owner (epoch 1) and returns
	// the attempt with the token issued for it.
	Claim(f *Fixture, w storage.Work) (*Attempt, error)
	// Recover moves the clock past the attempt's lease and takes it over
	// with the next epoch and a fresh token, as a daemon does once a lease
	// expired.
	Recover(f *Fixture, a *Attempt) (*Attempt, error)
}

// Scheduled is a Driver that runs attempts through a scheduler and its
// executors: the token of every attempt is the one the scheduler issued
// and handed to the executor.
type Scheduled interface {
	Driver
	// Finish ends the attempt's segment with res and has the scheduler
	// apply it (Complete). When the current daemon does not observe the
	// segment (it was restarted at a checkpoint), the attempt is first
	// recovered as a daemon does once the lease expired, and the recovered
	// segment is finished. It returns the attempt that was completed, as
	// stored afterwards.
	Finish(f *Fixture, a *Attempt, res executor.Result) (*Attempt, error)
	// Resume runs a scheduler round that resumes the parked execution of a
	// woken Work, and returns the resumed attempt.
	Resume(f *Fixture, a *Attempt) (*Attempt, error)
	// Adopt has the daemon f was just restarted as (another owner) adopt
	// the attempt an earlier daemon left, at once.
	Adopt(f *Fixture, a *Attempt) (*Attempt, error)
}

// ErrNotScheduled is returned by the fixture's scheduler-only steps on a
// driver that runs no scheduler.
var ErrNotScheduled = errors.New("toolbelttest: this harness runs no scheduler")

// Fixture is one case's world: a database file, the kernel over it, the
// toolbelt under test and the driver that sets up its attempts.
type Fixture struct {
	Env    *Env
	TB     Toolbelt
	h      Harness
	driver Driver
	reopen bool
	ids    *ids.Generator
	regs   []extension.Registration
	owners int
}

// NewFixture opens a fresh database in dir. With reopen, Checkpoint closes
// and reopens the file and rebuilds everything on it.
func NewFixture(dir string, h Harness, reopen bool) (*Fixture, error) {
	c := clock.NewFake(T0)
	f := &Fixture{h: h, driver: h.driver(), reopen: reopen, ids: ids.NewGenerator(c, rand.NewChaCha8([32]byte{7}))}
	f.Env = &Env{Path: filepath.Join(dir, "state.db"), Clock: c, Ceiling: &Ceiling{}, Extensions: &Enablements{}, Entropy: rand.NewChaCha8([32]byte{9}), Owner: Owner}
	if err := f.open(); err != nil {
		if f.Env.Store != nil {
			f.Env.Store.Close()
		}
		return nil, err
	}
	return f, nil
}

// Dir is the directory of the fixture's database file.
func (f *Fixture) Dir() string { return filepath.Dir(f.Env.Path) }

// open opens the database unless it is open, and builds the runtime, the
// toolbelt (with its registrations) and the driver on it.
func (f *Fixture) open() error {
	if f.Env.Store == nil {
		s, err := sqlite.Open(context.Background(), sqlite.Options{Path: f.Env.Path, Clock: f.Env.Clock})
		if err != nil {
			return err
		}
		f.Env.Store = s
	}
	rt, err := kernel.New(kernel.Options{Clock: f.Env.Clock, IDs: f.ids, Causal: kernel.CausalLimits{MaxDepth: 8, PerMinute: 1000}})
	if err != nil {
		return err
	}
	f.Env.Runtime = rt
	if f.TB, err = f.h.New(f.Env); err != nil {
		return err
	}
	for _, r := range f.regs {
		if err := f.TB.Register(r); err != nil {
			return fmt.Errorf("re-register %s after reopen: %w", r.Name, err)
		}
	}
	return f.driver.Open(f)
}

// restart stops the driver and builds everything again, on the database
// reopened when the fixture reopens.
func (f *Fixture) restart() error {
	if err := f.driver.Close(); err != nil {
		return err
	}
	if f.reopen {
		if err := f.Env.Store.Close(); err != nil {
			return err
		}
		f.Env.Store = nil
	}
	return f.open()
}

// Close stops the driver and closes the database.
func (f *Fixture) Close() error {
	return errors.Join(f.driver.Close(), f.Env.Store.Close())
}

// Checkpoint is where a case's state must have reached the file: in
// reopen mode the file is closed and opened again, and the toolbelt and
// driver rebuilt (its registrations made again, as a restarted daemon
// does) under the same owner, whose leases are still valid.
func (f *Fixture) Checkpoint() error {
	if !f.reopen {
		return nil
	}
	return f.restart()
}

// Register registers on the toolbelt and remembers the registration for
// reopens.
func (f *Fixture) Register(reg extension.Registration) error {
	if err := f.TB.Register(reg); err != nil {
		return err
	}
	f.regs = append(f.regs, reg)
	return nil
}

// Attempt is a claimed execution and its current token.
type Attempt struct {
	Work      storage.Work
	Execution storage.Execution
	Token     string
	TokenID   string
	// Kind is the executor call that received the token (run, recover or
	// resume) under a scheduled driver; empty under the direct one.
	Kind string
}

// Create creates a ready Work of binding through the kernel.
func (f *Fixture) Create(binding string, grants ...string) (storage.Work, error) {
	ctx := context.Background()
	var w storage.Work
	err := f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		created, err := f.Env.Runtime.CreateWorkInTx(ctx, tx, kernel.NewWork{Scope: Scope, Binding: binding, Grants: grants})
		w = created.Work
		return err
	})
	return w, err
}

// Claim claims the ready Work w through the driver.
func (f *Fixture) Claim(w storage.Work) (*Attempt, error) { return f.driver.Claim(f, w) }

// Start creates a ready Work of Binding through the runtime and claims it
// for the current owner (epoch 1) with its token.
func (f *Fixture) Start(grants ...string) (*Attempt, error) {
	w, err := f.Create(Binding, grants...)
	if err != nil {
		return nil, err
	}
	return f.Claim(w)
}

// Recover takes the attempt over after its lease expired: the epoch
// advances and a fresh token is issued. The returned Attempt holds the new
// token.
func (f *Fixture) Recover(a *Attempt) (*Attempt, error) { return f.driver.Recover(f, a) }

// Finish ends the attempt's segment and has the scheduler apply res (see
// Scheduled.Finish).
func (f *Fixture) Finish(a *Attempt, res executor.Result) (*Attempt, error) {
	s, ok := f.driver.(Scheduled)
	if !ok {
		return nil, ErrNotScheduled
	}
	return s.Finish(f, a, res)
}

// Resume resumes the woken Work of a parked attempt (see
// Scheduled.Resume).
func (f *Fixture) Resume(a *Attempt) (*Attempt, error) {
	s, ok := f.driver.(Scheduled)
	if !ok {
		return nil, ErrNotScheduled
	}
	return s.Resume(f, a)
}

// Adopt stops the daemon holding the attempt and starts another one, with
// another owner (on the reopened file in reopen mode), which adopts the
// attempt at once. From then on f.TB is the new daemon's toolbelt.
func (f *Fixture) Adopt(a *Attempt) (*Attempt, error) {
	s, ok := f.driver.(Scheduled)
	if !ok {
		return nil, ErrNotScheduled
	}
	f.owners++
	f.Env.Owner = fmt.Sprintf("%s-%d", Owner, f.owners)
	if err := f.restart(); err != nil {
		return nil, err
	}
	return s.Adopt(f, a)
}

// Call calls op with input (a JSON object) as the attempt.
func (f *Fixture) Call(token, op, input, requestID string) (extension.CallResult, error) {
	return f.TB.Call(context.Background(), token, extension.CallRequest{Operation: op, Input: json.RawMessage(input), RequestID: requestID})
}

// Events lists the events of a type in the case's scope.
func (f *Fixture) Events(typ string) ([]storage.Event, error) {
	return f.Env.Store.ListEvents(context.Background(), &storage.ListEventsParams{Scope: Scope, Type: typ})
}

// Case is one conformance case: it returns nil when the implementation
// keeps the rule.
type Case struct {
	Name string
	Run  func(f *Fixture) error
}

// CasesFor lists the cases that apply to h: the shared cases, and the
// scheduled cases when h's attempts run through a scheduler.
func CasesFor(h Harness) []Case {
	cs := Cases()
	if h.Scheduled() {
		cs = append(cs, ScheduledCases()...)
	}
	return cs
}

// Exercise runs every case that applies to h on a persistent SQLite file,
// and again with the file closed and reopened at each case's checkpoint.
func Exercise(t *testing.T, h Harness) {
	for _, reopen := range []bool{false, true} {
		mode := "persistent"
		if reopen {
			mode = "reopened"
		}
		t.Run(mode, func(t *testing.T) {
			for _, c := range CasesFor(h) {
				t.Run(c.Name, func(t *testing.T) {
					if err := RunCase(t.TempDir(), h, c, reopen); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}

// RunCase runs one case on a fresh fixture in dir.
func RunCase(dir string, h Harness, c Case, reopen bool) (err error) {
	f, err := NewFixture(dir, h, reopen)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return c.Run(f)
}
