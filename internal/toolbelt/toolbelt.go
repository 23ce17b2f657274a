package toolbelt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Retention of the toolbelt's records (SweepToolbelt).
const (
	// TokenRetention: a token record is deleted this long after it was
	// revoked or expired. A deleted token is unknown, which every check
	// refuses just as it refused the revoked one.
	TokenRetention = 24 * time.Hour
	// ReplayRetention: a request record is deleted this long after it was
	// written, once its execution finished (only that execution's tokens
	// could replay it, and those are revoked when it finishes).
	ReplayRetention = 24 * time.Hour
	// CallRetention: call records (toolbelt.called/rejected) are kept this
	// long for the operator.
	CallRetention = 30 * 24 * time.Hour
	// EgressRetention: the egress proxy's connection records are kept this
	// long after the connection ended, for the operator.
	EgressRetention = 30 * 24 * time.Hour
)

// Refusal records (toolbelt.rejected) are rate-limited per source, so that
// refused calls, forged tokens included, never grow the store without
// bound: a source is the execution of the token when it was found, else
// the execution whose socket the call came in on, else the in-process
// caller. Each source gets RefusalBurst records per RefusalWindow; the
// first refusal beyond that in a window is recorded with result
// ResultSuppressed, and the rest of the window's refusals are counted, not
// recorded (nor logged one by one): the daemon's log says how many when
// the source is next refused after its window (see docs/toolbelt.md).
const (
	RefusalBurst  = 20
	RefusalWindow = time.Minute
	// ResultSuppressed marks the record after which a source's refusals
	// of the current window are counted only.
	ResultSuppressed = "suppressed"
)

// DefaultGateTimeout is how long a gate may take to answer when
// Options.GateTimeout is zero.
const DefaultGateTimeout = 10 * time.Second

// MaxRequestID bounds a request ID: 1 to 200 printable ASCII characters.
const MaxRequestID = 200

// BindingAuthority is what a binding of a configuration generation grants:
// its own operations and its named grants' operations (toolsets resolved).
type BindingAuthority struct {
	Operations []string
	Grants     map[string][]string
	// Playbook lists the operations the binding's playbook declares it
	// uses in that generation (none without a playbook): a refusal of one
	// of them is recorded as config_drift.
	Playbook []string
}

// Options configure a Toolbelt. The daemon adapts its configuration
// snapshots into the functions; the toolbelt never reads configuration
// itself.
type Options struct {
	Runtime *kernel.Runtime
	Store   storage.Store
	// Host holds the extensions' registrations the toolbelt serves
	// (required; the daemon registers every extension on it once).
	Host *Host
	// Entropy is the source of token bytes (required).
	Entropy clock.Entropy
	// Owner is this daemon instance's owner id: the lease guard requires
	// the execution to be held by it (required).
	Owner string
	// Bindings returns what a binding of the pinned generation grants
	// (false when the scope has no such binding). Required.
	Bindings func(generation int64, scope, binding string) (BindingAuthority, bool)
	// Scopes answers what a generation says of a scope: create_work
	// applies the kernel's rules of a new Work's binding and grants
	// (kernel.WorkBinding) to the attempt's pinned generation through it.
	// Required.
	Scopes kernel.Scopes
	// Authorize is the current ceiling of a scope: whether op may be
	// called there now (false for a disabled or removed scope). It is
	// asked on every call, outside storage, so an apply that narrows a
	// scope refuses the very next call. Required.
	Authorize func(scope, op string) bool
	// AuthorizeAt is the ceiling of a scope as of a committed generation
	// (0 when none is committed). It is asked inside the call's own
	// transaction with the latest generation that transaction's snapshot
	// holds, so that once a narrowing generation commits no call it
	// narrowed away commits after it: Authorize is the fast refusal,
	// AuthorizeAt the atomic one. Required.
	AuthorizeAt func(ctx context.Context, generation int64, scope, op string) (bool, error)
	// AuthorizeRead is the scope's current read ceiling (read_context).
	// Required.
	AuthorizeRead func(scope, read string) bool
	// EmitAllowed, when set, further limits the event types an
	// execution of a binding may emit itself (emit, create_work's input;
	// not a translated emission): the daemon answers it from the active
	// configuration's authorization.emit. A type it refuses is the bare
	// 403 forbidden (see the emit rule in docs/toolbelt.md).
	EmitAllowed func(scope, binding, eventType string) bool
	// Lifetime, when positive, bounds a token's life below the attempt
	// deadline.
	Lifetime time.Duration
	// Guidance is the overall agent guidance (Markdown) served with the
	// operations; empty takes DefaultGuidance.
	Guidance string
	// GateTimeout bounds each gate's answer (DefaultGateTimeout when
	// zero): a gate that has not answered by then refuses the call with
	// gate_failed. The gate's context carries the deadline.
	GateTimeout time.Duration
	// OnCall, when set, is told every request's operation (OtherOperation
	// for a name this toolbelt does not serve, so a caller cannot grow the
	// set) and result (ResultOK or the refusal's result): the daemon's
	// metrics.
	OnCall func(operation, result string)
	// Logger receives the precise reason of every refusal (never a token,
	// an input value, or the text of an extension's error that is not an
	// *extension.OperationError: only its Go type). Required.
	Logger *slog.Logger
}

// Toolbelt is the host's toolbelt authority: it issues execution tokens
// (only their digests are stored), runs every call through the check chain,
// serves the builtins, replays requests, and serves the operations and
// gates registered on its Host. It implements extension.Toolbelt and
// extension.Registrar (through its Host). It is safe for concurrent use.
type Toolbelt struct {
	rt      *kernel.Runtime
	store   storage.Store
	clock   clock.Clock
	ids     *ids.Generator
	entropy io.Reader
	opts    Options
	log     *slog.Logger

	entropyMu sync.Mutex

	host *Host

	refusalMu sync.Mutex
	refusals  map[string]*refusalWindow // by source (see RefusalBurst)

	// tokens caches the live tokens calls authenticate with.
	tokens tokenCache

	flightMu sync.Mutex
	flight   map[string]chan struct{} // running handler requests
	// flightWait, set only by tests before any call, is called when a
	// call starts waiting for a running call with the same request ID.
	flightWait func()
}

var (
	_ extension.Toolbelt  = (*Toolbelt)(nil)
	_ extension.Registrar = (*Toolbelt)(nil)
)

// New returns a Toolbelt serving what is registered on opts.Host.
func New(opts Options) (*Toolbelt, error) {
	switch {
	case opts.Runtime == nil || opts.Store == nil || opts.Entropy == nil:
		return nil, errors.New("toolbelt: a toolbelt needs a runtime, a store and an entropy source")
	case opts.Host == nil:
		return nil, errors.New("toolbelt: a toolbelt needs the extension Host")
	case opts.Owner == "":
		return nil, errors.New("toolbelt: a toolbelt needs the daemon's owner id for its lease guard")
	case opts.Bindings == nil || opts.Scopes == nil || opts.Authorize == nil || opts.AuthorizeAt == nil || opts.AuthorizeRead == nil:
		return nil, errors.New("toolbelt: a toolbelt needs Bindings, Scopes, Authorize, AuthorizeAt and AuthorizeRead")
	case opts.Logger == nil:
		return nil, errors.New("toolbelt: a toolbelt needs a Logger")
	}
	log := opts.Logger
	tb := &Toolbelt{
		rt: opts.Runtime, store: opts.Store, clock: opts.Runtime.Clock(), ids: opts.Runtime.IDs(), entropy: opts.Entropy,
		opts: opts, log: log, host: opts.Host, flight: map[string]chan struct{}{}, refusals: map[string]*refusalWindow{},
	}
	return tb, nil
}

// ---- registrar ----

// Register registers an extension on the toolbelt's Host (see
// Host.Register): its operations and gate, its actions and, when the host
// has a Catalog, configuration's view of it. A refused registration
// registers nothing.
func (tb *Toolbelt) Register(reg extension.Registration) error { return tb.host.Register(reg) }

// servers counts what serves op: its Handler, Emit and Wait.
func servers(op extension.Operation) int {
	n := 0
	for _, set := range []bool{op.Handler != nil, op.Emit != nil, op.Wait != nil} {
		if set {
			n++
		}
	}
	return n
}

func checkOperation(op extension.Operation) error {
	switch {
	case op.Summary == "":
		return errors.New("it has no summary; give one sentence saying what it does")
	case servers(op) != 1:
		return errors.New("give it exactly one of a Handler, an Emit translator and a Wait translator")
	case op.Handler == nil && op.IsSensitive():
		return errors.New("a sensitive operation (Sensitive, or serving git.credential) needs a Handler: a translated emission's input becomes a stored Event")
	}
	if err := checkInputSchema(op.InputSchema); err != nil {
		return err
	}
	for _, c := range op.Capabilities {
		if err := extension.OperationName(c); err != nil {
			return fmt.Errorf("capability %q is not a dotted lower-case name", c)
		}
	}
	return nil
}

// checkInputSchema checks an operation's or an action's input schema: empty,
// or a JSON object whose type, when given, is "object".
func checkInputSchema(raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return errors.New("its input schema is not a JSON object")
	}
	if t, ok := schema["type"]; ok && t != "object" {
		return errors.New(`its input schema's type must be "object"`)
	}
	return nil
}

// Declared reports whether op is a builtin or a registered operation.
func (tb *Toolbelt) Declared(op string) bool {
	return extension.IsBuiltin(op) || tb.host.declared(op)
}

// declaredFor reports whether op is declared for an attempt of scope
// pinned to generation: a builtin, or an operation whose registration both
// that generation and the active one enable for scope (Host.Follow).
func (tb *Toolbelt) declaredFor(generation int64, scope, op string) bool {
	return extension.IsBuiltin(op) || tb.host.declaredFor(generation, scope, op)
}

// Operations lists every declared operation (builtins and registered), in
// name order: the registry the daemon narrows binding grants to.
func (tb *Toolbelt) Operations() []string {
	out := append(slices.Clone(extension.Builtins), tb.host.operationNames()...)
	sort.Strings(out)
	return out
}

func (tb *Toolbelt) operation(name string) (registered, bool) { return tb.host.operation(name) }

// registeredFamily reports whether an event type's family (first segment)
// is a registration's namespace.
func (tb *Toolbelt) registeredFamily(family string) bool { return tb.host.registeredFamily(family) }

// gates returns the registrations with a gate the active generation
// enables for scope, in name order.
func (tb *Toolbelt) gates(scope string) []extension.Registration { return tb.host.gates(scope) }

// ---- tokens ----

// IssueRequest asks for a fresh token for one epoch of an execution. Scope,
// Work, Binding and Generation default to the execution's own and must
// match it when given; Grants default to the binding grants the Work took;
// Deadline defaults to the attempt's deadline and may only be earlier.
type IssueRequest struct {
	Execution  string
	Epoch      int64
	Scope      string
	Work       string
	Binding    string
	Generation int64
	Grants     []string
	Deadline   time.Time
}

// IssuedToken is a freshly issued token. Token is the plaintext, returned
// this once and never stored.
type IssuedToken struct {
	Token      string
	ID         string
	ExpiresAt  time.Time
	Operations []string
}

// IssueToken issues a token for the execution's epoch. Its allowlist is the
// pinned binding's operations plus those of the binding grants the Work
// took, narrowed to the operations declared on this toolbelt and
// intersected with the current ceiling. In the same transaction it revokes
// every lower-epoch token of the execution. The token expires at the
// attempt deadline, or earlier with Options.Lifetime.
func (tb *Toolbelt) IssueToken(ctx context.Context, req IssueRequest) (IssuedToken, error) {
	var out IssuedToken
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		out, err = tb.IssueTokenInTx(ctx, tx, req)
		return err
	})
	// The lower epochs' tokens are revoked now (and were dropped from
	// the cache in the transaction, see IssueTokenInTx).
	tb.tokens.dropExecution(req.Execution)
	if err != nil {
		return IssuedToken{}, err
	}
	return out, nil
}

// IssueTokenInTx is IssueToken inside the caller's write transaction: the
// token exists once tx commits, and not at all if it rolls back.
func (tb *Toolbelt) IssueTokenInTx(ctx context.Context, tx storage.Tx, req IssueRequest) (IssuedToken, error) {
	tb.entropyMu.Lock()
	token, err := bearer.New(tb.entropy)
	tb.entropyMu.Unlock()
	if err != nil {
		return IssuedToken{}, fmt.Errorf("toolbelt: draw token bytes: %w", err)
	}
	digest := bearer.DigestOf(token)
	now := tb.clock.Now()
	out := IssuedToken{Token: token, ID: tb.ids.New(ids.Token)}
	err = func() error {
		exe, err := tx.GetExecution(ctx, req.Execution)
		if errors.Is(err, storage.ErrNotFound) {
			return kernel.Refuse(extension.ErrNotFound, kernel.ErrExecutionNotFound.Code, "execution %s does not exist", req.Execution)
		}
		if err != nil {
			return err
		}
		if exe.Epoch != req.Epoch || !exe.Live() {
			return kernel.Refuse(extension.ErrConflict, kernel.ErrStaleEpoch.Code, "execution %s is not live at epoch %d; issue tokens only for its current epoch", exe.ID, req.Epoch)
		}
		if (req.Scope != "" && req.Scope != exe.Scope) || (req.Work != "" && req.Work != exe.Work) ||
			(req.Binding != "" && req.Binding != exe.Binding) || (req.Generation != 0 && req.Generation != exe.Generation) {
			return kernel.Refuse(extension.ErrInvalid, kernel.ErrInvalidWork.Code, "the token request does not match execution %s's scope, Work, binding or generation", exe.ID)
		}
		grants := req.Grants
		if grants == nil {
			w, err := tx.GetWork(ctx, exe.Work)
			if err != nil {
				return err
			}
			grants = w.Grants
		}
		// The attempt's deadline bounds the token whatever was asked for:
		// a token never outlives active authority.
		deadline := req.Deadline
		if deadline.IsZero() || (!exe.Deadline.IsZero() && exe.Deadline.Before(deadline)) {
			deadline = exe.Deadline
		}
		expires := deadline
		if tb.opts.Lifetime > 0 && (expires.IsZero() || now.Add(tb.opts.Lifetime).Before(expires)) {
			expires = now.Add(tb.opts.Lifetime)
		}
		if expires.IsZero() {
			return errors.New("toolbelt: the attempt has no deadline and the toolbelt no Lifetime; a token must expire")
		}
		out.ExpiresAt = expires
		out.Operations = tb.allowlist(exe.Generation, exe.Scope, exe.Binding, grants)
		if _, err := tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: exe.ID, BelowEpoch: exe.Epoch, At: now}); err != nil {
			return err
		}
		// Were it kept, a lower epoch's cached token would still be
		// refused by the lease guard; it is dropped all the same.
		tb.tokens.dropExecution(exe.ID)
		return tx.InsertToken(ctx, &storage.Token{
			ID: out.ID, Digest: digest[:], Execution: exe.ID, Scope: exe.Scope, Work: exe.Work, Binding: exe.Binding,
			Generation: exe.Generation, Epoch: exe.Epoch, Operations: out.Operations, IssuedAt: now, ExpiresAt: expires,
		})
	}()
	if err != nil {
		return IssuedToken{}, err
	}
	return out, nil
}

// allowlist is the binding's operations plus its grants', narrowed to the
// operations declared for the generation and scope and to the current
// ceiling, sorted.
func (tb *Toolbelt) allowlist(generation int64, scope, binding string, grants []string) []string {
	ba, ok := tb.opts.Bindings(generation, scope, binding)
	if !ok {
		return []string{}
	}
	want := slices.Clone(ba.Operations)
	for _, g := range grants {
		want = append(want, ba.Grants[g]...)
	}
	sort.Strings(want)
	out := []string{}
	for _, op := range slices.Compact(want) {
		if tb.declaredFor(generation, scope, op) && tb.opts.Authorize(scope, op) {
			out = append(out, op)
		}
	}
	sort.Strings(out)
	return out
}

// Revoke revokes one token by its id (tok_…). Revoking a revoked token
// succeeds; an unknown id is ErrNotFound. The transaction's last step
// runs the recorder ctx carries (kernel.RecordResult) with the id, so that
// an operator's revoke records its Idempotency-Key response with it.
func (tb *Toolbelt) Revoke(ctx context.Context, tokenID string) error {
	var execution string
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		t, err := tx.GetToken(ctx, tokenID)
		if err != nil {
			return err
		}
		execution = t.Execution
		if _, err = tx.RevokeTokens(ctx, &storage.RevokeTokensParams{ID: tokenID, At: tb.clock.Now()}); err != nil {
			return err
		}
		return kernel.RecordResult(ctx, tx, tokenID)
	})
	if execution != "" {
		tb.tokens.dropExecution(execution)
	}
	return err
}

// RevokeExecution revokes every token of an execution (the daemon calls it
// when the execution finishes) and returns how many were live.
func (tb *Toolbelt) RevokeExecution(ctx context.Context, executionID string) (int, error) {
	var n int
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		n, err = tx.RevokeTokens(ctx, &storage.RevokeTokensParams{Execution: executionID, At: tb.clock.Now()})
		return err
	})
	tb.tokens.dropExecution(executionID)
	return n, err
}

// SweepToolbelt is the retention pass: it deletes token records
// TokenRetention after they were revoked or expired, request records
// ReplayRetention after they were written once their execution finished,
// call records older than CallRetention, and egress connection records
// EgressRetention after their connection ended.
func (tb *Toolbelt) SweepToolbelt(ctx context.Context) (storage.SweepToolbeltResult, error) {
	now := tb.clock.Now()
	var res storage.SweepToolbeltResult
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		res, err = tx.SweepToolbelt(ctx, &storage.SweepToolbeltParams{
			TokensBefore: now.Add(-TokenRetention), ReplaysBefore: now.Add(-ReplayRetention), CallsBefore: now.Add(-CallRetention),
			EgressBefore: now.Add(-EgressRetention),
		})
		return err
	})
	return res, err
}

// TokenByDigest returns the token stored under a digest (revoked and
// expired ones included), for the management server's credential
// classification and revocation by id.
func (tb *Toolbelt) TokenByDigest(ctx context.Context, digest bearer.Digest) (storage.Token, error) {
	return tb.store.GetTokenByDigest(ctx, digest[:])
}

// IsExecutionToken reports whether token is a live (known, not revoked, not
// expired) execution token.
func (tb *Toolbelt) IsExecutionToken(ctx context.Context, token string) bool {
	if !bearer.WellFormed(token) {
		return false
	}
	d := bearer.DigestOf(token)
	t, err := tb.store.GetTokenByDigest(ctx, d[:])
	return err == nil && !t.Revoked() && tb.clock.Now().Before(t.ExpiresAt)
}

// authenticate is the first link of the chain: digest lookup, revocation
// and exclusive expiry (a token is expired at its ExpiresAt).
func (tb *Toolbelt) authenticate(ctx context.Context, token string) (storage.Token, error) {
	if !bearer.WellFormed(token) {
		return storage.Token{}, forbid("the bearer is not an execution token's shape")
	}
	d := bearer.DigestOf(token)
	t, err := tb.store.GetTokenByDigest(ctx, d[:])
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return storage.Token{}, forbid("unknown token (never issued, or swept after revocation or expiry)")
	case err != nil:
		return storage.Token{}, err
	case t.Revoked():
		return t, forbid("token %s was revoked", t.ID)
	case !tb.clock.Now().Before(t.ExpiresAt):
		return t, forbid("token %s expired", t.ID)
	}
	return t, nil
}

// ErrToolbeltForbidden is the toolbelt's bare refusal. Its message is the
// precise reason, for the daemon's log; servers answer it with the generic
// 403 forbidden and never show the message.
var ErrToolbeltForbidden = &kernel.Error{Code: "forbidden", Kind: extension.ErrForbidden}

func forbid(format string, args ...any) error {
	return kernel.Refuse(extension.ErrForbidden, ErrToolbeltForbidden.Code, format, args...)
}

// checkAssertions is the second link: narrowing assertions.
func checkAssertions(t storage.Token, a extension.Assertions) error {
	switch {
	case a.ScopeID != "" && a.ScopeID != t.Scope:
		return forbid("the request asserts scope %s; token %s is pinned to scope %s", a.ScopeID, t.ID, t.Scope)
	case a.WorkID != "" && a.WorkID != t.Work:
		return forbid("the request asserts Work %s; token %s is pinned to Work %s", a.WorkID, t.ID, t.Work)
	case a.ExecutionID != "" && a.ExecutionID != t.Execution:
		return forbid("the request asserts execution %s; token %s belongs to execution %s", a.ExecutionID, t.ID, t.Execution)
	case a.SocketExecution != "" && a.SocketExecution != t.Execution:
		return forbid("the request came in on execution %s's socket; token %s belongs to execution %s", a.SocketExecution, t.ID, t.Execution)
	}
	return nil
}

// guard is the lease-guard link, inside the call's transaction (or a
// read): the execution is running at the token's epoch, held by this
// daemon, its lease valid, its Work running in the token's scope, and the
// segment has no pending declaration. It reads all of it, and the latest
// generation the ceiling link needs, in one statement
// (kernel.Runtime.LeaseGuardCall).
func (tb *Toolbelt) guard(ctx context.Context, rd storage.Reader, t storage.Token) (storage.CallGuard, error) {
	// The lease guard read the execution and its Work in rd and proved
	// them current; they are not read again.
	g, err := tb.rt.LeaseGuardCall(ctx, rd, t.Execution, t.Epoch, tb.opts.Owner)
	if err != nil {
		return g, err
	}
	if g.Execution.Work != t.Work || g.Work.Scope != t.Scope || g.Execution.Scope != t.Scope {
		return g, forbid("execution %s no longer runs Work %s in scope %s", g.Execution.ID, t.Work, t.Scope)
	}
	return g, nil
}

// ceilingInTx is the ceiling link inside the call's transaction: the
// scope's ceiling as of gen, the latest generation committed in the
// transaction's snapshot (the guard read it there, with the execution),
// and, for an extension operation, that generation enabling its
// registration for the scope (else the operation is undeclared). Writers
// are serialised, so a call whose transaction starts after a narrowing or
// disabling generation committed sees it and is refused, and one that
// commits before it was accepted before the change.
func (tb *Toolbelt) ceilingInTx(ctx context.Context, gen int64, t storage.Token, op string) error {
	ok, err := tb.opts.AuthorizeAt(ctx, gen, t.Scope, op)
	if err != nil {
		return err
	}
	if !ok {
		return notGranted{forbid("the ceiling of scope %s as of generation %d does not allow %s", t.Scope, gen, op)}
	}
	if !extension.IsBuiltin(op) {
		r, ok := tb.host.operation(op)
		if !ok || !tb.host.enablement(gen, r.reg).In(t.Scope) {
			return notGranted{forbid("operation %s is not declared for scope %s as of generation %d", op, t.Scope, gen)}
		}
	}
	return nil
}

var _ TxTokenIssuer = (*Toolbelt)(nil)

// Issue implements TokenIssuer for the scheduler: it issues the token of
// the request's epoch and returns its plaintext (see IssueToken).
func (tb *Toolbelt) Issue(ctx context.Context, req TokenRequest) (string, error) {
	t, err := tb.IssueToken(ctx, IssueRequest{
		Execution: req.ExecutionID, Epoch: req.Epoch, Scope: req.ScopeID, Work: req.WorkID, Binding: req.BindingID,
		Generation: req.Generation, Grants: req.Grants, Deadline: req.ExpiresAt,
	})
	return t.Token, err
}

// IssueInTx implements TxTokenIssuer: Issue inside the caller's write
// transaction (see IssueTokenInTx).
func (tb *Toolbelt) IssueInTx(ctx context.Context, tx storage.Tx, req TokenRequest) (string, error) {
	t, err := tb.IssueTokenInTx(ctx, tx, IssueRequest{
		Execution: req.ExecutionID, Epoch: req.Epoch, Scope: req.ScopeID, Work: req.WorkID, Binding: req.BindingID,
		Generation: req.Generation, Grants: req.Grants, Deadline: req.ExpiresAt,
	})
	return t.Token, err
}
