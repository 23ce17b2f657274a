package management

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The Work routes: list and get (with an ETag), manual create, cancel,
// retry and wake.

// workFilters are the filters of GET /v1/work, bound into its cursors.
type workFilters struct {
	Scope  string `json:"scope"`
	State  string `json:"state"`
	Parent string `json:"parent"`
	Order  string `json:"order,omitempty"`
}

const workStates = "ready, running, waiting, succeeded, failed or cancelled"

func (rs *Resources) listWork(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "scope", "state", "parent", "order")
	if err != nil {
		return nil, err
	}
	f := workFilters{Scope: q.Get("scope"), State: q.Get("state"), Parent: q.Get("parent")}
	var desc bool
	if f.Order, desc, err = listOrder(q); err != nil {
		return nil, err
	}
	if err := checkState("state", f.State, func(s string) bool { return storage.WorkState(s).Valid() }, workStates); err != nil {
		return nil, err
	}
	ctx := r.Context()
	page, err := pageByCreatedOrder(rs.cursors, r, f, limit, cursor, desc, func(p storage.Page) ([]storage.Work, error) {
		return rs.store.ListWork(ctx, &storage.ListWorkParams{Scope: f.Scope, State: storage.WorkState(f.State), Parent: f.Parent, Page: p})
	}, func(w storage.Work) storage.Position { return storage.Position{CreatedAt: w.CreatedAt, ID: w.ID} })
	return listOut(page, err, workOut)
}

// workETag is the entity tag of a Work at its revision.
func workETag(w storage.Work) string { return fmt.Sprintf("work/%s/%d", w.ID, w.Revision) }

func (rs *Resources) getWork(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	w, err := rs.store.GetWork(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "Work", id)
	}
	return httpapi.Tagged(workETag(w), workOut(w)), nil
}

// InputRequest is the input bound to a manual Work.
type InputRequest struct {
	// Type defaults to DefaultInputType.
	Type string         `json:"type,omitempty"`
	Data jsontext.Value `json:"data,omitempty"`
}

// DefaultInputType is the type of a manual Work's input when none is given.
const DefaultInputType = "manual.input"

// CreateWorkRequest is the body of POST /v1/work.
type CreateWorkRequest struct {
	Scope string `json:"scope"`
	// Binding may be left out when the scope has exactly one binding.
	Binding        string        `json:"binding,omitempty"`
	Input          *InputRequest `json:"input,omitempty"`
	CorrelationKey string        `json:"correlation_key,omitempty"`
	Grants         []string      `json:"grants,omitempty"`
}

func (rs *Resources) createWork(r *http.Request) (any, error) {
	var req CreateWorkRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	var input *kernel.InputSpec
	if req.Input != nil {
		input = &kernel.InputSpec{Type: req.Input.Type, Data: json.RawMessage(`{}`)}
		if input.Type == "" {
			input.Type = DefaultInputType
		}
		if req.Input.Data != nil {
			data, err := objectData("input.data", req.Input.Data)
			if err != nil {
				return nil, err
			}
			input.Data = data
		}
	}
	var keys []string
	if req.CorrelationKey != "" {
		keys = []string{req.CorrelationKey}
	}
	key, err := derived(r, "work.create")
	if err != nil {
		return nil, err
	}
	ctx, _ := actorContext(r)
	ctx = recordInTx(ctx, r, func(v any) (any, bool) {
		res, ok := v.(kernel.CreateWorkResult)
		return createdWork(res), ok
	})
	res, err := rs.control.CreateWork(ctx, kernel.CreateWorkRequest{
		ID: ids.Derive(ids.Work, time.Time{}, key), Scope: req.Scope, Binding: req.Binding, Keys: keys,
		Grants: slices.Clone(req.Grants), Input: input,
	})
	if err != nil {
		return nil, err
	}
	return createdWork(res), nil
}

// createdWork is the response to a create.
func createdWork(res kernel.CreateWorkResult) any {
	status := http.StatusCreated
	if res.Replayed {
		status = http.StatusOK
	}
	return &httpapi.Response{Status: status, ETag: httpapi.ETag(workETag(res.Work)),
		Body: createdWorkOut(res)}
}

// recordControl is recordInTx for a control answered with controlledOut.
func recordControl(ctx context.Context, r *http.Request) context.Context {
	return recordInTx(ctx, r, func(v any) (any, bool) {
		res, ok := v.(kernel.ControlResult)
		return controlledOut(res), ok
	})
}

// ControlBody is the body of the cancel and retry controls.
type ControlBody struct {
	// Reason is a short note recorded on the control event.
	Reason string `json:"reason,omitempty"`
}

const maxReason = 512

func (rs *Resources) runControl(r *http.Request, op string, do func(kernel.ControlRequest) (kernel.ControlResult, error)) (any, error) {
	var body ControlBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if len(body.Reason) > maxReason {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "reason is longer than %d bytes", maxReason)
	}
	id := r.PathValue("id")
	delivery, err := derived(r, op, id)
	if err != nil {
		return nil, err
	}
	res, err := do(kernel.ControlRequest{Target: id, Reason: body.Reason, DeliveryID: delivery})
	if err != nil {
		return nil, err
	}
	return controlledOut(res), nil
}

func (rs *Resources) cancelWork(r *http.Request) (any, error) {
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	return rs.runControl(r, "work.cancel", func(req kernel.ControlRequest) (kernel.ControlResult, error) {
		return rs.control.CancelWork(ctx, req)
	})
}

func (rs *Resources) retryWork(r *http.Request) (any, error) {
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	return rs.runControl(r, "work.retry", func(req kernel.ControlRequest) (kernel.ControlResult, error) {
		return rs.control.Retry(ctx, req)
	})
}

// WakeBody is the body of POST /v1/work/{id}/wake.
type WakeBody struct {
	// Type defaults to core.manual.wake.
	Type string         `json:"type,omitempty"`
	Data jsontext.Value `json:"data,omitempty"`
}

func (rs *Resources) wakeWork(r *http.Request) (any, error) {
	var body WakeBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	ctx, _ := actorContext(r)
	w, err := rs.store.GetWork(ctx, id)
	if err != nil {
		return nil, notFound(err, "Work", id)
	}
	data, err := objectData("data", body.Data)
	if err != nil {
		return nil, err
	}
	delivery, err := derived(r, "work.wake", id)
	if err != nil {
		return nil, err
	}
	ctx = recordInTx(ctx, r, func(v any) (any, bool) {
		res, ok := v.(kernel.WakeResult)
		return wokenOut(res), ok
	})
	res, err := rs.control.Wake(ctx, kernel.WakeRequest{Scope: w.Scope, Key: w.ID, Type: body.Type, Data: data, DeliveryID: delivery})
	if err != nil {
		return nil, err
	}
	return wokenOut(res), nil
}
