package management

import (
	"slices"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// The conversions from storage records and kernel, toolbelt and
// configuration results to the wire types of package api: every response
// body is whitelisted here, field by field, so that a storage column
// rename never changes the API and no digest or secret can reach a
// response by a forgotten tag. wire_test.go proves each one sends the
// bytes the handlers send today.

// pageOut converts one page of records.
func pageOut[T, U any](p Page[T], out func(T) U) api.Page[U] {
	items := make([]U, 0, len(p.Items))
	for _, it := range p.Items {
		items = append(items, out(it))
	}
	return api.Page[U]{Items: items, NextCursor: p.NextCursor}
}

func eventOut(e storage.Event) api.Event {
	return api.Event{
		Seq: e.Seq, ID: e.ID, Type: e.Type, Source: e.Source, Scope: e.Scope, Work: e.Work, Execution: e.Execution,
		CorrelationKey: e.CorrelationKey, Data: e.Data, Parent: e.Parent, Root: e.Root, Depth: e.Depth,
		Actor: e.Actor, DeliveryID: e.DeliveryID, AcceptedAt: e.AcceptedAt,
	}
}

func workOut(w storage.Work) api.Work {
	return api.Work{
		ID: w.ID, Scope: w.Scope, Binding: w.Binding, State: string(w.State),
		BlockedReason: w.BlockedReason, BlockedDetail: w.BlockedDetail, Parent: w.Parent, CreatedEvent: w.CreatedEvent,
		OutcomeMessage: w.OutcomeMessage, OutcomeData: w.OutcomeData, Grants: w.Grants,
		InputWatermark: w.InputWatermark, InputCount: w.InputCount, Attempts: w.Attempts,
		Revision: w.Revision, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

func executionOut(e storage.Execution) api.Execution {
	return api.Execution{
		ID: e.ID, Work: e.Work, Scope: e.Scope, Binding: e.Binding, Executor: e.Executor,
		Generation: e.Generation, Epoch: e.Epoch, Owner: e.Owner, LeaseExpiresAt: e.LeaseExpiresAt, Deadline: e.Deadline,
		State: string(e.State), InputWatermark: e.InputWatermark, Result: string(e.Result), Message: e.Message,
		ExitCode: e.ExitCode, Revision: e.Revision, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
}

func waitOut(w storage.Wait) api.Wait {
	return api.Wait{
		ID: w.ID, Work: w.Work, Scope: w.Scope, Execution: w.Execution, Epoch: w.Epoch, Registration: w.Registration,
		Types: w.Types, Keys: w.Keys, OnWorkKeys: w.OnWorkKeys, Watermark: w.Watermark,
		Timer: w.Timer, TimeoutAt: w.TimeoutAt, State: string(w.State), SatisfiedBy: w.SatisfiedBy,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

func artifactOut(a storage.Artifact) api.Artifact {
	return api.Artifact{
		ID: a.ID, Execution: a.Execution, Work: a.Work, Name: a.Name, MediaType: a.MediaType,
		Size: a.Size, SHA256: a.SHA256, CreatedAt: a.CreatedAt,
	}
}

func toolbeltCallOut(c storage.ToolbeltCall) api.ToolbeltCall {
	return api.ToolbeltCall{
		ID: c.ID, Kind: c.Kind, Operation: c.Operation, Execution: c.Execution, Epoch: c.Epoch, TokenID: c.Token,
		Result: c.Result, Gate: c.Gate, Replayed: c.Replayed, At: c.At,
	}
}

func decisionOut(d kernel.Decision) api.Decision {
	out := api.Decision{
		Work: d.Work, WorkState: string(d.WorkState), Effect: string(d.Effect), Detail: d.Detail,
		Route: d.Route, Binding: d.Binding, Wait: d.Wait, Started: d.Started,
	}
	if d.Routes != nil {
		out.Routes = make([]api.RouteVerdict, 0, len(d.Routes))
		for _, rv := range d.Routes {
			out.Routes = append(out.Routes, api.RouteVerdict{Route: rv.Route, Verdict: string(rv.Verdict), Reason: rv.Reason})
		}
	}
	if d.OtherWakes != nil {
		out.OtherWakes = make([]api.Wake, 0, len(d.OtherWakes))
		for _, w := range d.OtherWakes {
			out.OtherWakes = append(out.OtherWakes, api.Wake{Work: w.Work, Wait: w.Wait, Reason: w.Reason})
		}
	}
	return out
}

// createdWorkOut is the body of POST /v1/work.
func createdWorkOut(res kernel.CreateWorkResult) api.CreatedWork {
	return api.CreatedWork{Work: workOut(res.Work), CreatedEvent: eventOut(res.Created), InputEvent: eventOut(res.Input), Existing: res.Replayed}
}

// controlledOut is the body of the cancel and retry controls: the
// execution only when the control fenced one.
func controlledOut(res kernel.ControlResult) api.Controlled {
	out := api.Controlled{Event: eventOut(res.Event), Work: workOut(res.Work), Existing: res.Replayed}
	if res.Execution.ID != "" {
		e := executionOut(res.Execution)
		out.Execution = &e
	}
	return out
}

func wokenOut(res kernel.WakeResult) api.Woken {
	return api.Woken{Event: eventOut(res.Event), Decision: decisionOut(res.Decision), Matched: res.Matched}
}

// emittedOut is the body of POST /v1/events.
func emittedOut(res kernel.EmitResult) api.Emitted {
	return api.Emitted{Event: eventOut(res.Event), Decision: decisionOut(res.Decision), Existing: res.Event.Replayed}
}

func traceOut(scope string, generation int64, d kernel.Decision) api.Trace {
	return api.Trace{Scope: scope, Generation: generation, Decision: decisionOut(d)}
}

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
	return api.Applied{Generation: res.Generation.Number, Hash: res.Generation.Hash, PreviousGeneration: res.Previous, Warnings: warningsOut(res.Warnings)}
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

// errorOut is the envelope of a refusal; diagnostics only for
// invalid_config, and absent when there are none.
func errorOut(code, message string, diagnostics []config.Diagnostic) api.ErrorEnvelope {
	body := api.ErrorBody{Code: code, Message: message}
	if len(diagnostics) > 0 {
		body.Diagnostics = diagnosticsOut(diagnostics)
	}
	return api.ErrorEnvelope{Error: body}
}
