package management

import (
	"context"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/wire"
)

// The run history: one row per attempt across Work, newest first.

// runFilters are the filters of GET /v1/runs.
type runFilters struct {
	Work    string `json:"work"`
	Scope   string `json:"scope"`
	Binding string `json:"binding"`
	State   string `json:"state"`
	Since   string `json:"since"`
}

// runState turns a run list's state filter into execution states or
// results.
func runState(s string) ([]storage.ExecutionState, []storage.ExecutionResult, bool) {
	switch s {
	case "":
		return nil, nil, true
	case api.ResultSucceeded, api.ResultFailed, api.ResultCancelled, api.ResultLost:
		return nil, []storage.ExecutionResult{storage.ExecutionResult(s)}, true
	}
	if validExecutionState(s) {
		return []storage.ExecutionState{storage.ExecutionState(s)}, nil, true
	}
	return nil, nil, false
}

func (rs *Resources) listRuns(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "work", "scope", "binding", "state", "since")
	if err != nil {
		return nil, err
	}
	f := runFilters{Work: q.Get("work"), Scope: q.Get("scope"), Binding: q.Get("binding"), State: q.Get("state"), Since: q.Get("since")}
	states, results, ok := runState(f.State)
	if !ok {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "state must be one of %s", api.RunStates)
	}
	var since time.Time
	if f.Since != "" {
		if since, err = time.Parse(time.RFC3339Nano, f.Since); err != nil {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "since must be a time in RFC 3339 form, such as 2026-01-02T15:04:05Z")
		}
	}
	var after *storage.Position
	if cursor != "" {
		ks, err := DecodeCursor[posKey](rs.cursors, r, f, cursor)
		if err != nil {
			return nil, err
		}
		after = ks.After.position()
	}
	ctx := r.Context()
	// Newest first needs no bound: rows added while the list is paged
	// come before its first page, never inside it.
	rows, err := rs.store.ListExecutions(ctx, &storage.ListExecutionsParams{
		Work: f.Work, Scope: f.Scope, Binding: f.Binding, States: states, Results: results, CreatedFrom: since,
		Page: storage.Page{Desc: true, After: after, Limit: limit + 1},
	})
	if err != nil {
		return nil, err
	}
	page := api.Page[api.Run]{Items: []api.Run{}}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		if page.NextCursor, err = EncodeCursor(rs.cursors, r, f, Keyset[posKey]{After: keyOf(storage.Position{CreatedAt: last.CreatedAt, ID: last.ID})}); err != nil {
			return nil, err
		}
	}
	rc := runCache{rs: rs, work: map[string]storage.Work{}, events: map[string]storage.Event{}}
	for _, e := range rows {
		run, err := rc.run(ctx, e)
		if err != nil {
			return nil, err
		}
		page.Items = append(page.Items, run)
	}
	return page, nil
}

func (rs *Resources) getRun(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	e, err := rs.store.GetExecution(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "run (execution)", id)
	}
	rc := runCache{rs: rs, work: map[string]storage.Work{}, events: map[string]storage.Event{}}
	return rc.run(r.Context(), e)
}

// runCache reads each Work and Event a page of runs names once.
type runCache struct {
	rs     *Resources
	work   map[string]storage.Work
	events map[string]storage.Event
}

func (c *runCache) event(ctx context.Context, id string) (storage.Event, error) {
	if ev, ok := c.events[id]; ok {
		return ev, nil
	}
	ev, err := c.rs.store.GetEvent(ctx, id)
	if err != nil {
		return storage.Event{}, err
	}
	c.events[id] = ev
	return ev, nil
}

func (c *runCache) run(ctx context.Context, e storage.Execution) (api.Run, error) {
	w, ok := c.work[e.Work]
	if !ok {
		var err error
		if w, err = c.rs.store.GetWork(ctx, e.Work); err != nil {
			return api.Run{}, err
		}
		c.work[e.Work] = w
	}
	run := api.Run{Execution: executionOut(e), WorkState: string(w.State), WorkHold: wire.Hold(w), TriggerEvent: w.CreatedEvent}
	if workTerminal(w) {
		run.Outcome = w.OutcomeMessage
	}
	if w.CreatedEvent != "" {
		created, err := c.event(ctx, w.CreatedEvent)
		if err != nil {
			return api.Run{}, err
		}
		trigger := created
		if created.Parent != "" {
			if trigger, err = c.event(ctx, created.Parent); err != nil {
				return api.Run{}, err
			}
		}
		run.TriggerEvent, run.TriggerType = trigger.ID, trigger.Type
	}
	end := e.UpdatedAt
	if e.Live() {
		end = c.rs.clock.Now()
	}
	if d := end.Sub(e.CreatedAt); d > 0 {
		run.DurationMS = d.Milliseconds()
	}
	return run, nil
}

func workTerminal(w storage.Work) bool {
	switch w.State {
	case storage.WorkSucceeded, storage.WorkFailed, storage.WorkCancelled:
		return true
	}
	return false
}
