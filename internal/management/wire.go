package management

import (
	"slices"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/wire"
)

// The conversions from management's own results and the configuration's
// to the wire types of package api: every response body is whitelisted,
// field by field, so that no digest or secret can reach a response by a
// forgotten tag. Storage records and the kernel's results are converted by
// package wire, the one copy the toolbelt's read_context shares.

// pageOut converts one page of records.
func pageOut[T, U any](p api.Page[T], out func(T) U) api.Page[U] { return wire.Page(p, out) }

var (
	eventOut        = wire.Event
	workOut         = wire.Work
	executionOut    = wire.Execution
	waitOut         = wire.Wait
	artifactOut     = wire.Artifact
	toolbeltCallOut = wire.ToolbeltCall
	createdWorkOut  = wire.CreatedWork
	controlledOut   = wire.Controlled
	wokenOut        = wire.Woken
	emittedOut      = wire.Emitted
	traceOut        = wire.Trace
)

// scopeOut is a scope as the API shows it: resolved operation names,
// secret names (never references), no executor config.
func scopeOut(sc *config.EffectiveScope, generation int64) api.Scope {
	v := api.Scope{
		ID: sc.ID, Parent: sc.Parent, Enabled: sc.Enabled, Removed: sc.Removed, Active: sc.Active,
		Authorization: api.Authorization{Operations: orEmptyList(sc.Operations), Reads: orEmptyList(sc.Reads)},
		Bindings:      []api.Binding{}, Routes: []api.Route{}, Generation: generation,
	}
	ids := make([]string, 0, len(sc.Bindings))
	for id := range sc.Bindings {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		b := sc.Bindings[id]
		bv := api.Binding{ID: id, Executor: b.Executor, Operations: orEmptyList(b.Operations), Grants: map[string][]string{},
			Secrets: map[string]string{}, Requires: []string{}, Playbook: b.Playbook}
		for g, ops := range b.Grants {
			bv.Grants[g] = orEmptyList(ops)
		}
		for env, name := range b.Secrets {
			bv.Secrets[env] = name
		}
		for _, c := range b.Requires {
			bv.Requires = append(bv.Requires, string(c))
		}
		v.Bindings = append(v.Bindings, bv)
	}
	for _, rt := range sc.Routes {
		v.Routes = append(v.Routes, api.Route{ID: rt.ID, MatchType: rt.Match.Type, MatchSource: rt.Match.Source, Binding: rt.Binding, Effect: string(rt.Effect)})
	}
	return v
}

func actionOut(a toolbelt.ActionInfo) api.Action {
	return api.Action{Name: a.Name, Registration: a.Registration, Summary: a.Summary, InputSchema: a.InputSchema}
}

// actedOut is the body of POST /v1/actions/{name}.
func actedOut(res toolbelt.ActResult) api.Acted {
	return api.Acted{Event: eventOut(res.Event), Result: res.Result, Existing: res.Event.Replayed}
}

func healthOut(version string, generation int64, state string) api.Health {
	return api.Health{Status: "ok", Version: version, Generation: generation, State: state}
}

// operatorOut is a credential as the listing shows it: never a token or a
// digest.
func operatorOut(c Credential) api.Operator {
	out := api.Operator{
		Name: c.Name, Role: c.Role.String(), TokenID: c.ID, Owner: c.Name == OwnerName,
		Active: c.Active(), CreatedAt: c.CreatedAt.UTC(),
	}
	if !c.Active() {
		t := c.RevokedAt.UTC()
		out.RevokedAt = &t
	}
	return out
}

// issuedOut is the one body that carries a token.
func issuedOut(is Issued) api.Issued {
	c := is.Credential
	return api.Issued{Name: c.Name, Role: c.Role.String(), TokenID: c.ID, Token: is.Token, CreatedAt: c.CreatedAt.UTC()}
}

func revokedOut(r RevokeResult) api.Revoked {
	return api.Revoked{TokenID: r.TokenID, Class: string(r.Class), Revoked: r.Revoked}
}

// configOut is the body of GET /v1/config: the redacted normalized
// document of the active generation.
func configOut(g storage.Generation) api.Config {
	return api.Config{Generation: g.Number, Hash: g.Hash, Config: g.Normalized, Actor: g.Actor, CreatedAt: g.CreatedAt.UTC()}
}

// validationOut is the body of POST /v1/config/validate; snap is nil for
// an invalid document.
func validationOut(snap *config.Snapshot, res config.Result) api.Validation {
	out := api.Validation{Valid: res.Valid(), Diagnostics: diagnosticsOut(res.Diagnostics), Warnings: warningsOut(res.Warnings)}
	if snap != nil {
		out.Hash = snap.Hash
	}
	return out
}

// appliedOut is the body of a successful POST /v1/config/apply.
func appliedOut(res configsvc.ApplyResult) api.Applied {
	return api.Applied{Generation: res.Generation.Number, Hash: res.Generation.Hash, PreviousGeneration: res.Previous, Warnings: warningsOut(res.Warnings), Unchanged: res.Unchanged}
}

// diagnosticsOut never returns nil: the lists are always sent.
func diagnosticsOut(ds []config.Diagnostic) []api.Diagnostic {
	out := make([]api.Diagnostic, 0, len(ds))
	for _, d := range ds {
		out = append(out, api.Diagnostic{Pointer: d.Pointer, Code: string(d.Code), Remedy: d.Remedy})
	}
	return out
}

func warningsOut(ws []config.Warning) []api.Warning {
	out := make([]api.Warning, 0, len(ws))
	for _, w := range ws {
		out = append(out, api.Warning{Pointer: w.Pointer, Code: w.Code, Message: w.Message})
	}
	return out
}
