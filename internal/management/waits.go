package management

import (
	"fmt"
	"net/http"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The wait routes: list and get.

// waitFilters are the filters of GET /v1/waits.
type waitFilters struct {
	Work  string `json:"work"`
	Scope string `json:"scope"`
	State string `json:"state"`
	Order string `json:"order,omitempty"`
}

const waitStates = "active, satisfied, timed_out or cancelled"

func validWaitState(s string) bool {
	switch storage.WaitState(s) {
	case storage.WaitActive, storage.WaitSatisfied, storage.WaitTimedOut, storage.WaitCancelled:
		return true
	}
	return false
}

func (rs *Resources) listWaits(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "work", "scope", "state", "order")
	if err != nil {
		return nil, err
	}
	f := waitFilters{Work: q.Get("work"), Scope: q.Get("scope"), State: q.Get("state")}
	var desc bool
	if f.Order, desc, err = listOrder(q); err != nil {
		return nil, err
	}
	if err := checkState("state", f.State, validWaitState, waitStates); err != nil {
		return nil, err
	}
	ctx := r.Context()
	page, err := pageByCreatedOrder(rs.cursors, r, f, limit, cursor, desc, func(p storage.Page) ([]storage.Wait, error) {
		return rs.store.ListWaits(ctx, &storage.ListWaitsParams{Work: f.Work, Scope: f.Scope, State: storage.WaitState(f.State), Page: p})
	}, func(w storage.Wait) storage.Position { return storage.Position{CreatedAt: w.CreatedAt, ID: w.ID} })
	return listOut(page, err, waitOut)
}

func (rs *Resources) getWait(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	w, err := rs.store.GetWait(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "wait", id)
	}
	return httpapi.Tagged(fmt.Sprintf("wait/%s/%s/%d", w.ID, w.State, w.UpdatedAt.UnixNano()), waitOut(w)), nil
}
