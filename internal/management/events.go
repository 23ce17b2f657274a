package management

import (
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The Event routes: list (paged by acceptance sequence), get, the causal
// chain, and manual emit.

// eventFilters are the filters of GET /v1/events, bound into its cursors.
type eventFilters struct {
	Scope          string `json:"scope"`
	Work           string `json:"work"`
	Execution      string `json:"execution"`
	Type           string `json:"type"`
	Root           string `json:"root"`
	CorrelationKey string `json:"correlation_key"`
	Order          string `json:"order,omitempty"`
}

// seqKey is a position in the acceptance sequence.
type seqKey int64

// pageBySeq serves one page of events by acceptance sequence: the first
// page captures the last sequence accepted as the bound, so events
// accepted while the listing is paged never join it. With p.Desc the
// listing is newest first, each page going on below the last returned.
func (rs *Resources) pageBySeq(r *http.Request, filters any, limit int, cursor string, p storage.ListEventsParams) (api.Page[storage.Event], error) {
	ctx := r.Context()
	if cursor != "" {
		ks, err := DecodeCursor[seqKey](rs.cursors, r, filters, cursor)
		if err != nil {
			return api.Page[storage.Event]{}, err
		}
		p.UntilSeq, p.AfterSeq = int64(ks.Bound), int64(ks.After)
	} else {
		last, err := rs.store.LastSeq(ctx)
		if err != nil {
			return api.Page[storage.Event]{}, err
		}
		if last == 0 {
			return api.Page[storage.Event]{Items: []storage.Event{}}, nil
		}
		p.UntilSeq = last
	}
	p.Limit = limit + 1
	rows, err := rs.store.ListEvents(ctx, &p)
	if err != nil {
		return api.Page[storage.Event]{}, err
	}
	page := api.Page[storage.Event]{Items: rows}
	if page.Items == nil {
		page.Items = []storage.Event{}
	}
	if len(rows) > limit {
		page.Items = rows[:limit]
		page.NextCursor, err = EncodeCursor(rs.cursors, r, filters, Keyset[seqKey]{Bound: seqKey(p.UntilSeq), After: seqKey(rows[limit-1].Seq)})
		if err != nil {
			return api.Page[storage.Event]{}, err
		}
	}
	return page, nil
}

func (rs *Resources) listEvents(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "scope", "work", "execution", "type", "root", "correlation_key", "order")
	if err != nil {
		return nil, err
	}
	f := eventFilters{Scope: q.Get("scope"), Work: q.Get("work"), Execution: q.Get("execution"), Type: q.Get("type"),
		Root: q.Get("root"), CorrelationKey: q.Get("correlation_key")}
	var desc bool
	if f.Order, desc, err = listOrder(q); err != nil {
		return nil, err
	}
	page, err := rs.pageBySeq(r, f, limit, cursor, storage.ListEventsParams{
		Scope: f.Scope, Work: f.Work, Execution: f.Execution, Type: f.Type, Root: f.Root, CorrelationKey: f.CorrelationKey, Desc: desc,
	})
	return listOut(page, err, eventOut)
}

// eventETag is the entity tag of an Event; events never change.
func eventETag(e storage.Event) string { return "event/" + e.ID }

func (rs *Resources) getEvent(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	e, err := rs.store.GetEvent(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "Event", id)
	}
	return httpapi.Tagged(eventETag(e), eventOut(e)), nil
}

// eventChain serves GET /v1/events/{id}/chain: the whole causal tree the
// event belongs to, its root and every event derived from it, by
// acceptance sequence (each item's parent and depth rebuild the tree).
func (rs *Resources) eventChain(r *http.Request) (any, error) {
	_, limit, cursor, err := listQuery(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	e, err := rs.store.GetEvent(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "Event", id)
	}
	f := struct {
		Root string `json:"root"`
	}{e.Root}
	page, err := rs.pageBySeq(r, f, limit, cursor, storage.ListEventsParams{Root: e.Root})
	return listOut(page, err, eventOut)
}

// EmitRequest is the body of POST /v1/events.
type EmitRequest struct {
	// Scope may be left out with a parent: the event takes its parent's.
	Scope          string         `json:"scope,omitempty"`
	Type           string         `json:"type"`
	Data           jsontext.Value `json:"data,omitempty"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	// Parent makes the event derived from an accepted event, under the
	// causal bounds; without it the event is a core.manual root.
	Parent string `json:"parent,omitempty"`
}

func (rs *Resources) emit(r *http.Request) (any, error) {
	var req EmitRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	ctx, _ := actorContext(r)
	data, err := objectData("data", req.Data)
	if err != nil {
		return nil, err
	}
	delivery, err := derived(r, "events.emit")
	if err != nil {
		return nil, err
	}
	ctx = recordInTx(ctx, r, func(v any) (any, bool) {
		res, ok := v.(kernel.EmitResult)
		return emitted(res), ok
	})
	res, err := rs.control.Emit(ctx, kernel.EmitRequest{
		Scope: req.Scope, Type: req.Type, Data: data, CorrelationKey: req.CorrelationKey, Parent: req.Parent, DeliveryID: delivery,
	})
	if err != nil {
		return nil, err
	}
	return emitted(res), nil
}

// emitted is the response to an emit.
func emitted(res kernel.EmitResult) any {
	status := http.StatusCreated
	if res.Event.Replayed {
		status = http.StatusOK
	}
	return &httpapi.Response{Status: status, Body: emittedOut(res)}
}
