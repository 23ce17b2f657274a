package daemon

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// This file adapts configuration snapshots into the small types the
// runtime, the toolbelt and the scheduler define, so that none of them
// reads configuration itself.

// routesOf is the runtime's route provider over the active snapshot: an
// inactive (disabled or removed) scope routes nothing.
func routesOf(cfg configSource) kernel.RouteProvider {
	return kernel.RouteFunc(func(_ context.Context, scope string) ([]kernel.Route, error) {
		sc, ok := cfg.Active().Scope(scope)
		if !ok || !sc.Active {
			return nil, nil
		}
		out := make([]kernel.Route, 0, len(sc.Routes))
		for _, r := range sc.Routes {
			out = append(out, kernel.Route{
				ID: r.ID, MatchType: r.Match.Type, MatchSource: r.Match.Source, Binding: r.Binding, Effect: kernel.Effect(r.Effect),
			})
		}
		return out, nil
	})
}

// causalOf turns the configured limits into the runtime's causal limits.
func causalOf(l config.Limits) kernel.CausalLimits {
	return kernel.CausalLimits{MaxDepth: l.CausalMaxDepth, PerMinute: l.CausalPerMinute}
}

// schedulerLimits turns the configured limits into the scheduler's.
func schedulerLimits(l config.Limits) scheduler.Limits {
	return scheduler.Limits{MaxRunning: l.MaxRunning, Lease: l.Lease, AttemptTimeout: l.AttemptTimeout}
}

// snapshotAt is the active snapshot for generation 0, else the pinned one.
func snapshotAt(ctx context.Context, cfg configSource, generation int64) (*config.Snapshot, error) {
	if generation == 0 {
		return cfg.Active(), nil
	}
	return cfg.Snapshot(ctx, generation)
}

// authorizeAt is the toolbelt's ceiling as of a committed generation: the
// toolbelt asks it inside a call's transaction with the latest generation
// that transaction sees, which may be committed and not yet active.
func authorizeAt(cfg configSource) func(ctx context.Context, generation int64, scope, op string) (bool, error) {
	return func(ctx context.Context, generation int64, scope, op string) (bool, error) {
		snap, err := snapshotAt(ctx, cfg, generation)
		if err != nil {
			return false, err
		}
		return snap.AuthorizeOperation(scope, op), nil
	}
}

// bindingLookup resolves a binding for the scheduler: a new attempt takes
// the active generation (and only in an active scope); an attempt pinned
// to a generation keeps that generation's binding.
func bindingLookup(cfg configSource) scheduler.BindingLookup {
	return func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
		snap, err := snapshotAt(ctx, cfg, q.Generation)
		if err != nil {
			return scheduler.Binding{}, err
		}
		if q.Generation == 0 {
			if sc, ok := snap.Scope(q.Scope); !ok || !sc.Active {
				return scheduler.Binding{}, fmt.Errorf("scope %s is not active in generation %d", q.Scope, snap.Generation)
			}
		}
		b, ok := snap.Binding(q.Scope, q.Binding)
		if !ok {
			return scheduler.Binding{}, fmt.Errorf("scope %s has no binding %s in generation %d", q.Scope, q.Binding, snap.Generation)
		}
		secrets, _ := snap.BindingSecrets(q.Scope, q.Binding)
		return scheduler.Binding{Executor: b.Executor, Config: b.Config, Generation: snap.Generation, NoOperations: grantsNothing(b), NoSecrets: len(secrets) == 0}, nil
	}
}

// grantsNothing reports whether a binding grants an attempt no operation,
// neither its own nor through any grant a Work may take.
func grantsNothing(b *config.EffectiveBinding) bool {
	if len(b.Operations) > 0 {
		return false
	}
	for _, ops := range b.Grants {
		if len(ops) > 0 {
			return false
		}
	}
	return true
}

// extensionsOf is the extension host's view of what a committed
// generation (0: the active one) says of an extension: whether and where
// it is enabled, exactly as the generation's Snapshot.ExtensionEnabled
// answers (an extension without an entry is enabled in every scope unless
// it is opt-in), and its entry's config. A generation that cannot be read
// enables nothing (the host fails closed).
func extensionsOf(cfg configSource) toolbelt.Extensions {
	return func(generation int64, name string) toolbelt.Enablement {
		snap, err := snapshotAt(context.Background(), cfg, generation)
		if err != nil {
			return toolbelt.Enablement{}
		}
		on, scopes := snap.ExtensionEnabled(name)
		if !on {
			return toolbelt.Enablement{}
		}
		e, _ := snap.Extension(name)
		return toolbelt.Enablement{Enabled: true, Scopes: scopes, Config: e.Config}
	}
}

// bindingAuthority is the toolbelt's view of what a binding of a pinned
// generation grants.
func bindingAuthority(cfg configSource) func(generation int64, scope, binding string) (toolbelt.BindingAuthority, bool) {
	return func(generation int64, scope, binding string) (toolbelt.BindingAuthority, bool) {
		snap, err := snapshotAt(context.Background(), cfg, generation)
		if err != nil {
			return toolbelt.BindingAuthority{}, false
		}
		b, ok := snap.Binding(scope, binding)
		if !ok {
			return toolbelt.BindingAuthority{}, false
		}
		return toolbelt.BindingAuthority{Operations: b.Operations, Grants: b.Grants, Playbook: b.PlaybookOperations}, true
	}
}

// secretResolver resolves an attempt's secrets immediately before its
// segment starts, outside any transaction: only the names the binding
// selects that both the attempt's pinned generation and the active one
// grant (same environment variable, same secret name), each with the
// active generation's reference. A failure is a *scheduler.SecretError
// naming the secret and a stable code, never its reference or value.
type secretResolver struct {
	cfg      configSource
	resolver *config.Resolver
}

func (s *secretResolver) resolve(ctx context.Context, req scheduler.SecretsRequest) (map[string]string, error) {
	pinned, err := s.cfg.Snapshot(ctx, req.Generation)
	if err != nil {
		return nil, &scheduler.SecretError{Name: "(generation)", Code: "generation_unavailable"}
	}
	want, ok := pinned.BindingSecrets(req.ScopeID, req.BindingID)
	if !ok || len(want) == 0 {
		return nil, nil
	}
	current := s.cfg.Active()
	now, _ := current.BindingSecrets(req.ScopeID, req.BindingID)
	vars := make([]string, 0, len(want))
	for v := range want {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	env := map[string]string{}
	for _, v := range vars {
		name := want[v]
		if now[v] != name {
			continue // the active generation no longer grants it
		}
		ref, ok := current.Secret(name)
		if !ok {
			continue
		}
		val, err := s.resolver.ResolveRef(ctx, ref)
		if err != nil {
			code := "secret_unavailable"
			var se *config.SecretError
			if errors.As(err, &se) {
				code = se.Code
			}
			return nil, &scheduler.SecretError{Name: name, Code: code}
		}
		env[v] = val
	}
	return env, nil
}

// startGates is the scheduler's port to the registrations' start gates:
// those of the host's registrations (the release's and the embedder's)
// that the generation the first attempt would be pinned to and the
// active one enable for the Work's scope (the scheduler orders them by
// registration name).
func startGates(host *toolbelt.Host) scheduler.StartGates {
	return func(scope string, generation int64) []scheduler.StartGate {
		var gates []scheduler.StartGate
		for _, r := range host.StartGates(generation, scope) {
			gates = append(gates, scheduler.StartGate{Registration: r.Name, Gate: r.StartGate})
		}
		return gates
	}
}

// emitAllowed is the toolbelt's configured emit rule: the active
// snapshot's authorization.emit of the call's scope, read on every
// emission so that an apply narrows the very next one (the binding does
// not narrow it further).
func emitAllowed(cfg configSource) func(scope, binding, eventType string) bool {
	return func(scope, _, eventType string) bool { return cfg.Active().AllowEmit(scope, eventType) }
}
