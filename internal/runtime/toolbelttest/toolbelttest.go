// Package toolbelttest is the toolbelt conformance suite: cases written
// once (Cases, Exercise) that every toolbelt implementation must pass, run
// on a persistent SQLite file and again across a reopen of it, and the
// deliberately broken implementations (negative controls) that each case
// must fail, so that no case passes vacuously.
//
// Cases set up their executions through the kernel's real paths (Work
// created by the runtime, claimed and recovered through storage's fenced
// updates); nothing of storage is faked. It must never be imported by
// production code.
package toolbelttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/runtime"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// T0 is the suite's start time.
var T0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// The configuration every case runs under.
const (
	Scope   = "s1"
	Binding = "b1"
	Owner   = "daemon-a"
	// Grant is a binding grant of Binding whose operations the Work may
	// take.
	Grant = "extra"
)

// Toolbelt is what the suite drives: the extension contracts plus the
// token issuer and revocation by id.
type Toolbelt interface {
	extension.Toolbelt
	extension.Registrar
	IssueToken(ctx context.Context, req runtime.IssueRequest) (runtime.IssuedToken, error)
	Revoke(ctx context.Context, tokenID string) error
}

// Env is what a harness builds a toolbelt on. It is rebuilt after every
// reopen of the database file.
type Env struct {
	Path    string
	Store   *sqlite.Store
	Runtime *runtime.Runtime
	Clock   *clock.Fake
	Ceiling *Ceiling
	Entropy *rand.ChaCha8
}

// Options returns the production options of a toolbelt on env.
func (e *Env) Options() runtime.ToolbeltOptions {
	return runtime.ToolbeltOptions{
		Runtime: e.Runtime, Store: e.Store, Entropy: e.Entropy, Owner: Owner,
		Bindings: func(gen int64, scope, binding string) (runtime.BindingAuthority, bool) {
			if scope != Scope || (binding != Binding && binding != "b2") {
				return runtime.BindingAuthority{}, false
			}
			return runtime.BindingAuthority{
				Operations: []string{"emit", "create_work", "wait", "declare_outcome", "read_context", "acme.count", "acme.echo", "acme.unregistered"},
				Grants:     map[string][]string{Grant: {"acme.extra"}},
			}, true
		},
		Authorize:     e.Ceiling.Authorize,
		AuthorizeRead: e.Ceiling.AuthorizeRead,
		Causal:        runtime.CausalLimits{MaxDepth: 8, PerMinute: 1000},
	}
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

// Harness builds the implementation under test.
type Harness struct {
	Name string
	New  func(env *Env) (Toolbelt, error)
}

// Real is the production toolbelt.
var Real = Harness{Name: "runtime.Toolbelt", New: func(env *Env) (Toolbelt, error) {
	return runtime.NewToolbelt(env.Options())
}}

// Fixture is one case's world: a database file, the kernel over it and
// the toolbelt under test.
type Fixture struct {
	Env    *Env
	TB     Toolbelt
	h      Harness
	reopen bool
	ids    *ids.Generator
	regs   []extension.Registration
	closed []*sqlite.Store
}

// NewFixture opens a fresh database in dir. With reopen, Checkpoint closes
// and reopens the file and rebuilds everything on it.
func NewFixture(dir string, h Harness, reopen bool) (*Fixture, error) {
	c := clock.NewFake(T0)
	f := &Fixture{h: h, reopen: reopen, ids: ids.NewGenerator(c, rand.NewChaCha8([32]byte{7}))}
	f.Env = &Env{Path: filepath.Join(dir, "state.db"), Clock: c, Ceiling: &Ceiling{}, Entropy: rand.NewChaCha8([32]byte{9})}
	return f, f.open()
}

func (f *Fixture) open() error {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: f.Env.Path, Clock: f.Env.Clock})
	if err != nil {
		return err
	}
	rt, err := runtime.New(runtime.Options{Clock: f.Env.Clock, IDs: f.ids})
	if err != nil {
		return err
	}
	f.Env.Store, f.Env.Runtime = s, rt
	if f.TB, err = f.h.New(f.Env); err != nil {
		return err
	}
	for _, r := range f.regs {
		if err := f.TB.Register(r); err != nil {
			return fmt.Errorf("re-register %s after reopen: %w", r.Name, err)
		}
	}
	return nil
}

// Close closes the database.
func (f *Fixture) Close() error { return f.Env.Store.Close() }

// Checkpoint is where a case's state must have reached the file: in
// reopen mode the file is closed and opened again, and the toolbelt
// rebuilt (its registrations made again, as a restarted daemon does).
func (f *Fixture) Checkpoint() error {
	if !f.reopen {
		return nil
	}
	if err := f.Env.Store.Close(); err != nil {
		return err
	}
	return f.open()
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
}

// Start creates a ready Work through the runtime, claims it for Owner
// through storage's fenced updates (epoch 1) and issues its token.
func (f *Fixture) Start(grants ...string) (*Attempt, error) {
	ctx := context.Background()
	now := f.Env.Clock.Now()
	var a Attempt
	err := f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		created, err := f.Env.Runtime.CreateWorkInTx(ctx, tx, runtime.NewWork{Scope: Scope, Binding: Binding, Grants: grants})
		if err != nil {
			return err
		}
		running := storage.WorkRunning
		if a.Work, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{
			ID: created.Work.ID, FromStates: []storage.WorkState{storage.WorkReady}, State: &running, AddAttempts: 1, Now: now,
		}); err != nil {
			return err
		}
		a.Execution, err = tx.InsertExecution(ctx, &storage.InsertExecutionParams{
			ID: f.ids.New(ids.Execution), Work: a.Work.ID, Scope: Scope, Binding: Binding, Executor: "test", Generation: 1,
			Owner: Owner, LeaseExpiresAt: now.Add(10 * time.Minute), Deadline: now.Add(time.Hour), CreatedAt: now,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &a, f.issue(&a)
}

func (f *Fixture) issue(a *Attempt) error {
	tok, err := f.TB.IssueToken(context.Background(), runtime.IssueRequest{Execution: a.Execution.ID, Epoch: a.Execution.Epoch})
	if err != nil {
		return err
	}
	a.Token, a.TokenID = tok.Token, tok.ID
	return nil
}

// Recover takes the attempt over after its lease expired, as a restarted
// daemon does: the epoch advances through storage's fenced update and a
// fresh token is issued. The returned Attempt holds the new token.
func (f *Fixture) Recover(a *Attempt) (*Attempt, error) {
	ctx := context.Background()
	now := f.Env.Clock.Advance(11 * time.Minute)
	next := *a
	err := f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		next.Execution, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{
			ID: a.Execution.ID, FromEpoch: a.Execution.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			ExpiredBy: now, State: storage.ExecutionRunning, Owner: Owner, LeaseExpiresAt: now.Add(10 * time.Minute), Now: now,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &next, f.issue(&next)
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

// Exercise runs every case against h on a persistent SQLite file, and
// again with the file closed and reopened at each case's checkpoint.
func Exercise(t *testing.T, h Harness) {
	for _, reopen := range []bool{false, true} {
		mode := "persistent"
		if reopen {
			mode = "reopened"
		}
		t.Run(mode, func(t *testing.T) {
			for _, c := range Cases() {
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
func RunCase(dir string, h Harness, c Case, reopen bool) error {
	f, err := NewFixture(dir, h, reopen)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.Run(f)
}

// Cases are the shared conformance cases.
func Cases() []Case {
	return []Case{
		{"issue_on_claim_and_recovery_supersession", caseSupersession},
		{"digest_only_storage", caseDigestOnly},
		{"live_ceiling_narrowing", caseCeiling},
		{"revocation_by_id", caseRevocation},
		{"replay_and_conflict", caseReplay},
		{"handler_at_most_once", caseAtMostOnce},
		{"forged_source_and_correlation_refused", caseForgery},
		{"declared_wait_handshake", caseWaitHandshake},
		{"declared_outcome_handshake", caseOutcomeHandshake},
		{"operation_namespace", caseNamespace},
	}
}

func want(err error, sentinel error, what string) error {
	if !errors.Is(err, sentinel) {
		return fmt.Errorf("%s: got %v, want %v", what, err, sentinel)
	}
	return nil
}

// wantForbidden requires the bare forbidden refusal (not authority
// released).
func wantForbidden(err error, what string) error {
	if err == nil || !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) {
		return fmt.Errorf("%s: got %v, want the bare forbidden refusal", what, err)
	}
	return nil
}

func caseSupersession(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return fmt.Errorf("the claimed attempt's token cannot emit: %w", err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	b, err := f.Recover(a)
	if err != nil {
		return err
	}
	if b.Token == a.Token || b.TokenID == a.TokenID {
		return errors.New("recovery did not issue a fresh token")
	}
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.two"}`, "")), "the superseded epoch's token after recovery"); err != nil {
		return err
	}
	if _, err := f.Call(b.Token, "emit", `{"type":"test.two"}`, ""); err != nil {
		return fmt.Errorf("the recovered attempt's token cannot emit: %w", err)
	}
	evs, err := f.Events("test.two")
	if err != nil {
		return err
	}
	if len(evs) != 1 || evs[0].Execution != a.Execution.ID {
		return fmt.Errorf("test.two events = %d, want exactly the recovered attempt's one", len(evs))
	}
	return nil
}

func second[T any](_ T, err error) error { return err }

func caseDigestOnly(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, "r1"); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	files, _ := filepath.Glob(f.Env.Path + "*")
	if len(files) == 0 {
		return errors.New("no database file to scan")
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(a.Token)) {
			return fmt.Errorf("the token's plaintext is in %s", filepath.Base(p))
		}
	}
	return nil
}

func caseCeiling(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	f.Env.Ceiling.Deny(Scope, "emit")
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.two"}`, "")), "emit after the ceiling dropped it"); err != nil {
		return err
	}
	f.Env.Ceiling.Allow(Scope, "emit")
	f.Env.Ceiling.Deny(Scope, "*")
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.two"}`, "")), "emit after the scope was disabled"); err != nil {
		return err
	}
	f.Env.Ceiling.Allow(Scope, "*")
	if _, err := f.Call(a.Token, "emit", `{"type":"test.two"}`, ""); err != nil {
		return fmt.Errorf("emit after the ceiling was widened again: %w", err)
	}
	return nil
}

func caseRevocation(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	if err := f.TB.Revoke(context.Background(), a.TokenID); err != nil {
		return err
	}
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.one"}`, "")), "emit with a revoked token"); err != nil {
		return err
	}
	_, err = f.TB.Guidance(context.Background(), a.Token, extension.Assertions{})
	return wantForbidden(err, "guidance with a revoked token")
}

func caseReplay(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	first, err := f.Call(a.Token, "emit", `{"type":"test.one","data":{"n":1}}`, "r1")
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	again, err := f.Call(a.Token, "emit", `{ "data" : {"n":1}, "type":"test.one" }`, "r1")
	if err != nil {
		return fmt.Errorf("repeat of r1: %w", err)
	}
	if !again.Replayed || !bytes.Equal(again.Result, first.Result) {
		return fmt.Errorf("repeat of r1 = %s (replayed %v), want the first result %s replayed", again.Result, again.Replayed, first.Result)
	}
	if evs, err := f.Events("test.one"); err != nil || len(evs) != 1 {
		return fmt.Errorf("test.one events after a replay = %d (%v), want 1", len(evs), err)
	}
	if err := want(second(f.Call(a.Token, "emit", `{"type":"test.one","data":{"n":2}}`, "r1")), extension.ErrRequestConflict, "r1 with another input"); err != nil {
		return err
	}
	return want(second(f.Call(a.Token, "read_context", `{}`, "r1")), extension.ErrRequestConflict, "r1 with another operation")
}

// counter is an extension whose handler counts its runs per request ID.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counter) registration() extension.Registration {
	return extension.Registration{Name: "acme", Operations: []extension.Operation{
		{Name: "acme.count", Summary: "Count a run.", Handler: func(_ context.Context, auth extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.runs[auth.RequestID]++
			return json.Marshal(map[string]any{"run": c.runs[auth.RequestID], "execution": auth.Execution})
		}},
		{Name: "acme.echo", Summary: "Echo the input.", Capabilities: []string{"test.echo"}, Handler: func(_ context.Context, _ extension.Authority, in json.RawMessage) (json.RawMessage, error) {
			return in, nil
		}},
	}}
}

func caseAtMostOnce(f *Fixture) error {
	c := &counter{runs: map[string]int{}}
	if err := f.Register(c.registration()); err != nil {
		return err
	}
	a, err := f.Start()
	if err != nil {
		return err
	}
	first, err := f.Call(a.Token, "acme.count", `{"x":1}`, "once")
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	again, err := f.Call(a.Token, "acme.count", `{"x":1}`, "once")
	if err != nil {
		return err
	}
	if c.runs["once"] != 1 || !again.Replayed || !bytes.Equal(first.Result, again.Result) {
		return fmt.Errorf("handler ran %d times for one request ID (replayed %v)", c.runs["once"], again.Replayed)
	}
	return want(second(f.Call(a.Token, "acme.count", `{"x":2}`, "once")), extension.ErrRequestConflict, "the request ID with another input")
}

func caseForgery(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	other, err := f.Start()
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	for _, in := range []string{
		`{"type":"test.forged","source":"core.host"}`,
		`{"type":"test.forged","parent":"` + other.Work.CreatedEvent + `"}`,
		`{"type":"test.forged","work_id":"` + other.Work.ID + `"}`,
		`{"type":"test.forged","execution":"` + other.Execution.ID + `"}`,
		`{"type":"test.forged","correlation_key":"` + other.Work.ID + `"}`,
		`{"type":"core.work.finished"}`,
	} {
		if err := want(second(f.Call(a.Token, "emit", in, "")), extension.ErrInvalid, "emit "+in); err != nil {
			return err
		}
	}
	if evs, err := f.Events(""); err != nil {
		return err
	} else {
		for _, ev := range evs {
			if ev.Type == "test.forged" || (ev.Type == "core.work.finished") {
				return fmt.Errorf("a forged emission was accepted: %s from %s", ev.Type, ev.Source)
			}
		}
	}
	res, err := f.Call(a.Token, "emit", `{"type":"test.owned","correlation_key":"`+a.Work.ID+`"}`, "")
	if err != nil {
		return fmt.Errorf("emit with the Work's own key: %w", err)
	}
	var out struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(res.Result, &out); err != nil {
		return err
	}
	ev, err := f.Env.Store.GetEvent(context.Background(), out.EventID)
	if err != nil {
		return err
	}
	if ev.Source != runtime.SourceExecution || ev.Work != a.Work.ID || ev.Execution != a.Execution.ID || ev.Parent == "" {
		return fmt.Errorf("the host did not assign the emission's identity: %+v", ev)
	}
	return nil
}

func handshake(f *Fixture, op, input string, kind storage.DeclarationKind) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, op, input, "d1"); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	if err := want(second(f.Call(a.Token, "emit", `{"type":"test.late"}`, "")), extension.ErrAuthorityReleased, "emit after "+op); err != nil {
		return err
	}
	if err := want(second(f.Call(a.Token, op, input, "d1")), extension.ErrAuthorityReleased, op+" repeated after a lost response"); err != nil {
		return err
	}
	d, err := f.Env.Store.GetPendingDeclaration(context.Background(), a.Execution.ID)
	if err != nil {
		return fmt.Errorf("no pending declaration after %s: %w", op, err)
	}
	if d.Kind != kind || d.Epoch != a.Execution.Epoch {
		return fmt.Errorf("declaration = %s at epoch %d, want %s at %d", d.Kind, d.Epoch, kind, a.Execution.Epoch)
	}
	if _, err := runtime.ParseDeclaration(d); err != nil {
		return fmt.Errorf("the declaration does not parse for Complete: %w", err)
	}
	return nil
}

func caseWaitHandshake(f *Fixture) error {
	return handshake(f, "wait", `{"types":["test.reply"],"timeout":"10m"}`, storage.DeclaredWait)
}

func caseOutcomeHandshake(f *Fixture) error {
	return handshake(f, "declare_outcome", `{"outcome":"succeeded","message":"done"}`, storage.DeclaredOutcome)
}

func op(name string) extension.Operation {
	return extension.Operation{Name: name, Summary: "Test.", Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}
}

func caseNamespace(f *Fixture) error {
	if err := want(f.Register(extension.Registration{Name: "squatter", Operations: []extension.Operation{op("squatter.ok"), op("acme.count")}}),
		extension.ErrInvalid, "a registration taking another namespace's operation"); err != nil {
		return err
	}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.count")}}); err != nil {
		return fmt.Errorf("the owner's registration: %w", err)
	}
	if err := f.Register(extension.Registration{Name: "squatter", Operations: []extension.Operation{op("squatter.ok")}}); err != nil {
		return fmt.Errorf("a refused registration registered something: %w", err)
	}
	if err := want(f.Register(extension.Registration{Name: "acme-2", Operations: []extension.Operation{op("acme.echo")}}), extension.ErrInvalid, "a neighbour's namespace"); err != nil {
		return err
	}
	if err := want(f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.echo")}}), extension.ErrConflict, "a repeated registration name"); err != nil {
		return err
	}
	if err := want(f.Register(extension.Registration{Name: "emit", Operations: nil}), extension.ErrConflict, "a builtin's name"); err != nil {
		return err
	}
	if err := want(f.Register(extension.Registration{Name: "Bad.Name"}), extension.ErrInvalid, "a malformed registration name"); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	a, err := f.Start()
	if err != nil {
		return err
	}
	// The squatter's attempt never reached acme.echo: it stays undeclared.
	return wantForbidden(second(f.Call(a.Token, "acme.echo", `{}`, "")), "an operation nobody registered")
}
