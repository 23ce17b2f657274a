package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Hold reasons the kernel sets. A held Work is not started, resumed or
// recovered until a retry clears the hold.
const (
	HoldOperatorCancelled  = "operator_cancelled"
	HoldSecretUnavailable  = "secret_unavailable"
	HoldAttemptLost        = "attempt_lost"
	HoldBindingUnavailable = "binding_unavailable"
	HoldToolbeltFailed     = "toolbelt_unavailable"
	// HoldOperator is an operator's hold (Control.Hold); only it is
	// lifted by Control.Release.
	HoldOperator = "operator_held"
)

// Who set a hold (HoldBy).
const (
	HoldByOperator = "operator"
	HoldBySystem   = "system"
)

// HoldBy says who set a hold of the given blocked reason: an operator
// (operator_held, operator_cancelled) or the system (any other reason:
// secret_unavailable, attempt_lost, binding_unavailable, a start gate's…);
// "" for a Work that is not held.
func HoldBy(reason string) string {
	switch reason {
	case "":
		return ""
	case HoldOperator, HoldOperatorCancelled:
		return HoldByOperator
	}
	return HoldBySystem
}

// NewWork describes a Work to create.
type NewWork struct {
	// ID is the Work's id; empty for a fresh one. A caller that derives it
	// (from an idempotency key or a request id) gets the existing Work
	// back when it retries.
	ID      string
	Scope   string
	Binding string
	// Parent is the Work that creates this one ("" for none).
	Parent string
	// Keys are correlation keys the Work owns besides its own id.
	Keys []string
	// Grants are the binding grants the Work takes.
	Grants []string
	// Cause is the event that caused the creation; "" makes the
	// core.work.created a root.
	Cause string
	// Causal, when set, applies causal bounds to the core.work.created
	// derived from Cause (a route start, an execution's create_work).
	Causal *CausalLimits
	// Source of the core.work.created: SourceHost (default) or
	// SourceManual for an operator, with Actor.
	Source string
	Actor  string
	// Execution that asked for it (create_work), recorded on the event.
	Execution string
	// CreatedEventID is the id of the core.work.created ("" for fresh).
	CreatedEventID string
	// Input, when set, is an accepted event queued as the first input.
	Input string
	// InputCreated queues the Work's own core.work.created as its first
	// input (Input is not used then).
	InputCreated bool
	// AssumeNew skips reading the Work under ID before creating it: the
	// caller has seen nothing of it (a fresh Idempotency-Key) and can run
	// its transaction again. Should the Work exist after all, the
	// transaction fails with an error matching storage.ErrDuplicate (at
	// the insert, or as late as the end of the caller's function, as
	// storage.InsertWorkParams.Assumed allows), and the caller runs it
	// again without AssumeNew, which finds the Work and answers as a
	// retried request. One read fewer on every first creation is a round
	// trip of the writer on PostgreSQL.
	AssumeNew bool
}

// WorkCreated is a created (or, on a retried request, the existing) Work.
type WorkCreated struct {
	Work    storage.Work
	Created storage.Event
	// Replayed: the Work existed already under the derived ID.
	Replayed bool
}

// CreateWorkInTx creates a ready Work and its core.work.created in tx: the
// Work owns its own id and Keys as correlation keys (refused with key_taken
// when another nonterminal Work owns one), takes Grants, and has Input
// queued. A Work that already exists under nw.ID is returned as it is.
func (r *Runtime) CreateWorkInTx(ctx context.Context, tx storage.Tx, nw NewWork) (WorkCreated, error) {
	if err := checkText("scope", nw.Scope, true); err != nil {
		return WorkCreated{}, err
	}
	if nw.Binding == "" {
		return WorkCreated{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "a Work needs a binding")
	}
	for _, k := range nw.Keys {
		if err := checkText("correlation key", k, true); err != nil {
			return WorkCreated{}, err
		}
	}
	if nw.ID != "" && !nw.AssumeNew {
		w, err := tx.GetWork(ctx, nw.ID)
		if err == nil {
			created, err := tx.GetEvent(ctx, w.CreatedEvent)
			if err != nil {
				return WorkCreated{}, err
			}
			if !sameWork(w, created, nw) {
				return WorkCreated{}, Refuse(extension.ErrConflict, ErrWorkConflict.Code, "Work %s was created by a request with another scope, binding, parent, correlation key or grants; this identity (Idempotency-Key) was used for a different request: use a new one", nw.ID)
			}
			return WorkCreated{Work: w, Created: created, Replayed: true}, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return WorkCreated{}, err
		}
	} else if nw.ID == "" {
		nw.ID = r.ids.New(ids.Work)
	}
	if nw.Parent != "" {
		parent, err := tx.GetWork(ctx, nw.Parent)
		if errors.Is(err, storage.ErrNotFound) {
			return WorkCreated{}, Refuse(extension.ErrInvalid, ErrWorkNotFound.Code, "parent Work %s does not exist", nw.Parent)
		} else if err != nil {
			return WorkCreated{}, err
		}
		if parent.Scope != nw.Scope {
			return WorkCreated{}, Refuse(extension.ErrInvalid, ErrInvalidWork.Code, "a child Work is created in its parent's scope %s", parent.Scope)
		}
	}
	source := nw.Source
	if source == "" {
		source = SourceHost
	}
	keys := dedupe(append([]string{nw.ID}, nw.Keys...))
	data, _ := json.Marshal(map[string]any{
		"work_id": nw.ID, "binding": nw.Binding, "parent_work": nw.Parent, "keys": keys, "grants": nonNil(nw.Grants),
	})
	ev := storage.Event{
		ID: nw.CreatedEventID, Type: TypeWorkCreated, Source: source, Scope: nw.Scope, Work: nw.ID,
		Execution: nw.Execution, CorrelationKey: nw.ID, Data: data, Parent: nw.Cause, Actor: nw.Actor,
	}
	var created storage.Event
	var err error
	if nw.Cause != "" && nw.Causal != nil {
		created, err = r.AcceptDerivedInTx(ctx, tx, ev, *nw.Causal)
	} else {
		created, err = r.AcceptInTx(ctx, tx, ev)
	}
	if err != nil {
		return WorkCreated{}, err
	}
	input := nw.Input
	if nw.InputCreated {
		input = created.ID
	}
	// The first input goes in with the Work (InsertWorkParams.Input).
	w, err := tx.InsertWork(ctx, &storage.InsertWorkParams{
		ID: nw.ID, Scope: nw.Scope, Binding: nw.Binding, State: storage.WorkReady, Parent: nw.Parent,
		CreatedEvent: created.ID, Grants: nonNil(nw.Grants), CreatedAt: r.clock.Now(), Input: input, OwnKey: true,
		Assumed: nw.AssumeNew,
	})
	if err != nil {
		return WorkCreated{}, err
	}
	if err := r.acquireKeys(ctx, tx, w, keys); err != nil {
		return WorkCreated{}, err
	}
	return WorkCreated{Work: w, Created: created}, nil
}

// sameWork reports whether the existing Work w, created by created, is
// the one nw asks for: the same scope, parent, binding, keys and grants as
// its core.work.created recorded (the binding and grants the Work was
// created with, whatever a rebind changed since).
func sameWork(w storage.Work, created storage.Event, nw NewWork) bool {
	var rec struct {
		Binding string   `json:"binding"`
		Parent  string   `json:"parent_work"`
		Keys    []string `json:"keys"`
		Grants  []string `json:"grants"`
	}
	if err := json.Unmarshal(created.Data, &rec); err != nil {
		return false
	}
	return w.Scope == nw.Scope && rec.Binding == nw.Binding && rec.Parent == nw.Parent &&
		sameSet(rec.Keys, append([]string{nw.ID}, nw.Keys...)) && sameSet(rec.Grants, nw.Grants)
}

// sameSet reports whether a and b hold the same strings, ignoring order
// and repeats.
func sameSet(a, b []string) bool {
	a, b = dedupe(a), dedupe(b)
	if len(a) != len(b) {
		return false
	}
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (r *Runtime) acquireKeys(ctx context.Context, tx storage.Tx, w storage.Work, keys []string) error {
	for _, k := range keys {
		err := tx.AcquireKey(ctx, &storage.AcquireKeyParams{Scope: w.Scope, Key: k, Work: w.ID, At: r.clock.Now()})
		if errors.Is(err, storage.ErrDuplicate) {
			owner, _ := tx.GetKeyOwner(ctx, w.Scope, k)
			return Refuse(extension.ErrConflict, ErrKeyTaken.Code, "correlation key %q is owned by Work %s, which has not finished; correlate with another key or wait for it to finish", k, owner.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// QueueInputInTx queues an accepted event as input of a Work (at most once
// per Work and event).
func (r *Runtime) QueueInputInTx(ctx context.Context, tx storage.Tx, workID, eventID string) (storage.Input, error) {
	return tx.QueueInput(ctx, &storage.QueueInputParams{Work: workID, Event: eventID, At: r.clock.Now()})
}

// HoldInTx holds a nonterminal Work with reason and a short, safe detail.
func (r *Runtime) HoldInTx(ctx context.Context, tx storage.Tx, workID, reason, detail string) (storage.Work, error) {
	return tx.UpdateWork(ctx, &storage.UpdateWorkParams{
		ID: workID, FromStates: storage.NonterminalWorkStates, BlockedReason: &reason, BlockedDetail: &detail, Now: r.clock.Now(),
	})
}

// Finish describes how a Work ends.
type Finish struct {
	State   storage.WorkState
	Message string
	Data    json.RawMessage
	// Cause is the event that ended it ("" uses the Work's
	// core.work.created as the parent of core.work.finished).
	Cause string
}

// FinishWorkInTx ends a nonterminal Work: it sets the terminal state and
// outcome, releases its keys, cancels its active Wait, and accepts and
// routes core.work.finished, correlated by the Work's id so that a parent
// (which subscribes on its children's ids) or anyone naming the id can wait
// on it.
func (r *Runtime) FinishWorkInTx(ctx context.Context, tx storage.Tx, workID string, f Finish) (storage.Work, storage.Event, error) {
	if !f.State.Terminal() {
		return storage.Work{}, storage.Event{}, fmt.Errorf("kernel: %s is not a terminal state", f.State)
	}
	now := r.clock.Now()
	empty := ""
	data := f.Data
	w, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{
		ID: workID, FromStates: storage.NonterminalWorkStates, State: &f.State, OutcomeMessage: &f.Message,
		OutcomeData: &data, BlockedReason: &empty, BlockedDetail: &empty, WaitReason: &empty, Now: now,
	})
	if errors.Is(err, storage.ErrFenced) {
		return storage.Work{}, storage.Event{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s has already finished", workID)
	}
	if err != nil {
		return storage.Work{}, storage.Event{}, err
	}
	if err := tx.ReleaseKeys(ctx, workID, now); err != nil {
		return storage.Work{}, storage.Event{}, err
	}
	if err := r.cancelActiveWait(ctx, tx, workID); err != nil {
		return storage.Work{}, storage.Event{}, err
	}
	cause := f.Cause
	if cause == "" {
		cause = w.CreatedEvent
	}
	payload := map[string]any{"work_id": w.ID, "parent_work": w.Parent, "state": w.State, "message": f.Message}
	if len(f.Data) > 0 {
		payload["data"] = f.Data
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return storage.Work{}, storage.Event{}, fmt.Errorf("kernel: outcome data: %w", err)
	}
	ev, err := r.AcceptInTx(ctx, tx, storage.Event{
		Type: TypeWorkFinished, Source: SourceHost, Scope: w.Scope, Work: w.ID, CorrelationKey: w.ID, Data: body, Parent: cause,
	})
	if err != nil {
		return storage.Work{}, storage.Event{}, err
	}
	if _, err := r.Route(ctx, tx, ev); err != nil {
		return storage.Work{}, storage.Event{}, err
	}
	return w, ev, nil
}

func (r *Runtime) cancelActiveWait(ctx context.Context, tx storage.Tx, workID string) error {
	wt, err := tx.GetActiveWait(ctx, workID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: wt.ID, State: storage.WaitCancelled, Now: r.clock.Now()})
	return err
}

// CancelWorkInTx cancels a nonterminal Work in one transaction: the control
// event (core.work.cancelled, not routed), fencing of its live attempt (a
// running one becomes stopping at its epoch, so that no call, renewal or
// completion of that epoch is accepted and the host stops the process; a
// parked one finishes cancelled), the end of its Wait, and the Work's
// cancelled end with core.work.finished. control is the accepted control
// event.
func (r *Runtime) CancelWorkInTx(ctx context.Context, tx storage.Tx, workID string, control storage.Event) (storage.Work, error) {
	w, err := tx.GetWork(ctx, workID)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Work{}, Refuse(extension.ErrNotFound, ErrWorkNotFound.Code, "Work %s does not exist", workID)
	}
	if err != nil {
		return storage.Work{}, err
	}
	if w.State.Terminal() {
		return storage.Work{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s has already %s", workID, w.State)
	}
	if _, err := r.fenceLiveInTx(ctx, tx, workID, "cancelled with its Work by "+actorOr(control.Actor)); err != nil {
		return storage.Work{}, err
	}
	w, _, err = r.FinishWorkInTx(ctx, tx, workID, Finish{State: storage.WorkCancelled, Message: "cancelled by " + actorOr(control.Actor), Cause: control.ID})
	return w, err
}

func actorOr(a string) string {
	if a == "" {
		return "the host"
	}
	return a
}

// fenceLiveInTx fences the Work's live execution, if any.
func (r *Runtime) fenceLiveInTx(ctx context.Context, tx storage.Tx, workID, why string) (storage.Execution, error) {
	exe, err := tx.GetLiveExecution(ctx, workID)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Execution{}, nil
	}
	if err != nil {
		return storage.Execution{}, err
	}
	return r.fenceExecutionInTx(ctx, tx, exe, why)
}

func (r *Runtime) fenceExecutionInTx(ctx context.Context, tx storage.Tx, exe storage.Execution, why string) (storage.Execution, error) {
	now := r.clock.Now()
	switch exe.State {
	case storage.ExecutionRunning:
		st := storage.ExecutionStopping
		return tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: exe.ID, Epoch: exe.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionRunning}, State: &st, Message: &why, Now: now,
		})
	case storage.ExecutionParked:
		st, res := storage.ExecutionFinished, storage.ResultCancelled
		fin, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: exe.ID, Epoch: exe.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionParked}, State: &st, Result: &res, Message: &why, Now: now,
		})
		if err != nil {
			return fin, err
		}
		return fin, storage.RevokeFinishedTokens(ctx, tx, fin, now)
	}
	return exe, nil
}

// CancelExecutionInTx fences one attempt and holds its Work with
// operator_cancelled until a manual retry. A running attempt becomes
// stopping (ConfirmStoppedInTx records the physical stop); a parked one
// finishes cancelled and the Work's Wait ends.
func (r *Runtime) CancelExecutionInTx(ctx context.Context, tx storage.Tx, executionID string, control storage.Event) (storage.Execution, storage.Work, error) {
	exe, err := tx.GetExecution(ctx, executionID)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Execution{}, storage.Work{}, Refuse(extension.ErrNotFound, ErrExecutionNotFound.Code, "execution %s does not exist", executionID)
	}
	if err != nil {
		return storage.Execution{}, storage.Work{}, err
	}
	if exe.State != storage.ExecutionRunning && exe.State != storage.ExecutionParked {
		return storage.Execution{}, storage.Work{}, Refuse(extension.ErrConflict, ErrExecutionState.Code, "execution %s is %s; only a running or parked attempt can be cancelled", executionID, exe.State)
	}
	exe, err = r.fenceExecutionInTx(ctx, tx, exe, "cancelled by "+actorOr(control.Actor))
	if err != nil {
		return storage.Execution{}, storage.Work{}, err
	}
	if err := r.cancelActiveWait(ctx, tx, exe.Work); err != nil {
		return storage.Execution{}, storage.Work{}, err
	}
	ready, reason := storage.WorkReady, HoldOperatorCancelled
	detail := "an operator cancelled execution " + exe.ID + "; retry the Work to start a new attempt"
	w, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{
		ID: exe.Work, FromStates: storage.NonterminalWorkStates, State: &ready, BlockedReason: &reason, BlockedDetail: &detail, Now: r.clock.Now(),
	})
	if errors.Is(err, storage.ErrFenced) {
		// The Work already ended; the attempt is fenced all the same.
		w, err = tx.GetWork(ctx, exe.Work)
	}
	return exe, w, err
}

// ConfirmStoppedInTx records that the process of a stopping attempt is
// gone: the execution finishes cancelled. Only the trusted host calls it,
// after it observed the stop. The message says how it ended and is added
// to the one the fence left (who cancelled it); exitCode is the exit code
// the executor observed, nil when the host saw the process gone without
// it (the record then shows none rather than a made-up 0).
func (r *Runtime) ConfirmStoppedInTx(ctx context.Context, tx storage.Tx, executionID string, epoch int64, message string, exitCode *int) (storage.Execution, error) {
	cur, err := tx.GetExecution(ctx, executionID)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Execution{}, Refuse(extension.ErrNotFound, ErrExecutionNotFound.Code, "execution %s does not exist", executionID)
	}
	if err != nil {
		return storage.Execution{}, err
	}
	if message == "" {
		message = "stopped"
	}
	if cur.Message != "" {
		message = cur.Message + "; " + message
	}
	st, res, now := storage.ExecutionFinished, storage.ResultCancelled, r.clock.Now()
	exe, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
		ID: executionID, Epoch: epoch, FromStates: []storage.ExecutionState{storage.ExecutionStopping}, State: &st, Result: &res, Message: &message,
		ExitCode: exitCode, Now: now,
	})
	if errors.Is(err, storage.ErrFenced) {
		return storage.Execution{}, Refuse(extension.ErrConflict, ErrExecutionState.Code, "execution %s is not stopping at epoch %d", executionID, epoch)
	}
	if err != nil {
		return exe, err
	}
	return exe, storage.RevokeFinishedTokens(ctx, tx, exe, now)
}

// RetryInTx applies the retry policy to a Work, given the accepted
// core.manual.retry event, which is queued as the Work's input when the
// retry asks for a new attempt:
//
//   - a held Work (any blocked reason) is released: the scheduler starts,
//     resumes or recovers it again. A held Work that is still running
//     (recovery could not adopt its attempt, whose process may still
//     run) is released for recovery to adopt that same attempt: the
//     retry starts nothing, so it is not queued as an input (an input
//     queued after the attempt's watermark would make the Work go on
//     once the adopted attempt ends, and run its command again);
//   - a failed or cancelled Work becomes ready again, taking back every key
//     it owned (refused with key_taken when another Work took one since);
//     its next attempt is a new execution;
//   - a succeeded Work is not retried, and a Work that is neither held nor
//     failed or cancelled has nothing to retry (work_state).
//
// The kernel never retries on its own: a failed attempt fails its Work.
func (r *Runtime) RetryInTx(ctx context.Context, tx storage.Tx, workID string, control storage.Event) (storage.Work, error) {
	w, err := tx.GetWork(ctx, workID)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Work{}, Refuse(extension.ErrNotFound, ErrWorkNotFound.Code, "Work %s does not exist", workID)
	}
	if err != nil {
		return storage.Work{}, err
	}
	now, empty := r.clock.Now(), ""
	switch {
	case w.State == storage.WorkSucceeded:
		return storage.Work{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s succeeded and is not retried; create a new Work instead", workID)
	case w.State == storage.WorkFailed || w.State == storage.WorkCancelled:
		keys, err := tx.ListKeysEverOwned(ctx, workID)
		if err != nil {
			return storage.Work{}, err
		}
		sort.Strings(keys)
		ready := storage.WorkReady
		var none json.RawMessage
		w, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{
			ID: workID, FromStates: []storage.WorkState{w.State}, Revision: w.Revision, State: &ready,
			BlockedReason: &empty, BlockedDetail: &empty, OutcomeMessage: &empty, OutcomeData: &none, Now: now,
		})
		if err != nil {
			return storage.Work{}, err
		}
		if err := r.acquireKeys(ctx, tx, w, keys); err != nil {
			return storage.Work{}, err
		}
	case w.Held():
		w, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{
			ID: workID, Revision: w.Revision, BlockedReason: &empty, BlockedDetail: &empty, Now: now,
		})
		if err != nil {
			return storage.Work{}, err
		}
		if w.State == storage.WorkRunning {
			return w, nil
		}
	default:
		return storage.Work{}, Refuse(extension.ErrConflict, ErrWorkState.Code, "Work %s is %s and not held; there is nothing to retry", workID, w.State)
	}
	if _, err := r.QueueInputInTx(ctx, tx, workID, control.ID); err != nil {
		return storage.Work{}, err
	}
	return tx.GetWork(ctx, workID)
}
