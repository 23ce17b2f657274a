package management

import (
	"net/http"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// The Work-level controls: hold, release, rebind and attach. Each needs
// operate and an Idempotency-Key, from which the control event's delivery
// id derives, and answers api.Controlled.

// HoldBody is the body of POST /v1/work/{id}/hold.
type HoldBody struct {
	// Reason is required: it becomes the hold's detail.
	Reason string `json:"reason"`
	// Stop fences and stops the live attempt too.
	Stop bool `json:"stop,omitempty"`
}

// RebindBody is the body of POST /v1/work/{id}/rebind.
type RebindBody struct {
	Binding string `json:"binding"`
	// Grants, when present, replace the Work's grants.
	Grants *[]string `json:"grants,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// AttachBody is the body of POST /v1/work/{id}/attach.
type AttachBody struct {
	Event          string `json:"event,omitempty"`
	CorrelationKey string `json:"correlation_key,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

func checkReason(reason string) error {
	if len(reason) > maxReason {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "reason is longer than %d bytes", maxReason)
	}
	return nil
}

func (rs *Resources) holdWork(r *http.Request) (any, error) {
	var body HoldBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if err := checkReason(body.Reason); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	delivery, err := derived(r, "work.hold", id)
	if err != nil {
		return nil, err
	}
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	res, err := rs.control.Hold(ctx, kernel.HoldRequest{Target: id, Reason: body.Reason, Stop: body.Stop, DeliveryID: delivery})
	if err != nil {
		return nil, err
	}
	return controlledOut(res), nil
}

func (rs *Resources) releaseWork(r *http.Request) (any, error) {
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	return rs.runControl(r, "work.release", func(req kernel.ControlRequest) (kernel.ControlResult, error) {
		return rs.control.Release(ctx, req)
	})
}

func (rs *Resources) rebindWork(r *http.Request) (any, error) {
	var body RebindBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if err := checkReason(body.Reason); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	delivery, err := derived(r, "work.rebind", id)
	if err != nil {
		return nil, err
	}
	req := kernel.RebindRequest{Target: id, Binding: body.Binding, Reason: body.Reason, DeliveryID: delivery}
	if body.Grants != nil {
		req.Grants = append([]string{}, *body.Grants...)
	}
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	res, err := rs.control.Rebind(ctx, req)
	if err != nil {
		return nil, err
	}
	return controlledOut(res), nil
}

func (rs *Resources) attachWork(r *http.Request) (any, error) {
	var body AttachBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if err := checkReason(body.Reason); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	delivery, err := derived(r, "work.attach", id)
	if err != nil {
		return nil, err
	}
	ctx, _ := actorContext(r)
	ctx = recordControl(ctx, r)
	res, err := rs.control.Attach(ctx, kernel.AttachRequest{Target: id, Event: body.Event, Key: body.CorrelationKey, Reason: body.Reason, DeliveryID: delivery})
	if err != nil {
		return nil, err
	}
	return controlledOut(res), nil
}
