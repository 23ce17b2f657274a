package kernel

import (
	"context"
	"encoding/json"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// IngestRequest is an Event from an ingress: a registered source outside
// the daemon (a webhook). The host that calls Ingest names the source (the
// ingress's registration name); the ingress names none of it.
type IngestRequest struct {
	Source         string
	Scope          string
	Type           string
	CorrelationKey string
	Data           json.RawMessage
	// DeliveryID is the delivery identity within the source: the same
	// one is accepted once.
	DeliveryID string
}

// Ingest accepts an ingress's Event, a root with no actor, into an active
// scope of the active generation (scope_inactive) and routes it at once,
// in one transaction. The source may not be a core.* one and the type may
// not be a core.* type (core_type_reserved). A repeated delivery returns
// the Event accepted first, Replayed, and routes nothing.
func (c *Control) Ingest(ctx context.Context, req IngestRequest) (EmitResult, error) {
	if IsCore(req.Source) {
		return EmitResult{}, Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "source %s is the host's own; an ingress's source is its registration name", clip(req.Source))
	}
	var out EmitResult
	err := c.store.WithTx(ctx, func(tx storage.Tx) error {
		if err := ActiveScope(ctx, c.scopes, req.Scope); err != nil {
			return err
		}
		ev := storage.Event{
			Type: req.Type, Source: req.Source, Scope: req.Scope, CorrelationKey: req.CorrelationKey,
			Data: req.Data, DeliveryID: req.DeliveryID,
		}
		var err error
		if out.Event, err = c.rt.AcceptInTx(ctx, tx, ev); err != nil {
			return err
		}
		out.Decision, err = c.rt.Route(ctx, tx, out.Event)
		return err
	})
	return out, err
}
