package toolbelt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// MaxActionInput bounds an action's input (255 KiB), so that the
// core.action Event recording it stays within kernel.MaxDataBytes.
const MaxActionInput = kernel.MaxDataBytes - 1024

// Refusals of Act.
var (
	ErrActionNotFound = &kernel.Error{Code: "action_not_found", Kind: extension.ErrNotFound}
	ErrInvalidAction  = kernel.ErrInvalidAction
)

// ActionInfo describes a registered action to an operator.
type ActionInfo struct {
	Name         string
	Registration string
	Summary      string
	InputSchema  json.RawMessage
}

// Actions serves to operators the actions registered on a Host (a
// registration's operations are the Toolbelt's). It is safe for
// concurrent use. No execution can call an action: only an operator,
// through Act.
type Actions struct {
	control *kernel.Control
	host    *Host
}

// NewActions returns the actions registered on host, whose Act records
// each action through control. A nil host has none.
func NewActions(control *kernel.Control, host *Host) *Actions {
	return &Actions{control: control, host: host}
}

// List describes every registered action whose registration the active
// generation enables (for any scope), in name order. A nil registry has
// none.
func (a *Actions) List() []ActionInfo {
	out := []ActionInfo{}
	if a == nil || a.host == nil {
		return out
	}
	for _, r := range a.host.actionList() {
		if e := a.host.enablement(0, r.reg); !e.Enabled || (e.Scopes != nil && len(e.Scopes) == 0) {
			continue
		}
		schema := r.act.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, ActionInfo{Name: r.act.Name, Registration: r.reg, Summary: r.act.Summary, InputSchema: slices.Clone(schema)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// lookup finds a registered action whose registration the active
// generation enables for scope.
func (a *Actions) lookup(name, scope string) (extension.Action, bool) {
	if a == nil || a.host == nil {
		return extension.Action{}, false
	}
	r, ok := a.host.action(name)
	if !ok || !a.host.enablement(0, r.reg).In(scope) {
		return extension.Action{}, false
	}
	return r.act, true
}

// ActRequest is an operator's action.
type ActRequest struct {
	// Action is a registered action's name.
	Action string
	// Scope is the scope the action is taken in; the caller has checked
	// that it is active.
	Scope string
	// Work, when set, is a Work of Scope the action is about.
	Work string
	// Input is a JSON object (empty: {}).
	Input json.RawMessage
	// DeliveryID, derived from the caller's Idempotency-Key, makes the
	// core.action Event idempotent and is the handler's RequestID.
	DeliveryID string
}

// ActResult is the core.action Event that records the action (Replayed
// when an earlier request with the same DeliveryID accepted it) and the
// handler's result, a JSON object.
type ActResult struct {
	Event  storage.Event
	Result json.RawMessage
}

// Act runs an operator's action. It takes the operator from the context
// (kernel.WithActor) and has the kernel record a core.action Event
// (kernel.Control.RecordAction), whose data is the action's name and its
// canonical input. Then, outside storage, the action's handler runs with
// the operator as its Caller and the Event's id.
//
// A retry with the same DeliveryID accepts no second Event (a different
// action, scope, Work, input or operator under it is event_conflict) and
// runs the handler again with the same RequestID and Event, so a request
// whose answer was lost completes: handlers are idempotent on them. The
// management API replays an answered request without calling Act.
//
// A handler's *extension.OperationError is returned as it is; any other
// failure, a panic or a result that is not a JSON object is an error of
// the host.
func (a *Actions) Act(ctx context.Context, req ActRequest) (ActResult, error) {
	if _, err := kernel.ActorOf(ctx); err != nil {
		return ActResult{}, err
	}
	act, ok := a.lookup(req.Action, req.Scope)
	if !ok {
		return ActResult{}, kernel.Refuse(extension.ErrNotFound, ErrActionNotFound.Code, "no action %q is registered and enabled for scope %s; open-conduit actions lists them", req.Action, req.Scope)
	}
	if len(req.Work) > kernel.MaxKeyBytes {
		return ActResult{}, kernel.Refuse(extension.ErrInvalid, ErrInvalidAction.Code, "the Work id is longer than %d bytes; name a Work of scope %s", kernel.MaxKeyBytes, req.Scope)
	}
	input, err := actionInput(req.Input)
	if err != nil {
		return ActResult{}, err
	}
	body, err := jsonv2.Marshal(struct {
		Action string         `json:"action"`
		Input  jsontext.Value `json:"input"`
	}{act.Name, jsontext.Value(input)})
	if err != nil {
		return ActResult{}, err
	}
	ev, err := a.control.RecordAction(ctx, kernel.ActionRecord{Scope: req.Scope, Work: req.Work, Data: body, DeliveryID: req.DeliveryID})
	if err != nil {
		return ActResult{}, err
	}
	out := ActResult{Event: ev}
	out.Result, err = runAction(ctx, act, extension.ActionRequest{
		Action: act.Name, Caller: ev.Actor, Scope: ev.Scope, Work: ev.Work, Input: input,
		RequestID: req.DeliveryID, Event: ev.ID,
	})
	if err != nil {
		return ActResult{}, err
	}
	return out, nil
}

// actionInput checks an action's input, one JSON object of at most
// MaxActionInput bytes, and returns it in canonical form (RFC 8785), so
// that a retry of the same request records and compares the same bytes.
func actionInput(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{}`), nil
	}
	v := jsontext.Value(bytes.Clone(raw))
	if err := v.Canonicalize(); err != nil || v.Kind() != '{' {
		return nil, kernel.Refuse(extension.ErrInvalid, ErrInvalidAction.Code, "the action's input must be one JSON object ({} when it takes none)")
	}
	if len(v) > MaxActionInput {
		return nil, kernel.Refuse(extension.ErrInvalid, ErrInvalidAction.Code, "the action's input is %d bytes; the limit is %d", len(v), MaxActionInput)
	}
	return json.RawMessage(v), nil
}

// runAction calls an action's handler and checks its result.
func runAction(ctx context.Context, act extension.Action, req extension.ActionRequest) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &extensionFailure{op: act.Name, part: "action handler", typ: failureType(&extensionPanic{value: p})}
		}
	}()
	out, err = act.Handler(ctx, req)
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return nil, oe
	}
	if err != nil {
		// The handler's text may hold a credential: name its type only.
		return nil, &extensionFailure{op: act.Name, part: "action handler", typ: failureType(err)}
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return json.RawMessage(`{}`), nil
	}
	v := jsontext.Value(bytes.Clone(out))
	if err := v.Compact(); err != nil || v.Kind() != '{' {
		return nil, fmt.Errorf("toolbelt: action %s returned a result that is not a JSON object", act.Name)
	}
	return json.RawMessage(v), nil
}
