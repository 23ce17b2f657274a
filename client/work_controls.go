package client

import (
	"context"

	"github.com/open-conduit/open-conduit/api"
)

// The Work-level controls: hold, release, rebind and attach. Each needs
// an Idempotency-Key (a fresh one when opts gives none) and answers the
// control's event and the state it left.

// HoldRequest is the body of a hold: a required reason, and Stop to fence
// and stop the live attempt too.
type HoldRequest = api.HoldRequest

// RebindRequest is the body of a rebind.
type RebindRequest = api.RebindRequest

// AttachRequest is the body of an attach.
type AttachRequest = api.AttachRequest

// Hold is a held Work's hold, telling the operator's from the system's.
type Hold = api.Hold

func (c *Client) workControl(ctx context.Context, id, verb string, body any, opts *RequestOptions) (*Controlled, error) {
	var out Controlled
	m, err := post(ctx, c, "/v1/work/"+PathEscape(id)+"/"+verb, body, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// HoldWork holds a Work: no new attempt of it starts until ReleaseWork
// (or RetryWork); its running attempt goes on unless req.Stop.
func (c *Client) HoldWork(ctx context.Context, id string, req HoldRequest, opts *RequestOptions) (*Controlled, error) {
	return c.workControl(ctx, id, "hold", req, opts)
}

// ReleaseWork lifts an operator's hold of a Work; a system hold is
// refused with system_hold (retry the Work once its cause is fixed).
func (c *Client) ReleaseWork(ctx context.Context, id, reason string, opts *RequestOptions) (*Controlled, error) {
	return c.workControl(ctx, id, "release", api.ControlRequest{Reason: reason}, opts)
}

// RebindWork moves a Work with no live attempt to another binding of its
// scope.
func (c *Client) RebindWork(ctx context.Context, id string, req RebindRequest, opts *RequestOptions) (*Controlled, error) {
	return c.workControl(ctx, id, "rebind", req, opts)
}

// AttachWork queues an accepted Event as a Work's input and/or gives it a
// correlation key.
func (c *Client) AttachWork(ctx context.Context, id string, req AttachRequest, opts *RequestOptions) (*Controlled, error) {
	return c.workControl(ctx, id, "attach", req, opts)
}
