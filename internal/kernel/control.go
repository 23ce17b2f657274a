package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// ControlOptions configure Control.
type ControlOptions struct {
	Runtime *Runtime
	Store   storage.Store
	// Scopes answers what the configuration says of a scope; Emit and
	// CreateWork apply their rules to its active generation. Required.
	Scopes Scopes
}

// Control holds the operator controls the management API calls. Each
// takes the acting principal from the context (WithActor) and stamps it on
// the core.manual event it accepts; each accepts an optional DeliveryID (or
// ID) that the caller derives from its Idempotency-Key, so that a retried
// request completes the same operation and returns its result instead of
// acting twice.
type Control struct {
	rt     *Runtime
	store  storage.Store
	scopes Scopes
}

// NewControl returns the operator controls. It panics without Scopes: the
// rules of Emit and CreateWork cannot be applied without it.
func NewControl(opts ControlOptions) *Control {
	if opts.Scopes == nil {
		panic("kernel: NewControl needs Scopes")
	}
	return &Control{rt: opts.Runtime, store: opts.Store, scopes: opts.Scopes}
}

// ActorOf returns the principal named on the request (WithActor), or
// actor_required when none is.
func ActorOf(ctx context.Context) (string, error) {
	a := ActorFrom(ctx)
	if a == "" {
		return "", Refuse(extension.ErrUnauthorized, ErrActorRequired.Code, "no operator is named on the request; authenticate first")
	}
	return a, nil
}

// EmitRequest is an operator's event.
type EmitRequest struct {
	// Scope may be left empty with a Parent: the event takes its parent's.
	Scope          string
	Type           string
	Data           json.RawMessage
	CorrelationKey string
	// Parent, when set, makes it a derived event under causal bounds, in
	// its parent's scope; the caller has checked the operator may read it.
	Parent     string
	DeliveryID string
}

// EmitResult is the accepted event and how it was routed.
type EmitResult struct {
	Event    storage.Event
	Decision Decision
}

// Emit accepts an operator's event from core.manual (a root, or derived
// from Parent) and routes it at once. Operators cannot send core.* types.
// The event goes to an active scope of the active configuration
// generation (scope_inactive); a derived event stays in its parent's scope
// (parent_not_found, invalid_event).
func (c *Control) Emit(ctx context.Context, req EmitRequest) (EmitResult, error) {
	actor, err := ActorOf(ctx)
	if err != nil {
		return EmitResult{}, err
	}
	if req.Type == "" {
		return EmitResult{}, Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "type is required: a namespaced event type such as deploy.requested")
	}
	if IsCore(req.Type) {
		return EmitResult{}, Refuse(extension.ErrInvalid, ErrCoreTypeReserved.Code, "type %s is reserved for the host; send a namespaced type of your own", req.Type)
	}
	var out EmitResult
	err = c.store.WithTx(ctx, func(tx storage.Tx) error {
		scope, err := c.emitScope(ctx, tx, req)
		if err != nil {
			return err
		}
		ev := storage.Event{
			Type: req.Type, Source: SourceManual, Scope: scope, CorrelationKey: req.CorrelationKey, Data: req.Data,
			Parent: req.Parent, Actor: actor, DeliveryID: req.DeliveryID,
		}
		if req.Parent != "" {
			out.Event, err = c.rt.AcceptDerivedInTx(ctx, tx, ev, c.rt.Causal())
		} else {
			out.Event, err = c.rt.AcceptInTx(ctx, tx, ev)
		}
		if err != nil {
			return err
		}
		if out.Decision, err = c.rt.Route(ctx, tx, out.Event); err != nil {
			return err
		}
		return recordResult(ctx, tx, out)
	})
	return out, err
}

// emitScope is the scope an operator's event goes to: its parent's when it
// has one (naming another is refused), else the one named; either way an
// active scope.
func (c *Control) emitScope(ctx context.Context, rd storage.Reader, req EmitRequest) (string, error) {
	scope := req.Scope
	if req.Parent != "" {
		parent, err := rd.GetEvent(ctx, req.Parent)
		if errors.Is(err, storage.ErrNotFound) {
			return "", Refuse(extension.ErrInvalid, ErrParentNotFound.Code, "parent event %s does not exist; name an accepted event", clip(req.Parent))
		}
		if err != nil {
			return "", err
		}
		if scope == "" {
			scope = parent.Scope
		} else if scope != parent.Scope {
			return "", Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "a derived event stays in its parent's scope %s; leave scope out or name that one", parent.Scope)
		}
	}
	if scope == "" {
		return "", Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "scope is required (or a parent, whose scope the event takes)")
	}
	return scope, ActiveScope(ctx, c.scopes, scope)
}

// InputSpec is an event to bind to a Work as input.
type InputSpec struct {
	Type string
	Data json.RawMessage
}

// CreateWorkRequest is an operator's manual Work.
type CreateWorkRequest struct {
	// ID is the Work's id, derived from the idempotency key ("" for a
	// fresh one).
	ID    string
	Scope string
	// Binding may be left empty when the scope has exactly one binding.
	Binding string
	Keys    []string
	Grants  []string
	Parent  string
	// Input is bound to the Work as its first input (an event derived from
	// its core.work.created); without it the Work's first input is its
	// core.work.created.
	Input *InputSpec
}

// CreateWorkResult is the created (or, on a retried request, existing)
// Work.
type CreateWorkResult struct {
	Work     storage.Work
	Created  storage.Event
	Input    storage.Event
	Replayed bool
}

// CreateWork creates a ready Work with its root core.work.created and its
// explicitly bound queued input, in one transaction. Nothing is launched
// directly: the scheduler claims it. The scope, binding and grants follow
// WorkBinding in the active configuration generation.
func (c *Control) CreateWork(ctx context.Context, req CreateWorkRequest) (CreateWorkResult, error) {
	actor, err := ActorOf(ctx)
	if err != nil {
		return CreateWorkResult{}, err
	}
	if req.Scope == "" {
		return CreateWorkResult{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "scope is required: name the scope the Work runs in (open-conduit scopes lists them)")
	}
	if req.Binding, err = WorkBinding(ctx, c.scopes, 0, req.Scope, req.Binding, req.Grants); err != nil {
		return CreateWorkResult{}, err
	}
	if req.Input != nil && IsCore(req.Input.Type) {
		return CreateWorkResult{}, Refuse(extension.ErrInvalid, ErrCoreTypeReserved.Code, "input type %s is reserved for the host", req.Input.Type)
	}
	// A derived ID is assumed new (NewWork.AssumeNew): a retried request
	// is mostly answered from its Idempotency-Key record before it gets
	// here, so the first transaction skips reading the Work, and only
	// when it finds the Work after all does a second one read it.
	assumeNew := req.ID != ""
	out, err := c.createWork(ctx, req, actor, assumeNew)
	if assumeNew && errors.Is(err, storage.ErrDuplicate) {
		out, err = c.createWork(ctx, req, actor, false)
	}
	return out, err
}

// createWork is CreateWork's transaction.
func (c *Control) createWork(ctx context.Context, req CreateWorkRequest, actor string, assumeNew bool) (CreateWorkResult, error) {
	var out CreateWorkResult
	err := c.store.WithTx(ctx, func(tx storage.Tx) error {
		created, err := c.rt.CreateWorkInTx(ctx, tx, NewWork{
			ID: req.ID, Scope: req.Scope, Binding: req.Binding, Parent: req.Parent, Keys: req.Keys, Grants: req.Grants,
			Source: SourceManual, Actor: actor, InputCreated: req.Input == nil, AssumeNew: assumeNew,
		})
		if err != nil {
			return err
		}
		out.Work, out.Created, out.Replayed = created.Work, created.Created, created.Replayed
		if created.Replayed {
			ins, err := tx.ListInputs(ctx, &storage.ListInputsParams{Work: created.Work.ID, Limit: 1})
			if err == nil && len(ins) > 0 {
				out.Input, err = tx.GetEvent(ctx, ins[0].Event)
			}
			if err == nil && !sameInput(out.Input, created.Created, req.Input) {
				return Refuse(extension.ErrConflict, ErrWorkConflict.Code, "Work %s was created by a request with another input; this Idempotency-Key was used for a different request: use a new one", created.Work.ID)
			}
			if err != nil {
				return err
			}
			return recordResult(ctx, tx, out)
		}
		// Without an input of its own, the Work's first input is its
		// core.work.created, queued with it (NewWork.InputCreated).
		out.Input = created.Created
		if req.Input != nil {
			out.Input, err = c.rt.AcceptInTx(ctx, tx, storage.Event{
				Type: req.Input.Type, Source: SourceManual, Scope: req.Scope, Work: created.Work.ID, CorrelationKey: created.Work.ID,
				Data: req.Input.Data, Parent: created.Created.ID, Actor: actor,
			})
			if err != nil {
				return err
			}
			if _, err := c.rt.QueueInputInTx(ctx, tx, created.Work.ID, out.Input.ID); err != nil {
				return err
			}
			if out.Work, err = tx.GetWork(ctx, created.Work.ID); err != nil {
				return err
			}
		}
		return recordResult(ctx, tx, out)
	})
	return out, err
}

// sameInput reports whether first, the first input of an existing manual
// Work created by created, is the input a retried request asks for: its
// core.work.created when it asks for none, else an event of the same type
// and data.
func sameInput(first, created storage.Event, in *InputSpec) bool {
	if in == nil {
		return first.ID == created.ID
	}
	if first.ID == created.ID || first.Type != in.Type {
		return false
	}
	want, err := NormalizeData(in.Data)
	if err != nil {
		return false
	}
	have, err := NormalizeData(first.Data)
	if err != nil {
		return false
	}
	return canonicalEqual(have, want)
}

// ControlRequest names the target of a control and its idempotency.
type ControlRequest struct {
	// Target is the Work (or execution) id.
	Target string
	// Reason is a short note recorded on the control event.
	Reason     string
	DeliveryID string
}

// ControlResult is a control's event and the state it left.
type ControlResult struct {
	Event     storage.Event
	Work      storage.Work
	Execution storage.Execution
	// Replayed: the control was done by an earlier request with the same
	// identity; the state is read, not changed.
	Replayed bool
}

// control accepts a control event for a Work and, unless it is a replay,
// runs act in the same transaction.
func (c *Control) control(ctx context.Context, typ, workID, executionID string, req ControlRequest, act func(tx storage.Tx, ev storage.Event, w storage.Work) (ControlResult, error)) (ControlResult, error) {
	return c.controlData(ctx, typ, workID, executionID, map[string]any{"work_id": workID, "execution_id": executionID, "reason": req.Reason}, false, req, act)
}

// controlData is control with the control event's data given. With
// strict, a replay whose event has other data is another request under a
// used delivery id: event_conflict.
func (c *Control) controlData(ctx context.Context, typ, workID, executionID string, data map[string]any, strict bool, req ControlRequest, act func(tx storage.Tx, ev storage.Event, w storage.Work) (ControlResult, error)) (ControlResult, error) {
	actor, err := ActorOf(ctx)
	if err != nil {
		return ControlResult{}, err
	}
	var out ControlResult
	err = c.store.WithTx(ctx, func(tx storage.Tx) error {
		w, err := tx.GetWork(ctx, workID)
		if errors.Is(err, storage.ErrNotFound) {
			return Refuse(extension.ErrNotFound, ErrWorkNotFound.Code, "Work %s does not exist", workID)
		}
		if err != nil {
			return err
		}
		body, _ := json.Marshal(data)
		ev, err := c.rt.AcceptInTx(ctx, tx, storage.Event{
			Type: typ, Source: SourceManual, Scope: w.Scope, Work: workID, Execution: executionID, CorrelationKey: workID,
			Data: body, Parent: w.CreatedEvent, Actor: actor, DeliveryID: req.DeliveryID,
		})
		if err != nil {
			return err
		}
		if ev.Replayed && strict && (ev.Type != typ || ev.Work != workID || !canonicalEqual(ev.Data, body)) {
			return Refuse(extension.ErrConflict, ErrEventConflict.Code, "this delivery id (Idempotency-Key) was used for another %s request; use a new one", typ)
		}
		if ev.Replayed {
			out = ControlResult{Event: ev, Work: w, Replayed: true}
			if executionID != "" {
				if out.Execution, err = tx.GetExecution(ctx, executionID); err != nil {
					return err
				}
			}
			return recordResult(ctx, tx, out)
		}
		out, err = act(tx, ev, w)
		out.Event = ev
		if err != nil {
			return err
		}
		return recordResult(ctx, tx, out)
	})
	return out, err
}

// CancelWork cancels a Work: the core.work.cancelled control event, the
// fencing of its live attempt and the Work's end, in one transaction.
func (c *Control) CancelWork(ctx context.Context, req ControlRequest) (ControlResult, error) {
	return c.control(ctx, TypeWorkCancelled, req.Target, "", req, func(tx storage.Tx, ev storage.Event, _ storage.Work) (ControlResult, error) {
		w, err := c.rt.CancelWorkInTx(ctx, tx, req.Target, ev)
		return ControlResult{Work: w}, err
	})
}

// CancelExecution fences one attempt and holds its Work with
// operator_cancelled until a manual Retry. The process is stopped by the
// host, which then calls ConfirmStopped.
func (c *Control) CancelExecution(ctx context.Context, req ControlRequest) (ControlResult, error) {
	exe, err := c.store.GetExecution(ctx, req.Target)
	if errors.Is(err, storage.ErrNotFound) {
		return ControlResult{}, Refuse(extension.ErrNotFound, ErrExecutionNotFound.Code, "execution %s does not exist", req.Target)
	}
	if err != nil {
		return ControlResult{}, err
	}
	return c.control(ctx, TypeExecutionCancelled, exe.Work, exe.ID, req, func(tx storage.Tx, ev storage.Event, _ storage.Work) (ControlResult, error) {
		e, w, err := c.rt.CancelExecutionInTx(ctx, tx, exe.ID, ev)
		return ControlResult{Work: w, Execution: e}, err
	})
}

// ConfirmStopped records the physical stop of a stopping attempt at epoch,
// with the exit code the host observed (nil: none was). Only the trusted
// host calls it (the scheduler does once it observed the process end).
func (c *Control) ConfirmStopped(ctx context.Context, executionID string, epoch int64, message string, exitCode *int) (storage.Execution, error) {
	var out storage.Execution
	err := c.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		out, err = c.rt.ConfirmStoppedInTx(ctx, tx, executionID, epoch, message, exitCode)
		return err
	})
	return out, err
}

// Retry accepts core.manual.retry for a Work and applies the retry policy
// (see RetryInTx).
func (c *Control) Retry(ctx context.Context, req ControlRequest) (ControlResult, error) {
	return c.control(ctx, TypeManualRetry, req.Target, "", req, func(tx storage.Tx, ev storage.Event, _ storage.Work) (ControlResult, error) {
		w, err := c.rt.RetryInTx(ctx, tx, req.Target, ev)
		return ControlResult{Work: w}, err
	})
}

// WakeRequest is an operator's wake: an ordinary event on an owned key.
type WakeRequest struct {
	Scope string
	// Key is the correlation key (a Work's id wakes that Work).
	Key string
	// Type defaults to core.manual.wake.
	Type       string
	Data       json.RawMessage
	DeliveryID string
}

// WakeResult reports whether the wake matched a Wait.
type WakeResult struct {
	Event    storage.Event
	Decision Decision
	Matched  bool
}

// Wake accepts an owned-key event from core.manual, routes it, and reports
// whether it satisfied a Wait.
func (c *Control) Wake(ctx context.Context, req WakeRequest) (WakeResult, error) {
	actor, err := ActorOf(ctx)
	if err != nil {
		return WakeResult{}, err
	}
	typ := req.Type
	if typ == "" {
		typ = TypeManualWake
	} else if IsCore(typ) {
		return WakeResult{}, Refuse(extension.ErrInvalid, ErrCoreTypeReserved.Code, "type %s is reserved for the host; wake with a type of your own or the default", typ)
	}
	if req.Key == "" {
		return WakeResult{}, Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "a wake names the key (or Work id) to wake")
	}
	var out WakeResult
	err = c.store.WithTx(ctx, func(tx storage.Tx) error {
		ev, err := c.rt.AcceptInTx(ctx, tx, storage.Event{
			Type: typ, Source: SourceManual, Scope: req.Scope, CorrelationKey: req.Key, Data: req.Data, Actor: actor, DeliveryID: req.DeliveryID,
		})
		if err != nil {
			return err
		}
		out.Event = ev
		if ev.Replayed {
			// The first request woke what it woke; report it from the
			// record.
			out.Decision, err = c.rt.decide(ctx, tx, ev)
			out.Matched = wokeBy(ctx, tx, ev.ID)
			if err != nil {
				return err
			}
			return recordResult(ctx, tx, out)
		}
		out.Decision, err = c.rt.Route(ctx, tx, ev)
		out.Matched = out.Decision.Woke()
		if err != nil {
			return err
		}
		return recordResult(ctx, tx, out)
	})
	return out, err
}

// wokeBy reports whether an event satisfied a Wait of the Work it names.
func wokeBy(ctx context.Context, rd storage.Reader, eventID string) bool {
	ev, err := rd.GetEvent(ctx, eventID)
	if err != nil {
		return false
	}
	owner, err := rd.GetKeyOwner(ctx, ev.Scope, ev.CorrelationKey)
	if err != nil {
		return false
	}
	waits, err := rd.ListWaits(ctx, &storage.ListWaitsParams{Work: owner.ID, State: storage.WaitSatisfied, Page: storage.Page{Desc: true, Limit: 10}})
	if err != nil {
		return false
	}
	for _, w := range waits {
		if w.SatisfiedBy == eventID {
			return true
		}
	}
	return false
}

// Trace answers how the router would handle a hypothetical event in scope
// now, reading the last committed state; nothing is accepted or recorded.
func (c *Control) Trace(ctx context.Context, ev storage.Event) (Decision, error) {
	return c.rt.Trace(ctx, c.store, ev)
}

// canonicalEqual reports whether two JSON values are the same in their
// canonical form (RFC 8785): member order and spacing do not matter.
func canonicalEqual(a, b []byte) bool {
	ca, cb := jsontext.Value(append([]byte(nil), a...)), jsontext.Value(append([]byte(nil), b...))
	if ca.Canonicalize() != nil || cb.Canonicalize() != nil {
		return false
	}
	return bytes.Equal(ca, cb)
}
