package kernel

import (
	"context"
	"errors"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The Work-level operator controls: hold and release, rebind and attach.
// Each accepts its core.manual.* control event (with the operator as its
// actor, about the Work, parented on its core.work.created) and changes
// the Work in the same transaction; a retry under the same delivery id
// returns the first result and changes nothing.

// HoldRequest is an operator's hold of a Work.
type HoldRequest struct {
	Target string
	// Reason is required: it becomes the hold's detail.
	Reason string
	// Stop fences and stops the Work's live attempt too, like an
	// execution cancel.
	Stop       bool
	DeliveryID string
}

// Hold holds a nonterminal Work that is not held (operator_held, with the
// reason as its detail): no new attempt starts, none is resumed, until
// Release (or Retry). A running attempt goes on, and its lease is still
// renewed and recovered, unless Stop: then the live attempt is fenced as by
// CancelExecution (a running one becomes stopping, a parked one finishes
// cancelled, the Wait ends and the Work is ready, held). Refused for a
// finished Work (work_state) and a held one (work_held).
func (c *Control) Hold(ctx context.Context, req HoldRequest) (ControlResult, error) {
	data := map[string]any{"work_id": req.Target, "reason": req.Reason, "stop": req.Stop}
	return c.controlData(ctx, TypeManualHold, req.Target, "", data, true, ControlRequest{Target: req.Target, Reason: req.Reason, DeliveryID: req.DeliveryID},
		func(tx storage.Tx, ev storage.Event, w storage.Work) (ControlResult, error) {
			// The request is checked once the Work is known to exist, so
			// that an unknown Work is work_not_found whatever the body.
			if req.Reason == "" {
				return ControlResult{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "a hold needs a reason: say why no attempt may start")
			}
			if err := checkText("reason", req.Reason, true); err != nil {
				return ControlResult{}, err
			}
			return c.rt.holdInTx(ctx, tx, w, req.Reason, req.Stop, ev)
		})
}

func (r *Runtime) holdInTx(ctx context.Context, tx storage.Tx, w storage.Work, reason string, stop bool, control storage.Event) (ControlResult, error) {
	if w.State.Terminal() {
		return ControlResult{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s has already %s; there is nothing to hold", w.ID, w.State)
	}
	if w.Held() {
		return ControlResult{}, Refuse(extension.ErrConflict, ErrWorkHeld.Code, "Work %s is already held (%s, by the %s); release or retry it first", w.ID, w.BlockedReason, HoldBy(w.BlockedReason))
	}
	hold, now := HoldOperator, r.clock.Now()
	p := &storage.UpdateWorkParams{
		ID: w.ID, FromStates: []storage.WorkState{w.State}, Revision: w.Revision, BlockedReason: &hold, BlockedDetail: &reason, Now: now,
	}
	var out ControlResult
	if stop {
		live, err := tx.GetLiveExecution(ctx, w.ID)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return ControlResult{}, err
		}
		if err == nil && live.State != storage.ExecutionStopping {
			if out.Execution, err = r.fenceExecutionInTx(ctx, tx, live, "stopped by the hold of "+actorOr(control.Actor)); err != nil {
				return ControlResult{}, err
			}
			if err := r.cancelActiveWait(ctx, tx, w.ID); err != nil {
				return ControlResult{}, err
			}
			ready := storage.WorkReady
			p.State = &ready
		}
	}
	var err error
	out.Work, err = tx.UpdateWork(ctx, p)
	return out, err
}

// Release lifts an operator's hold (operator_held, or the
// operator_cancelled an execution cancel left): the Work may be claimed,
// resumed or recovered again, in the state it is in. Nothing is queued as
// its input. A system hold is refused (system_hold): its cause must be
// fixed first and the Work retried; a Work that is not held is refused
// too (not_held).
func (c *Control) Release(ctx context.Context, req ControlRequest) (ControlResult, error) {
	return c.controlData(ctx, TypeManualRelease, req.Target, "", map[string]any{"work_id": req.Target, "reason": req.Reason}, true, req,
		func(tx storage.Tx, ev storage.Event, w storage.Work) (ControlResult, error) {
			switch HoldBy(w.BlockedReason) {
			case "":
				return ControlResult{}, Refuse(extension.ErrConflict, ErrNotHeld.Code, "Work %s is %s and not held; there is nothing to release", w.ID, w.State)
			case HoldBySystem:
				return ControlResult{}, Refuse(extension.ErrConflict, ErrSystemHold.Code, "Work %s is held by the system (%s); fix the cause, then retry it: open-conduit work retry %s", w.ID, w.BlockedReason, w.ID)
			}
			empty := ""
			nw, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{
				ID: w.ID, FromStates: storage.NonterminalWorkStates, Revision: w.Revision, BlockedReason: &empty, BlockedDetail: &empty, Now: c.rt.clock.Now(),
			})
			return ControlResult{Work: nw}, err
		})
}

// RebindRequest moves a Work to another binding of its scope.
type RebindRequest struct {
	Target  string
	Binding string
	// Grants replace the Work's grants when set; nil keeps them. Either
	// way each must be a grant of the new binding.
	Grants     []string
	Reason     string
	DeliveryID string
}

// Rebind moves a Work with no live attempt (none running, stopping or
// parked: attempt_live) to another binding of its scope in the active
// generation (scope_inactive, unknown_binding, unknown_grant), so that its
// next attempt runs there with that binding's grants. A succeeded Work is
// refused (work_state); a failed or cancelled one is moved, for a retry to
// start it there. A binding_unavailable hold is lifted, since its binding
// is no longer the Work's; any other hold stays. Rebinding to the binding
// and grants the Work has is refused (invalid_work).
func (c *Control) Rebind(ctx context.Context, req RebindRequest) (ControlResult, error) {
	data := map[string]any{"work_id": req.Target, "binding": req.Binding, "grants": req.Grants, "reason": req.Reason}
	return c.controlData(ctx, TypeManualRebind, req.Target, "", data, true, ControlRequest{Target: req.Target, Reason: req.Reason, DeliveryID: req.DeliveryID},
		func(tx storage.Tx, ev storage.Event, w storage.Work) (ControlResult, error) {
			if req.Binding == "" {
				return ControlResult{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "a rebind names the binding to move the Work to")
			}
			if w.State == storage.WorkSucceeded {
				return ControlResult{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s succeeded; create a new Work instead of moving it", w.ID)
			}
			live, err := tx.GetLiveExecution(ctx, w.ID)
			if err == nil {
				return ControlResult{}, Refuse(extension.ErrConflict, ErrAttemptLive.Code, "Work %s has a live attempt (execution %s is %s); wait for it to end or cancel it first: open-conduit execution cancel %s", w.ID, live.ID, live.State, live.ID)
			}
			if !errors.Is(err, storage.ErrNotFound) {
				return ControlResult{}, err
			}
			grants := w.Grants
			if req.Grants != nil {
				grants = dedupe(req.Grants)
			}
			grants = nonNil(grants)
			if _, err := WorkBinding(ctx, c.scopes, 0, w.Scope, req.Binding, grants); err != nil {
				return ControlResult{}, err
			}
			if req.Binding == w.Binding && sameSet(grants, w.Grants) {
				return ControlResult{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "Work %s is already on binding %s with those grants; there is nothing to move", w.ID, w.Binding)
			}
			p := &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{w.State}, Revision: w.Revision, Binding: &req.Binding, Grants: &grants, Now: c.rt.clock.Now()}
			if w.BlockedReason == HoldBindingUnavailable {
				empty := ""
				p.BlockedReason, p.BlockedDetail = &empty, &empty
			}
			nw, err := tx.UpdateWork(ctx, p)
			return ControlResult{Work: nw}, err
		})
}

// AttachRequest gives a Work an accepted Event as input, a correlation
// key, or both.
type AttachRequest struct {
	Target string
	// Event is an accepted Event of the Work's scope to queue as its input.
	Event string
	// Key is a correlation key for the Work to own.
	Key        string
	Reason     string
	DeliveryID string
}

// Attach queues an accepted Event as a nonterminal Work's input, as a
// route's queue would (a waiting Work is not woken by it: wake it, or let
// its Wait be satisfied), and/or gives the Work ownership of a correlation
// key, so that later Events on it route to the Work. Refused: an unknown
// Event (event_not_found), one of another scope (invalid_work), one that
// is already its input (already_input), a key another nonterminal Work owns
// (key_taken), a key the Work owns already or another Work's id
// (invalid_work), and a finished Work (work_state).
func (c *Control) Attach(ctx context.Context, req AttachRequest) (ControlResult, error) {
	data := map[string]any{"work_id": req.Target, "event_id": req.Event, "correlation_key": req.Key, "reason": req.Reason}
	return c.controlData(ctx, TypeManualAttach, req.Target, "", data, true, ControlRequest{Target: req.Target, Reason: req.Reason, DeliveryID: req.DeliveryID},
		func(tx storage.Tx, ev storage.Event, w storage.Work) (ControlResult, error) {
			if req.Event == "" && req.Key == "" {
				return ControlResult{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "an attach names an event to queue, a correlation key to own, or both")
			}
			if req.Key != "" {
				if err := checkText("correlation key", req.Key, true); err != nil {
					return ControlResult{}, err
				}
			}
			if w.State.Terminal() {
				return ControlResult{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s has already %s; retry it first to give it more", w.ID, w.State)
			}
			if req.Key != "" {
				if err := c.rt.attachKeyInTx(ctx, tx, w, req.Key); err != nil {
					return ControlResult{}, err
				}
			}
			if req.Event != "" {
				if err := c.rt.attachEventInTx(ctx, tx, w, req.Event); err != nil {
					return ControlResult{}, err
				}
			}
			nw, err := tx.GetWork(ctx, w.ID)
			return ControlResult{Work: nw}, err
		})
}

func (r *Runtime) attachKeyInTx(ctx context.Context, tx storage.Tx, w storage.Work, key string) error {
	owner, err := tx.GetKeyOwner(ctx, w.Scope, key)
	switch {
	case err == nil && owner.ID == w.ID:
		return Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "Work %s owns correlation key %q already", w.ID, key)
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return err
	}
	if other, err := tx.GetWork(ctx, key); err == nil && other.ID != w.ID {
		return Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "correlation key %q is the id of Work %s, which is that Work's own key", key, other.ID)
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return r.acquireKeys(ctx, tx, w, []string{key})
}

func (r *Runtime) attachEventInTx(ctx context.Context, tx storage.Tx, w storage.Work, eventID string) error {
	ev, err := tx.GetEvent(ctx, eventID)
	if errors.Is(err, storage.ErrNotFound) {
		return Refuse(extension.ErrNotFound, ErrEventNotFound.Code, "event %s does not exist; name an accepted event", clip(eventID))
	}
	if err != nil {
		return err
	}
	if ev.Scope != w.Scope {
		return Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "event %s is of scope %s; Work %s takes input of its own scope %s only", ev.ID, ev.Scope, w.ID, w.Scope)
	}
	in, err := r.QueueInputInTx(ctx, tx, w.ID, ev.ID)
	if err != nil {
		return err
	}
	if in.Position <= w.InputCount {
		return Refuse(extension.ErrConflict, ErrAlreadyInput.Code, "event %s is already input %d of Work %s", ev.ID, in.Position, w.ID)
	}
	return nil
}
