package management

import (
	"fmt"
	"net/http"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The execution routes: list, get (with an ETag) and cancel.

// executionFilters are the filters of GET /v1/executions.
type executionFilters struct {
	Work  string `json:"work"`
	Scope string `json:"scope"`
	State string `json:"state"`
	Order string `json:"order,omitempty"`
}

const executionStates = "running, parked, stopping or finished"

func validExecutionState(s string) bool {
	switch storage.ExecutionState(s) {
	case storage.ExecutionRunning, storage.ExecutionParked, storage.ExecutionStopping, storage.ExecutionFinished:
		return true
	}
	return false
}

func (rs *Resources) listExecutions(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "work", "scope", "state", "order")
	if err != nil {
		return nil, err
	}
	f := executionFilters{Work: q.Get("work"), Scope: q.Get("scope"), State: q.Get("state")}
	var desc bool
	if f.Order, desc, err = listOrder(q); err != nil {
		return nil, err
	}
	if err := checkState("state", f.State, validExecutionState, executionStates); err != nil {
		return nil, err
	}
	var states []storage.ExecutionState
	if f.State != "" {
		states = []storage.ExecutionState{storage.ExecutionState(f.State)}
	}
	ctx := r.Context()
	page, err := pageByCreatedOrder(rs.cursors, r, f, limit, cursor, desc, func(p storage.Page) ([]storage.Execution, error) {
		return rs.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: f.Work, Scope: f.Scope, States: states, Page: p})
	}, func(e storage.Execution) storage.Position { return storage.Position{CreatedAt: e.CreatedAt, ID: e.ID} })
	return listOut(page, err, executionOut)
}

func executionETag(e storage.Execution) string {
	return fmt.Sprintf("execution/%s/%d", e.ID, e.Revision)
}

func (rs *Resources) getExecution(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	e, err := rs.store.GetExecution(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "execution", id)
	}
	return httpapi.Tagged(executionETag(e), executionOut(e)), nil
}

// cancelExecution fences one attempt and holds its Work
// (operator_cancelled) until a manual retry; the host stops the process.
func (rs *Resources) cancelExecution(r *http.Request) (any, error) {
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	return rs.runControl(r, "execution.cancel", func(req kernel.ControlRequest) (kernel.ControlResult, error) {
		return rs.control.CancelExecution(ctx, req)
	})
}
