package wire

import (
	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Page converts one page of records; its items are never nil, so an empty
// page is sent as an empty list.
func Page[T, U any](p api.Page[T], out func(T) U) api.Page[U] {
	items := make([]U, 0, len(p.Items))
	for _, it := range p.Items {
		items = append(items, out(it))
	}
	return api.Page[U]{Items: items, NextCursor: p.NextCursor}
}

// Event is an accepted Event; Replayed is not part of it (the bodies that
// need it say Existing).
func Event(e storage.Event) api.Event {
	return api.Event{
		Seq: e.Seq, ID: e.ID, Type: e.Type, Source: e.Source, Scope: e.Scope, Work: e.Work, Execution: e.Execution,
		CorrelationKey: e.CorrelationKey, Data: e.Data, Parent: e.Parent, Root: e.Root, Depth: e.Depth,
		Actor: e.Actor, DeliveryID: e.DeliveryID, AcceptedAt: e.AcceptedAt,
	}
}

// Work is a Work record.
func Work(w storage.Work) api.Work {
	return api.Work{
		ID: w.ID, Scope: w.Scope, Binding: w.Binding, State: string(w.State),
		BlockedReason: w.BlockedReason, BlockedDetail: w.BlockedDetail, WaitReason: w.WaitReason, Parent: w.Parent, CreatedEvent: w.CreatedEvent,
		OutcomeMessage: w.OutcomeMessage, OutcomeData: w.OutcomeData, Grants: w.Grants,
		InputWatermark: w.InputWatermark, InputCount: w.InputCount, Attempts: w.Attempts,
		Revision: w.Revision, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Hold: Hold(w),
	}
}

// Hold is a Work's hold told by who set it (kernel.HoldBy), nil when it
// is not held.
func Hold(w storage.Work) *api.Hold {
	if w.BlockedReason == "" {
		return nil
	}
	return &api.Hold{Reason: w.BlockedReason, Detail: w.BlockedDetail, By: kernel.HoldBy(w.BlockedReason)}
}

// Execution is an execution record.
func Execution(e storage.Execution) api.Execution {
	return api.Execution{
		ID: e.ID, Work: e.Work, Scope: e.Scope, Binding: e.Binding, Executor: e.Executor,
		Generation: e.Generation, Epoch: e.Epoch, Owner: e.Owner, LeaseExpiresAt: e.LeaseExpiresAt, Deadline: e.Deadline,
		State: string(e.State), InputWatermark: e.InputWatermark, Result: string(e.Result), Message: e.Message,
		ExitCode: e.ExitCode, Session: e.Session, Usage: usage(e.Usage), Revision: e.Revision, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt,
	}
}

// usage is an execution's usage totals (nil: none).
func usage(u *storage.Usage) *api.Usage {
	if u == nil {
		return nil
	}
	return &api.Usage{
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheCreationTokens: u.CacheCreationTokens, CostUSD: u.CostUSD, Turns: u.Turns,
	}
}

// Wait is a Wait record.
func Wait(w storage.Wait) api.Wait {
	return api.Wait{
		ID: w.ID, Work: w.Work, Scope: w.Scope, Execution: w.Execution, Epoch: w.Epoch, Registration: w.Registration,
		Types: w.Types, Keys: w.Keys, OnWorkKeys: w.OnWorkKeys, Watermark: w.Watermark,
		Timer: w.Timer, TimeoutAt: w.TimeoutAt, State: string(w.State), SatisfiedBy: w.SatisfiedBy,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

// Artifact is an artifact's metadata.
func Artifact(a storage.Artifact) api.Artifact {
	return api.Artifact{
		ID: a.ID, Execution: a.Execution, Work: a.Work, Name: a.Name, MediaType: a.MediaType,
		Size: a.Size, SHA256: a.SHA256, CreatedAt: a.CreatedAt,
	}
}

// ToolbeltCall is a toolbelt call record: its token's id, never the token.
func ToolbeltCall(c storage.ToolbeltCall) api.ToolbeltCall {
	return api.ToolbeltCall{
		ID: c.ID, Kind: c.Kind, Operation: c.Operation, Execution: c.Execution, Epoch: c.Epoch, TokenID: c.Token,
		Result: c.Result, Gate: c.Gate, Refusal: c.Refusal, Replayed: c.Replayed, At: c.At,
	}
}

// Decision is the router's decision; a nil list stays nil.
func Decision(d kernel.Decision) api.Decision {
	out := api.Decision{
		Work: d.Work, WorkState: string(d.WorkState), Effect: string(d.Effect), Detail: d.Detail,
		Route: d.Route, Binding: d.Binding, Wait: d.Wait, Started: d.Started,
		QueuedAhead: d.QueuedAhead, Interrupted: d.Interrupted,
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

// CreatedWork is the body of POST /v1/work.
func CreatedWork(res kernel.CreateWorkResult) api.CreatedWork {
	return api.CreatedWork{Work: Work(res.Work), CreatedEvent: Event(res.Created), InputEvent: Event(res.Input), Existing: res.Replayed}
}

// Controlled is the body of the cancel and retry controls: the execution
// only when the control fenced one.
func Controlled(res kernel.ControlResult) api.Controlled {
	out := api.Controlled{Event: Event(res.Event), Work: Work(res.Work), Existing: res.Replayed}
	if res.Execution.ID != "" {
		e := Execution(res.Execution)
		out.Execution = &e
	}
	return out
}

// Woken is the body of POST /v1/work/{id}/wake.
func Woken(res kernel.WakeResult) api.Woken {
	return api.Woken{Event: Event(res.Event), Decision: Decision(res.Decision), Matched: res.Matched}
}

// Emitted is the body of POST /v1/events.
func Emitted(res kernel.EmitResult) api.Emitted {
	return api.Emitted{Event: Event(res.Event), Decision: Decision(res.Decision), Existing: res.Event.Replayed}
}

// Trace is the body of a route trace in scope at a generation.
func Trace(scope string, generation int64, d kernel.Decision) api.Trace {
	return api.Trace{Scope: scope, Generation: generation, Decision: Decision(d)}
}

// EgressConnection is an egress proxy's connection record; EndedAt is
// left out while it is open.
func EgressConnection(c storage.EgressConnection) api.EgressConnection {
	out := api.EgressConnection{
		ID: c.ID, Execution: c.Execution, Host: c.Host, Port: c.Port, Allowed: c.Allowed, Reason: c.Reason,
		BytesUp: c.BytesUp, BytesDown: c.BytesDown, StartedAt: c.StartedAt,
	}
	if !c.EndedAt.IsZero() {
		ended := c.EndedAt
		out.EndedAt = &ended
	}
	return out
}
