package toolbelttest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// The negative controls: deliberately broken toolbelts, each breaking one
// rule. NegativeControls names, for every case, the control that case
// must fail. Never use them outside tests.
//
// A control that changes how tokens are issued overrides both IssueToken
// (which the default, direct driver calls) and Issue (which the scheduler calls),
// the latter through the former exactly as toolbelt.Toolbelt.Issue does.

// NegativeControls maps each case name (shared and scheduled) to a
// harness that breaks its rule; each keeps base's driver.
func NegativeControls(base Harness) map[string]Harness {
	return map[string]Harness{
		"issue_on_claim_and_recovery_supersession": wrap(base, "launders superseded tokens", func(tb Toolbelt, _ *Env) Toolbelt {
			return &laundering{Toolbelt: tb, latest: map[string]string{}, exeOf: map[string]string{}}
		}),
		"digest_only_storage":                   wrap(base, "stores plaintext", func(tb Toolbelt, env *Env) Toolbelt { return &plaintext{Toolbelt: tb, store: env.Store} }),
		"live_ceiling_narrowing":                ceilingSnapshot(base),
		"revocation_by_id":                      wrap(base, "ignores revocation", func(tb Toolbelt, _ *Env) Toolbelt { return ignoresRevocation{tb} }),
		"replay_and_conflict":                   wrap(base, "forgets request IDs", func(tb Toolbelt, _ *Env) Toolbelt { return forgetsRequests{tb} }),
		"handler_at_most_once":                  wrap(base, "forgets request IDs", func(tb Toolbelt, _ *Env) Toolbelt { return forgetsRequests{tb} }),
		"forged_source_and_correlation_refused": wrap(base, "lenient input", func(tb Toolbelt, _ *Env) Toolbelt { return lenient{tb} }),
		"declared_wait_handshake":               wrap(base, "skips declarations", func(tb Toolbelt, _ *Env) Toolbelt { return skipsDeclarations{tb} }),
		"declared_outcome_handshake":            wrap(base, "skips declarations", func(tb Toolbelt, _ *Env) Toolbelt { return skipsDeclarations{tb} }),
		"operation_namespace":                   wrap(base, "accepts squatting", func(tb Toolbelt, _ *Env) Toolbelt { return squatting{tb} }),
		"sensitive_result_never_stored":         wrap(base, "stores sensitive results", func(tb Toolbelt, _ *Env) Toolbelt { return storesSensitive{tb} }),
		"gate_order":                            wrap(base, "asks gates in reverse name order", func(tb Toolbelt, _ *Env) Toolbelt { return reversedGates{tb} }),
		"gate_own_registration_exempt":          wrap(base, "asks a gate about its own operations", func(tb Toolbelt, _ *Env) Toolbelt { return gatesOwn{tb} }),
		"per_generation_registration":           followsNoGeneration(base),

		"adoption_supersession": wrap(base, "leaves lower epochs' tokens live", func(tb Toolbelt, env *Env) Toolbelt {
			return &nonRevoking{Toolbelt: tb, env: env}
		}),
		"resume_issues_fresh_token": wrap(base, "hands out an execution's first token again", func(tb Toolbelt, _ *Env) Toolbelt {
			return &reusing{Toolbelt: tb, first: map[string]toolbelt.IssuedToken{}}
		}),
		"finished_execution_token_refused": wrap(base, "answers for ended executions", func(tb Toolbelt, env *Env) Toolbelt { return answersEnded{tb, env.Store} }),
		"declaration_survives_recovery": wrap(base, "drops declarations at recovery", func(tb Toolbelt, env *Env) Toolbelt {
			return dropsDeclarations{Toolbelt: tb, env: env}
		}),
	}
}

// ScheduledNegativeControls maps shared cases to controls that only their
// scheduled part (the declaration applied by Complete) can catch: each
// case must fail its control here too, under a scheduled driver.
func ScheduledNegativeControls(base Harness) map[string]Harness {
	lossy := wrap(base, "declares less than it was asked", func(tb Toolbelt, _ *Env) Toolbelt { return lossyDeclarations{tb} })
	return map[string]Harness{
		"declared_wait_handshake":    lossy,
		"declared_outcome_handshake": lossy,
	}
}

// issueRequest is toolbelt.Toolbelt.Issue's request to IssueToken.
func issueRequest(req toolbelt.TokenRequest) toolbelt.IssueRequest {
	return toolbelt.IssueRequest{
		Execution: req.ExecutionID, Epoch: req.Epoch, Scope: req.ScopeID, Work: req.WorkID, Binding: req.BindingID,
		Generation: req.Generation, Grants: req.Grants, Deadline: req.ExpiresAt,
	}
}

// issueVia issues through tb's own IssueToken, as toolbelt.Toolbelt.Issue
// does through its own.
func issueVia(ctx context.Context, tb interface {
	IssueToken(context.Context, toolbelt.IssueRequest) (toolbelt.IssuedToken, error)
}, req toolbelt.TokenRequest) (string, error) {
	t, err := tb.IssueToken(ctx, issueRequest(req))
	return t.Token, err
}

func wrap(base Harness, name string, w func(Toolbelt, *Env) Toolbelt) Harness {
	return Harness{Name: base.Name + " that " + name, Driver: base.Driver, New: func(env *Env) (Toolbelt, error) {
		tb, err := base.New(env)
		if err != nil {
			return nil, err
		}
		return w(tb, env), nil
	}}
}

// laundering retries a superseded token's refused call with the newest
// token of its execution: a lower epoch acts again.
type laundering struct {
	Toolbelt
	mu     sync.Mutex
	latest map[string]string // execution -> newest token
	exeOf  map[string]string // token -> execution
}

func (l *laundering) IssueToken(ctx context.Context, req toolbelt.IssueRequest) (toolbelt.IssuedToken, error) {
	tok, err := l.Toolbelt.IssueToken(ctx, req)
	if err == nil {
		l.mu.Lock()
		l.latest[req.Execution], l.exeOf[tok.Token] = tok.Token, req.Execution
		l.mu.Unlock()
	}
	return tok, err
}

func (l *laundering) Issue(ctx context.Context, req toolbelt.TokenRequest) (string, error) {
	return issueVia(ctx, l, req)
}

func (l *laundering) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	res, err := l.Toolbelt.Call(ctx, token, req)
	if errors.Is(err, extension.ErrForbidden) {
		l.mu.Lock()
		newest := l.latest[l.exeOf[token]]
		l.mu.Unlock()
		if newest != "" && newest != token {
			return l.Toolbelt.Call(ctx, newest, req)
		}
	}
	return res, err
}

// plaintext writes every token it issues into the database.
type plaintext struct {
	Toolbelt
	store storage.Store
}

func (p *plaintext) IssueToken(ctx context.Context, req toolbelt.IssueRequest) (toolbelt.IssuedToken, error) {
	tok, err := p.Toolbelt.IssueToken(ctx, req)
	if err != nil {
		return tok, err
	}
	return tok, p.store.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertToolbeltCall(ctx, &storage.ToolbeltCall{ID: "tbc_" + tok.ID, Kind: storage.ToolbeltCalled, Operation: "issue", Result: tok.Token})
	})
}

func (p *plaintext) Issue(ctx context.Context, req toolbelt.TokenRequest) (string, error) {
	return issueVia(ctx, p, req)
}

// ceilingSnapshot builds the toolbelt with the ceiling read once per scope
// and operation and cached: a narrowing apply is never seen.
func ceilingSnapshot(base Harness) Harness {
	return Harness{Name: base.Name + " that caches the ceiling", Driver: base.Driver, New: func(env *Env) (Toolbelt, error) {
		var mu sync.Mutex
		seen := map[string]bool{}
		live := env.Ceiling
		opts := env.Options()
		opts.Authorize = func(scope, op string) bool {
			mu.Lock()
			defer mu.Unlock()
			k := scope + " " + op
			if v, ok := seen[k]; ok {
				return v
			}
			seen[k] = live.Authorize(scope, op)
			return seen[k]
		}
		opts.AuthorizeAt = func(_ context.Context, _ int64, scope, op string) (bool, error) {
			return opts.Authorize(scope, op), nil
		}
		return toolbelt.New(opts)
	}}
}

type ignoresRevocation struct{ Toolbelt }

func (ignoresRevocation) Revoke(context.Context, string) error { return nil }

type forgetsRequests struct{ Toolbelt }

func (f forgetsRequests) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	req.RequestID = ""
	return f.Toolbelt.Call(ctx, token, req)
}

// lenient drops what it does not know from an emit's input (and the
// correlation key) and renames a core.* type, instead of refusing.
type lenient struct{ Toolbelt }

func (l lenient) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	if req.Operation == "emit" {
		var in map[string]json.RawMessage
		if json.Unmarshal(req.Input, &in) == nil {
			for k := range in {
				if k != "type" && k != "data" {
					delete(in, k)
				}
			}
			var typ string
			_ = json.Unmarshal(in["type"], &typ)
			if strings.HasPrefix(typ, "core.") {
				in["type"] = json.RawMessage(`"` + strings.Replace(typ, "core.", "test.", 1) + `"`)
			}
			req.Input, _ = json.Marshal(in)
		}
	}
	return l.Toolbelt.Call(ctx, token, req)
}

// skipsDeclarations answers wait and declare_outcome without declaring.
type skipsDeclarations struct{ Toolbelt }

func (s skipsDeclarations) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	if req.Operation == "wait" || req.Operation == "declare_outcome" {
		return extension.CallResult{Operation: req.Operation, Result: json.RawMessage(`{"declared":"skipped"}`)}, nil
	}
	return s.Toolbelt.Call(ctx, token, req)
}

// lossyDeclarations declares what wait and declare_outcome ask, less the
// wait's timeout and the outcome's message and data: the declaration lands
// and authority is released, but Complete applies something else.
type lossyDeclarations struct{ Toolbelt }

func (l lossyDeclarations) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	if req.Operation == "wait" || req.Operation == "declare_outcome" {
		var in map[string]json.RawMessage
		if json.Unmarshal(req.Input, &in) == nil {
			delete(in, "timeout")
			delete(in, "message")
			delete(in, "data")
			req.Input, _ = json.Marshal(in)
		}
	}
	return l.Toolbelt.Call(ctx, token, req)
}

// squatting registers each operation under the namespace it names, so a
// registration can take operations meant for another.
type squatting struct{ Toolbelt }

func (s squatting) Register(reg extension.Registration) error {
	groups := map[string][]extension.Operation{}
	for _, op := range reg.Operations {
		ns, _, _ := strings.Cut(op.Name, ".")
		groups[ns] = append(groups[ns], op)
	}
	for ns, ops := range groups {
		if err := s.Toolbelt.Register(extension.Registration{Name: ns, Operations: ops}); err != nil {
			return err
		}
	}
	return nil
}

// storesSensitive registers every operation as not sensitive: it drops
// Sensitive and the git.credential capability that implies it, so their
// results are stored in the request records and replayed from there.
type storesSensitive struct{ Toolbelt }

func (s storesSensitive) Register(reg extension.Registration) error {
	ops := make([]extension.Operation, len(reg.Operations))
	for i, op := range reg.Operations {
		op.Sensitive = false
		op.Capabilities = slices.DeleteFunc(slices.Clone(op.Capabilities), func(c string) bool { return c == extension.CapabilityGitCredential })
		ops[i] = op
	}
	reg.Operations = ops
	return s.Toolbelt.Register(reg)
}

// nonRevoking issues tokens as the real toolbelt does but leaves the
// lower epochs' tokens of the execution live. It draws the token bytes
// from the Env's entropy, which goes on across restarts; tokens are
// issued one at a time (by the case or by the scheduler's round).
type nonRevoking struct {
	Toolbelt
	env *Env
}

func (n *nonRevoking) Issue(ctx context.Context, req toolbelt.TokenRequest) (string, error) {
	return issueVia(ctx, n, req)
}

func (n *nonRevoking) IssueToken(ctx context.Context, req toolbelt.IssueRequest) (toolbelt.IssuedToken, error) {
	tok, _ := bearer.New(n.env.Entropy)
	out := toolbelt.IssuedToken{Token: tok, ID: n.env.Runtime.IDs().New(ids.Token)}
	digest := bearer.DigestOf(out.Token)
	now := n.env.Clock.Now()
	err := n.env.Store.WithTx(ctx, func(tx storage.Tx) error {
		exe, err := tx.GetExecution(ctx, req.Execution)
		if err != nil {
			return err
		}
		if exe.Epoch != req.Epoch || !exe.Live() {
			return errors.New("toolbelttest: not the live epoch")
		}
		ba, _ := n.env.Options().Bindings(exe.Generation, exe.Scope, exe.Binding)
		out.ExpiresAt, out.Operations = exe.Deadline, ba.Operations
		// Broken: no RevokeTokens below the epoch.
		return tx.InsertToken(ctx, &storage.Token{
			ID: out.ID, Digest: digest[:], Execution: exe.ID, Scope: exe.Scope, Work: exe.Work, Binding: exe.Binding,
			Generation: exe.Generation, Epoch: exe.Epoch, Operations: out.Operations, IssuedAt: now, ExpiresAt: out.ExpiresAt,
		})
	})
	return out, err
}

// reusing issues every token for real but hands out the first token it
// issued for an execution again, so a later epoch's executor gets an
// earlier epoch's token.
type reusing struct {
	Toolbelt
	mu    sync.Mutex
	first map[string]toolbelt.IssuedToken // by execution
}

func (r *reusing) Issue(ctx context.Context, req toolbelt.TokenRequest) (string, error) {
	return issueVia(ctx, r, req)
}

func (r *reusing) IssueToken(ctx context.Context, req toolbelt.IssueRequest) (toolbelt.IssuedToken, error) {
	tok, err := r.Toolbelt.IssueToken(ctx, req)
	if err != nil {
		return tok, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if first, ok := r.first[req.Execution]; ok {
		return first, nil
	}
	r.first[req.Execution] = tok
	return tok, nil
}

// answersEnded answers a refused call of an execution that has ended as
// if it had run.
type answersEnded struct {
	Toolbelt
	store storage.Store
}

func (a answersEnded) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	res, err := a.Toolbelt.Call(ctx, token, req)
	if err == nil || !errors.Is(err, extension.ErrForbidden) {
		return res, err
	}
	d := bearer.DigestOf(token)
	t, terr := a.store.GetTokenByDigest(ctx, d[:])
	if terr != nil {
		return res, err
	}
	exe, xerr := a.store.GetExecution(ctx, t.Execution)
	if xerr != nil || exe.Live() {
		return res, err
	}
	return extension.CallResult{Operation: req.Operation, Result: json.RawMessage(`{}`)}, nil
}

// dropsDeclarations discards an execution's pending declaration when it
// issues the token of a recovered epoch, so the recovered segment acts
// again and its Complete applies nothing.
type dropsDeclarations struct {
	Toolbelt
	env *Env
}

func (d dropsDeclarations) Issue(ctx context.Context, req toolbelt.TokenRequest) (string, error) {
	return issueVia(ctx, d, req)
}

func (d dropsDeclarations) IssueToken(ctx context.Context, req toolbelt.IssueRequest) (toolbelt.IssuedToken, error) {
	err := d.env.Store.WithTx(ctx, func(tx storage.Tx) error {
		p, err := tx.GetPendingDeclaration(ctx, req.Execution)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.MarkDeclarationApplied(ctx, &storage.MarkDeclarationAppliedParams{Execution: p.Execution, Epoch: p.Epoch, Disposition: "discarded", At: d.env.Clock.Now()})
	})
	if err != nil {
		return toolbelt.IssuedToken{}, err
	}
	return d.Toolbelt.IssueToken(ctx, req)
}

// reversedGates registers each registration that only gates under a
// mirrored name (a<->z, b<->y, …), so its gate is asked in the reverse of
// registration-name order.
type reversedGates struct{ Toolbelt }

func (r reversedGates) Register(reg extension.Registration) error {
	if reg.Gate != nil && len(reg.Operations) == 0 && len(reg.Actions) == 0 {
		b := []byte(reg.Name)
		for i, c := range b {
			if c >= 'a' && c <= 'z' {
				b[i] = 'a' + 'z' - c
			}
		}
		reg.Name = string(b)
	}
	return r.Toolbelt.Register(reg)
}

// gatesOwn registers a registration's gate apart from its operations,
// under <name>-gate, so it is asked about its own operations.
type gatesOwn struct{ Toolbelt }

func (g gatesOwn) Register(reg extension.Registration) error {
	if reg.Gate == nil || len(reg.Operations) == 0 {
		return g.Toolbelt.Register(reg)
	}
	gate := reg.Gate
	reg.Gate = nil
	if err := g.Toolbelt.Register(reg); err != nil {
		return err
	}
	return g.Toolbelt.Register(extension.Registration{Name: reg.Name + "-gate", Gate: gate})
}

// followsNoGeneration builds the toolbelt on a host that never follows
// the configuration: every registration is enabled in every scope of
// every generation.
func followsNoGeneration(base Harness) Harness {
	return Harness{Name: base.Name + " that follows no generation", Driver: base.Driver, New: func(env *Env) (Toolbelt, error) {
		opts := env.Options()
		opts.Host = toolbelt.NewHost(nil)
		return toolbelt.New(opts)
	}}
}
