package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Bounds of a wait.
const (
	MaxWaitTimeout = 30 * 24 * time.Hour
	MaxWaitNames   = 64
)

// WaitSpec is a declared wait: what wakes the Work. Types empty means any
// type; Keys empty subscribes on the Work's keys (the keys it owns, its own
// id among them, and the ids of its child Work). Watermark 0 defaults to
// the attempt's acknowledged input.
type WaitSpec struct {
	Types        []string      `json:"types,omitempty"`
	Keys         []string      `json:"keys,omitempty"`
	Timeout      time.Duration `json:"timeout,omitempty"`
	Watermark    int64         `json:"watermark,omitempty"`
	Registration string        `json:"registration,omitempty"`
}

// Check validates a wait spec.
func (s WaitSpec) Check() error {
	if len(s.Types) > MaxWaitNames || len(s.Keys) > MaxWaitNames {
		return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "a wait names at most %d types and %d keys", MaxWaitNames, MaxWaitNames)
	}
	for _, t := range s.Types {
		if err := checkName("type", t, 2); err != nil {
			return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "wait type %q is not a namespaced lower-case event type", t)
		}
	}
	for _, k := range s.Keys {
		if err := checkText("correlation key", k, true); err != nil {
			return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "a wait key is empty, too long or has control characters")
		}
	}
	if s.Timeout < 0 || s.Timeout > MaxWaitTimeout {
		return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "a wait timeout is between 0 (none) and %s", MaxWaitTimeout)
	}
	if s.Watermark < 0 {
		return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "a wait watermark is an acceptance sequence number, not negative")
	}
	return nil
}

// RegisterWait is a Wait to register for a Work.
type RegisterWait struct {
	Work      string
	Execution string
	Epoch     int64
	Spec      WaitSpec
	// DefaultWatermark applies when Spec.Watermark is 0.
	DefaultWatermark int64
	// DeclaredAt starts the timeout.
	DeclaredAt time.Time
}

// RegisterWaitInTx registers the Wait and arms its timeout timer in tx,
// then backscans the events accepted since the watermark: when one already
// satisfies the Wait, it is satisfied at once (the event is queued and a
// waiting Work becomes ready). It returns the Wait as it ends up.
func (r *Runtime) RegisterWaitInTx(ctx context.Context, tx storage.Tx, rw RegisterWait) (storage.Wait, error) {
	if err := rw.Spec.Check(); err != nil {
		return storage.Wait{}, err
	}
	w, err := tx.GetWork(ctx, rw.Work)
	if err != nil {
		return storage.Wait{}, err
	}
	watermark := rw.Spec.Watermark
	if watermark == 0 {
		watermark = rw.DefaultWatermark
	}
	now := r.clock.Now()
	start := rw.DeclaredAt
	if start.IsZero() {
		start = now
	}
	waitID := r.ids.New(ids.Wait)
	var timerID string
	var due time.Time
	if rw.Spec.Timeout > 0 {
		timerID, due = r.ids.New(ids.Timer), start.Add(rw.Spec.Timeout)
		if err := tx.InsertTimer(ctx, &storage.Timer{ID: timerID, Kind: storage.TimerWaitTimeout, Target: waitID, DueAt: due, CreatedAt: now}); err != nil {
			return storage.Wait{}, err
		}
	}
	wait, err := tx.InsertWait(ctx, &storage.InsertWaitParams{
		ID: waitID, Work: w.ID, Scope: w.Scope, Execution: rw.Execution, Epoch: rw.Epoch, Registration: rw.Spec.Registration,
		Types: rw.Spec.Types, Keys: rw.Spec.Keys, OnWorkKeys: len(rw.Spec.Keys) == 0, Watermark: watermark,
		Timer: timerID, TimeoutAt: due, CreatedAt: now,
	})
	if err != nil {
		return storage.Wait{}, err
	}
	ev, found, err := r.backscan(ctx, tx, wait)
	if err != nil || !found {
		return wait, err
	}
	if err := r.wakeInTx(ctx, tx, wait.ID, ev); err != nil {
		return storage.Wait{}, err
	}
	return tx.GetWait(ctx, wait.ID)
}

// backscan finds the first event accepted after the Wait's watermark that
// satisfies it.
func (r *Runtime) backscan(ctx context.Context, rd storage.Reader, w storage.Wait) (storage.Event, bool, error) {
	keys := w.Keys
	if w.OnWorkKeys {
		owned, err := rd.ListWorkKeys(ctx, w.Work)
		if err != nil {
			return storage.Event{}, false, err
		}
		keys = append(keys, owned...)
		after := (*storage.Position)(nil)
		for {
			children, err := rd.ListWork(ctx, &storage.ListWorkParams{Parent: w.Work, Page: storage.Page{After: after, Limit: storage.MaxLimit}})
			if err != nil {
				return storage.Event{}, false, err
			}
			for _, c := range children {
				keys = append(keys, c.ID)
			}
			if len(children) < storage.MaxLimit {
				break
			}
			last := children[len(children)-1]
			after = &storage.Position{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}
	if len(keys) == 0 {
		return storage.Event{}, false, nil
	}
	afterSeq := w.Watermark
	for {
		ev, err := rd.FindEvent(ctx, &storage.FindEventParams{Scope: w.Scope, AfterSeq: afterSeq, Types: w.Types, Keys: keys})
		if errors.Is(err, storage.ErrNotFound) {
			return storage.Event{}, false, nil
		}
		if err != nil {
			return storage.Event{}, false, err
		}
		ok, _, err := r.satisfies(ctx, rd, w, ev)
		if err != nil {
			return storage.Event{}, false, err
		}
		if ok {
			return ev, true, nil
		}
		afterSeq = ev.Seq
	}
}

// TimeoutWaitInTx fires a wait's timeout: an active Wait times out, the
// host accepts core.wait.timed_out (correlated by the Work's id) and queues
// it as the Work's input, and a waiting Work becomes ready. A Wait that is
// no longer active is left alone (reported false).
func (r *Runtime) TimeoutWaitInTx(ctx context.Context, tx storage.Tx, waitID string) (bool, error) {
	w, err := tx.GetWait(ctx, waitID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if w.State != storage.WaitActive {
		return false, nil
	}
	work, err := tx.GetWork(ctx, w.Work)
	if err != nil {
		return false, err
	}
	body, _ := json.Marshal(map[string]any{"wait_id": w.ID, "work_id": w.Work, "timeout_at": w.TimeoutAt})
	ev, err := r.AcceptInTx(ctx, tx, storage.Event{
		Type: TypeWaitTimedOut, Source: SourceHost, Scope: w.Scope, Work: w.Work, CorrelationKey: w.Work, Data: body, Parent: work.CreatedEvent,
	})
	if err != nil {
		return false, err
	}
	now := r.clock.Now()
	if _, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: w.ID, State: storage.WaitTimedOut, SatisfiedBy: ev.ID, Now: now}); err != nil {
		return false, err
	}
	if _, err := r.QueueInputInTx(ctx, tx, w.Work, ev.ID); err != nil {
		return false, err
	}
	ready, none := storage.WorkReady, ""
	if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.Work, FromStates: []storage.WorkState{storage.WorkWaiting}, State: &ready, WaitReason: &none, Now: now}); err != nil && !errors.Is(err, storage.ErrFenced) {
		return false, err
	}
	return true, nil
}

// StartWait parks a ready Work before its first attempt: a start gate's
// plan.
type StartWait struct {
	Work string
	// Revision fences the Work: it is parked only if it has not changed
	// since the gate was asked.
	Revision int64
	// Spec is the plan's wait, owned by the gating registration
	// (Spec.Registration).
	Spec WaitSpec
	// Watermark is the acceptance sequence of the last event the gate was
	// shown (the Work's core.work.created or its last input): registration
	// backscans every event accepted after it.
	Watermark int64
	// Reason is shown on the waiting Work (storage.Work.WaitReason).
	Reason string
}

// StartWaitInTx parks a ready, unheld Work that has no attempt on a start
// gate's plan, in tx: the Work waits with the reason, and the Wait is
// registered (no execution, epoch 0) with its timeout armed, like a
// declared wait (RegisterWaitInTx, whose backscan may wake it at once).
// A Work that moved since it was read is storage.ErrFenced (the caller's
// transaction then rolls back). The reason is the caller's, already safe
// and short.
func (r *Runtime) StartWaitInTx(ctx context.Context, tx storage.Tx, sw StartWait) (storage.Wait, error) {
	if err := sw.Spec.Check(); err != nil {
		return storage.Wait{}, err
	}
	waiting := storage.WorkWaiting
	w, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{
		ID: sw.Work, FromStates: []storage.WorkState{storage.WorkReady}, Revision: sw.Revision, State: &waiting, WaitReason: &sw.Reason, Now: r.clock.Now(),
	})
	if err != nil {
		return storage.Wait{}, err
	}
	if w.Held() || w.Attempts > 0 {
		return storage.Wait{}, storage.ErrFenced
	}
	spec := sw.Spec
	if spec.Watermark == 0 {
		spec.Watermark = sw.Watermark
	}
	return r.RegisterWaitInTx(ctx, tx, RegisterWait{Work: sw.Work, Spec: spec, DefaultWatermark: sw.Watermark})
}
