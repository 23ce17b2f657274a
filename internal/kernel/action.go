package kernel

import (
	"bytes"
	"context"
	"errors"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// TypeAction is the type of the Event that records an operator's action
// (from SourceAction, with the operator as its Actor).
const TypeAction = "core.action"

// ErrInvalidAction refuses an action whose Work or input is wrong.
var ErrInvalidAction = &Error{Code: "invalid_action", Kind: extension.ErrInvalid}

// ActionRecord is what the kernel records of an operator's action: the
// scope it was taken in, the Work it is about (optional), its data (the
// action's name and input, as the extension host composes it) and the
// DeliveryID derived from the caller's Idempotency-Key.
type ActionRecord struct {
	Scope      string
	Work       string
	Data       []byte
	DeliveryID string
}

// RecordAction accepts, in one transaction, the core.action Event of an
// operator's action: it checks that the Work (when given) is in the scope
// and stamps the operator from the context (WithActor) as the Event's
// Actor. The Event is not routed: it is the record of who asked for what.
// A retry with the same DeliveryID returns the recorded Event (Replayed);
// a different scope, Work, data or operator under it is event_conflict.
func (c *Control) RecordAction(ctx context.Context, rec ActionRecord) (storage.Event, error) {
	actor, err := ActorOf(ctx)
	if err != nil {
		return storage.Event{}, err
	}
	data, err := NormalizeData(rec.Data)
	if err != nil {
		return storage.Event{}, err
	}
	want := storage.Event{Type: TypeAction, Source: SourceAction, Scope: rec.Scope, Data: data, Actor: actor, DeliveryID: rec.DeliveryID}
	var out storage.Event
	err = c.store.WithTx(ctx, func(tx storage.Tx) error {
		if rec.Work != "" {
			w, err := tx.GetWork(ctx, rec.Work)
			if errors.Is(err, storage.ErrNotFound) {
				return Refuse(extension.ErrInvalid, ErrInvalidAction.Code, "Work %s does not exist; name a Work of scope %s, or leave the Work out", rec.Work, rec.Scope)
			}
			if err != nil {
				return err
			}
			if w.Scope != rec.Scope {
				return Refuse(extension.ErrInvalid, ErrInvalidAction.Code, "Work %s is in scope %s, not %s; take the action in the Work's scope", w.ID, w.Scope, rec.Scope)
			}
			want.Work, want.Parent = w.ID, w.CreatedEvent
		}
		ev, err := c.rt.AcceptInTx(ctx, tx, want)
		if err != nil {
			return err
		}
		if ev.Replayed && (ev.Type != want.Type || ev.Scope != want.Scope || ev.Work != want.Work || ev.Actor != want.Actor || !bytes.Equal(ev.Data, want.Data)) {
			return Refuse(extension.ErrConflict, ErrEventConflict.Code, "delivery id %s already recorded another action; send a new Idempotency-Key for a new request", rec.DeliveryID)
		}
		out = ev
		return nil
	})
	return out, err
}
