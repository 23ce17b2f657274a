package toolbelttest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/runtime"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The negative controls: deliberately broken toolbelts, each breaking one
// rule. NegativeControls names, for every case, the control that case
// must fail. Never use them outside tests.

// NegativeControls maps each case name to a harness that breaks its rule.
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
	}
}

func wrap(base Harness, name string, w func(Toolbelt, *Env) Toolbelt) Harness {
	return Harness{Name: base.Name + " that " + name, New: func(env *Env) (Toolbelt, error) {
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

func (l *laundering) IssueToken(ctx context.Context, req runtime.IssueRequest) (runtime.IssuedToken, error) {
	tok, err := l.Toolbelt.IssueToken(ctx, req)
	if err == nil {
		l.mu.Lock()
		l.latest[req.Execution], l.exeOf[tok.Token] = tok.Token, req.Execution
		l.mu.Unlock()
	}
	return tok, err
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

func (p *plaintext) IssueToken(ctx context.Context, req runtime.IssueRequest) (runtime.IssuedToken, error) {
	tok, err := p.Toolbelt.IssueToken(ctx, req)
	if err != nil {
		return tok, err
	}
	return tok, p.store.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertToolbeltCall(ctx, &storage.ToolbeltCall{ID: "tbc_" + tok.ID, Kind: storage.ToolbeltCalled, Operation: "issue", Result: tok.Token})
	})
}

// ceilingSnapshot builds the toolbelt with the ceiling read once per scope
// and operation and cached: a narrowing apply is never seen.
func ceilingSnapshot(base Harness) Harness {
	return Harness{Name: base.Name + " that caches the ceiling", New: func(env *Env) (Toolbelt, error) {
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
		return runtime.NewToolbelt(opts)
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
