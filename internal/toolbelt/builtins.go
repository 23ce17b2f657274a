package toolbelt

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/wire"
)

// DefaultGuidance is the overall agent guidance when the daemon gives none.
const DefaultGuidance = `# The Open Conduit toolbelt

You run as one attempt of a piece of Work. Ask the host for outcomes only
through the operations listed here; each call is checked against this
attempt's authority. Pass a request ID when you may retry a call: a retry
with the same ID and input replays the first result. When you have declared
a wait or an outcome, your authority is released: stop and exit.`

// builtin serves a builtin inside the call's transaction, after the lease
// guard and the replay lookup.
type builtin func(tb *Toolbelt, ctx context.Context, tx storage.Tx, s *segment, call *toolCall) (json.RawMessage, error)

var builtins = map[string]builtin{
	"emit":            (*Toolbelt).emit,
	"create_work":     (*Toolbelt).createWork,
	"wait":            (*Toolbelt).wait,
	"declare_outcome": (*Toolbelt).declareOutcome,
	"read_context":    (*Toolbelt).readContext,
}

var builtinInfo = map[string]extension.OperationInfo{
	"emit": {
		Name:    "emit",
		Summary: "Emit an Event of a namespaced type from this attempt.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["type"],"properties":{` +
			`"type":{"type":"string","description":"namespaced lower-case type such as build.done; not core.*"},` +
			`"data":{"type":"object","description":"the Event's data, a JSON object"},` +
			`"correlation_key":{"type":"string","description":"a correlation key this Work owns"}}}`),
		Guidance:     "The host sets the Event's source, Work, execution and cause; do not try to. Use a correlation key only if this Work owns it.",
		Capabilities: []string{},
	},
	"create_work": {
		Name:    "create_work",
		Summary: "Create a child Work in this scope, optionally with a first input Event.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
			`"binding":{"type":"string","description":"the binding to run it with; this attempt's binding when absent"},` +
			`"correlation_key":{"type":"string","description":"a key the child owns"},` +
			`"input":{"type":"object","additionalProperties":false,"required":["type"],"properties":{"type":{"type":"string"},"data":{"type":"object"}}},` +
			`"grants":{"type":"array","items":{"type":"string"},"description":"grants of that binding the child takes"}}}`),
		Guidance:     "Pass a request ID: the child's ID derives from it, so a retry returns the same child. A parent that waits with types only wakes on its children's core.work.finished.",
		Capabilities: []string{},
	},
	"wait": {
		Name:    "wait",
		Summary: "Declare a wait and release this attempt's authority.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` +
			`"types":{"type":"array","items":{"type":"string"}},"keys":{"type":"array","items":{"type":"string"}},` +
			`"timeout":{"type":"string","description":"a Go duration such as 10m"}}}`),
		Guidance:     "After a wait is declared every further call is refused with authority_released: exit. With types only, the wait is on this Work's own keys and its children.",
		Capabilities: []string{},
	},
	"declare_outcome": {
		Name:    "declare_outcome",
		Summary: "Declare this Work's outcome and release this attempt's authority.",
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["outcome"],"properties":{` +
			`"outcome":{"enum":["succeeded","failed"]},"message":{"type":"string"},"data":{"type":"object"}}}`),
		Guidance:     "The declared outcome replaces the process's own exit status. Exit after declaring.",
		Capabilities: []string{},
	},
	"read_context": {
		Name:         "read_context",
		Summary:      "Read this Work, its inputs and its recent Events, within the scope's read ceiling.",
		InputSchema:  json.RawMessage(`{"type":"object","additionalProperties":false}`),
		Guidance:     "Parts the scope may not read are left out.",
		Capabilities: []string{},
	},
}

// decodeStrict decodes a builtin's input, refusing unknown members: an
// input that tries to set a source, parent or target is refused, never
// silently dropped.
func decodeStrict(op string, input json.RawMessage, v any) error {
	if err := jsonv2.Unmarshal(input, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		var se *jsonv2.SemanticError
		if errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName) {
			return kernel.Refuse(extension.ErrInvalid, "invalid_request", "%s takes no member %s; the host sets source, Work, execution and cause itself", op, se.JSONPointer)
		}
		return kernel.Refuse(extension.ErrInvalid, "invalid_request", "the input of %s does not match its schema (see the guidance)", op)
	}
	return nil
}

// cause is the event that started the segment: the Work's latest input
// the attempt acknowledged, else the Work's core.work.created. An
// execution's emissions are derived from it.
func cause(ctx context.Context, rd storage.Reader, s *segment) (string, error) {
	if wm := s.exe.InputWatermark; wm > 0 {
		in, err := rd.ListInputs(ctx, &storage.ListInputsParams{Work: s.work.ID, AfterPosition: wm - 1, UntilPosition: wm, Limit: 1})
		if err != nil {
			return "", err
		}
		if len(in) == 1 {
			return in[0].Event, nil
		}
	}
	return s.work.CreatedEvent, nil
}

// deliveryID is the delivery identity of an execution's emission made
// under a request ID, unique per execution.
func deliveryID(call *toolCall, part string) string {
	if call.requestID == "" {
		return ""
	}
	return "req/" + call.tok.Execution + "/" + part + "/" + call.requestID
}

// checkEmission applies the emit rule: a type whose family (first
// segment) is not core; for a translated emission (an operation's Emit),
// the family of the operation's own registration and no other; for the
// execution's own (emit, create_work's input), a family that is no
// registration's namespace and, when the daemon set EmitAllowed, one the
// configuration allows the scope; and a correlation key the Work owns.
// The configured rule and a translation of another family are the bare
// 403 forbidden, their precise reason logged.
func (tb *Toolbelt) checkEmission(ctx context.Context, rd storage.Reader, s *segment, call *toolCall, em extension.Emission, translated bool) error {
	family, _, _ := strings.Cut(em.Type, ".")
	if kernel.IsCore(em.Type) {
		return kernel.Refuse(extension.ErrInvalid, kernel.ErrCoreTypeReserved.Code, "type %s is reserved for the host; emit a namespaced type of your own", em.Type)
	}
	if translated {
		if owner, _, _ := strings.Cut(call.op, "."); family != owner {
			return forbid("operation %s translated its input into %s; a translated emission carries only its own registration's family %s.*", call.op, em.Type, owner)
		}
	} else {
		if tb.registeredFamily(family) {
			return kernel.Refuse(extension.ErrInvalid, "family_not_allowed", "the %s.* family belongs to the %s extension and is emitted only through its operations", family, family)
		}
		if tb.opts.EmitAllowed != nil && !tb.opts.EmitAllowed(call.tok.Scope, call.tok.Binding, em.Type) {
			return forbid("binding %s of scope %s may not emit %s: the configuration's authorization.emit does not list the %s family", call.tok.Binding, call.tok.Scope, em.Type, family)
		}
	}
	if em.CorrelationKey != "" {
		owner, err := rd.GetKeyOwner(ctx, s.work.Scope, em.CorrelationKey)
		if errors.Is(err, storage.ErrNotFound) || (err == nil && owner.ID != s.work.ID) {
			return kernel.Refuse(extension.ErrInvalid, "correlation_not_owned", "this Work does not own the correlation key; correlate only with keys it owns")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// emitInTx accepts an execution's emission: source execution, the Work
// and execution of the token, caused by the segment's cause, under the
// configured causal limits, idempotent by delivery identity, and routes
// it.
func (tb *Toolbelt) emitInTx(ctx context.Context, tx storage.Tx, s *segment, call *toolCall, em extension.Emission) (json.RawMessage, error) {
	if err := tb.checkEmission(ctx, tx, s, call, em, call.op != "emit"); err != nil {
		return nil, err
	}
	parent, err := cause(ctx, tx, s)
	if err != nil {
		return nil, err
	}
	ev, err := tb.rt.AcceptDerivedInTx(ctx, tx, storage.Event{
		Type: em.Type, Source: kernel.SourceExecution, Scope: s.work.Scope, Work: s.work.ID, Execution: s.exe.ID,
		CorrelationKey: em.CorrelationKey, Data: em.Data, Parent: parent, DeliveryID: deliveryID(call, "emit"),
	}, tb.rt.Causal())
	if err != nil {
		return nil, err
	}
	if _, err := tb.rt.Route(ctx, tx, ev); err != nil {
		return nil, err
	}
	return json.Marshal(emitted{EventID: ev.ID, Seq: ev.Seq})
}

// emitted is an emission's result: the same members, in the same order,
// as the map it replaced, without sorting a map's keys on every emit.
type emitted struct {
	EventID string `json:"event_id"`
	Seq     int64  `json:"seq"`
}

type emitInput struct {
	Type           string          `json:"type"`
	Data           json.RawMessage `json:"data,omitempty"`
	CorrelationKey string          `json:"correlation_key,omitempty"`
}

func (tb *Toolbelt) emit(ctx context.Context, tx storage.Tx, s *segment, call *toolCall) (json.RawMessage, error) {
	var in emitInput
	if err := decodeStrict("emit", call.input, &in); err != nil {
		return nil, err
	}
	return tb.emitInTx(ctx, tx, s, call, extension.Emission{Type: in.Type, Data: in.Data, CorrelationKey: in.CorrelationKey})
}

type createWorkInput struct {
	Binding        string     `json:"binding,omitempty"`
	CorrelationKey string     `json:"correlation_key,omitempty"`
	Input          *emitInput `json:"input,omitempty"`
	Grants         []string   `json:"grants,omitempty"`
}

// createWork creates a child Work and its causal core.work.created in the
// call's transaction. Its ids derive from the request ID, so a retry names
// the same child.
func (tb *Toolbelt) createWork(ctx context.Context, tx storage.Tx, s *segment, call *toolCall) (json.RawMessage, error) {
	var in createWorkInput
	if err := decodeStrict("create_work", call.input, &in); err != nil {
		return nil, err
	}
	if in.Input != nil && in.Input.CorrelationKey != "" {
		return nil, kernel.Refuse(extension.ErrInvalid, "invalid_request", "a child's input takes no correlation key; give the child one with correlation_key")
	}
	// Without a binding the child runs on this attempt's own; the binding
	// and its grants then follow the kernel's rules in the generation the
	// attempt is pinned to.
	binding := in.Binding
	if binding == "" {
		binding = call.tok.Binding
	}
	binding, err := kernel.WorkBinding(ctx, tb.opts.Scopes, call.tok.Generation, call.tok.Scope, binding, in.Grants)
	if err != nil {
		return nil, err
	}
	parent, err := cause(ctx, tx, s)
	if err != nil {
		return nil, err
	}
	causal := tb.rt.Causal() // one value for the whole call
	nw := kernel.NewWork{
		Scope: s.work.Scope, Binding: binding, Parent: s.work.ID, Grants: in.Grants, Cause: parent, Causal: &causal,
		Execution: s.exe.ID,
	}
	if in.CorrelationKey != "" {
		nw.Keys = []string{in.CorrelationKey}
	}
	if call.requestID != "" {
		at := s.work.CreatedAt
		nw.ID = ids.Derive(ids.Work, at, call.tok.Execution, "create_work", call.requestID)
		nw.CreatedEventID = ids.Derive(ids.Event, at, call.tok.Execution, "create_work.created", call.requestID)
	} else {
		nw.ID = tb.ids.New(ids.Work)
	}
	if in.Input != nil {
		if err := tb.checkEmission(ctx, tx, s, call, extension.Emission{Type: in.Input.Type}, false); err != nil {
			return nil, err
		}
		ev, err := tb.rt.AcceptDerivedInTx(ctx, tx, storage.Event{
			Type: in.Input.Type, Source: kernel.SourceExecution, Scope: s.work.Scope, Work: nw.ID, Execution: s.exe.ID,
			CorrelationKey: nw.ID, Data: in.Input.Data, Parent: parent, DeliveryID: deliveryID(call, "create_work.input"),
		}, causal)
		if err != nil {
			return nil, err
		}
		nw.Input = ev.ID
	}
	created, err := tb.rt.CreateWorkInTx(ctx, tx, nw)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"work_id": created.Work.ID, "created_event_id": created.Created.ID})
}

type waitInput struct {
	Types   []string `json:"types,omitempty"`
	Keys    []string `json:"keys,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
}

func waitView(s kernel.WaitSpec) map[string]any {
	v := map[string]any{"types": append([]string{}, s.Types...), "keys": append([]string{}, s.Keys...)}
	if s.Timeout > 0 {
		v["timeout"] = s.Timeout.String()
	}
	if s.Registration != "" {
		v["registration"] = s.Registration
	}
	return v
}

// wait records the segment's declared wait under the fence; authority is
// released at once and the scheduler's Complete registers it.
func (tb *Toolbelt) wait(ctx context.Context, tx storage.Tx, s *segment, call *toolCall) (json.RawMessage, error) {
	var in waitInput
	if err := decodeStrict("wait", call.input, &in); err != nil {
		return nil, err
	}
	spec := kernel.WaitSpec{Types: in.Types, Keys: in.Keys}
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 {
			return nil, kernel.Refuse(extension.ErrInvalid, kernel.ErrInvalidDeclaration.Code, "timeout is a positive Go duration such as 10m or 2h")
		}
		spec.Timeout = d
	}
	if err := tb.rt.Declare(ctx, tx, s.exe.ID, call.tok.Epoch, kernel.Declaration{Wait: &spec}); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"declared": "wait", "wait": waitView(spec)})
}

type outcomeInput struct {
	Outcome string          `json:"outcome"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (tb *Toolbelt) declareOutcome(ctx context.Context, tx storage.Tx, s *segment, call *toolCall) (json.RawMessage, error) {
	var in outcomeInput
	if err := decodeStrict("declare_outcome", call.input, &in); err != nil {
		return nil, err
	}
	spec := kernel.OutcomeSpec{Outcome: storage.WorkState(in.Outcome), Message: in.Message, Data: in.Data}
	if err := tb.rt.Declare(ctx, tx, s.exe.ID, call.tok.Epoch, kernel.Declaration{Outcome: &spec}); err != nil {
		return nil, err
	}
	return json.RawMessage(`{"declared":"outcome"}`), nil
}

// Reads of the read ceiling read_context consults.
const (
	ReadWork   = "work"
	ReadEvents = "events"
)

// RecentEvents bounds the recent Events read_context returns.
const RecentEvents = 50

// readContext returns the Work, its inputs and its recent Events, each
// only when the scope's current read ceiling allows it.
func (tb *Toolbelt) readContext(ctx context.Context, tx storage.Tx, s *segment, call *toolCall) (json.RawMessage, error) {
	var in struct{}
	if err := decodeStrict("read_context", call.input, &in); err != nil {
		return nil, err
	}
	scope := call.tok.Scope
	readWork, readEvents := tb.opts.AuthorizeRead(scope, ReadWork), tb.opts.AuthorizeRead(scope, ReadEvents)
	if !readWork && !readEvents {
		return nil, forbid("the read ceiling of scope %s allows neither work nor events", scope)
	}
	var out api.ReadContextResult
	if readWork {
		w := wire.Work(s.work)
		out.Work = &w
	}
	if readEvents {
		inputs, err := tx.ListInputs(ctx, &storage.ListInputsParams{Work: s.work.ID, Limit: RecentEvents})
		if err != nil {
			return nil, err
		}
		out.Inputs = []api.ContextInput{}
		for _, i := range inputs {
			ev, err := tx.GetEvent(ctx, i.Event)
			if err != nil {
				return nil, err
			}
			if ev.Scope == scope {
				out.Inputs = append(out.Inputs, api.ContextInput{Position: i.Position, Event: wire.Event(ev)})
			}
		}
		recent, err := tx.ListEvents(ctx, &storage.ListEventsParams{Scope: scope, Work: s.work.ID, Limit: RecentEvents, Desc: true})
		if err != nil {
			return nil, err
		}
		slices.Reverse(recent)
		out.Events = make([]api.Event, 0, len(recent))
		for _, ev := range recent {
			out.Events = append(out.Events, wire.Event(ev))
		}
	}
	return json.Marshal(out)
}
