package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/open-conduit/open-conduit/api"
)

// Health is the body of GET /v1/health.
type Health struct {
	api.Health
	// Raw is the response body as the API sent it.
	Raw []byte `json:"-"`
}

// Health asks whether the daemon is serving and which configuration
// generation is active.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	resp, err := c.decode(ctx, http.MethodGet, "/v1/health", nil, nil, &h)
	if err != nil {
		return nil, err
	}
	h.Raw = resp.Body
	return &h, nil
}

// Issued is a credential with its token, as rotation and operator issue
// return it: the only time the token is ever shown.
type Issued struct {
	api.Issued
	Raw []byte `json:"-"`
}

// Rotate revokes the caller's credential and returns its replacement
// (same name and role). The old token is refused from then on; if the
// response is lost, the owner recovers with RecoverOperator on the host.
func (c *Client) Rotate(ctx context.Context) (*Issued, error) {
	var out Issued
	resp, err := c.decode(ctx, http.MethodPost, "/v1/auth/rotate", struct{}{}, nil, &out)
	if err != nil {
		return nil, err
	}
	out.Raw = resp.Body
	return &out, nil
}

// AddOperator issues a credential for a named operator; role "" means
// view. Needs the admin role.
func (c *Client) AddOperator(ctx context.Context, name, role string) (*Issued, error) {
	body := api.IssueRequest{Name: name, Role: role}
	var out Issued
	resp, err := c.decode(ctx, http.MethodPost, "/v1/auth/operators", body, nil, &out)
	if err != nil {
		return nil, err
	}
	out.Raw = resp.Body
	return &out, nil
}

// Operator is one credential in the operator listing.
type Operator = api.Operator

// OperatorList is the body of GET /v1/auth/operators: one page of
// operator credentials.
type OperatorList = List[Operator]

// OperatorFilter filters the operator listing.
type OperatorFilter struct {
	// All lists revoked credentials too (all=true); without it only the
	// active ones are listed.
	All bool
	Page
}

// ListOperators lists operator credentials, oldest first, one page at a
// time: the active ones, or with f.All every one, active and revoked.
// Pass the previous page's NextCursor in f.Page for the next, with the
// same All.
func (c *Client) ListOperators(ctx context.Context, f OperatorFilter) (*OperatorList, error) {
	q := url.Values{}
	if f.All {
		q.Set("all", "true")
	}
	f.Page.add(q)
	return list[Operator](ctx, c, query("/v1/auth/operators", q))
}

// Operators lists the active operator credentials, oldest first, one page
// at a time (ListOperators without All).
func (c *Client) Operators(ctx context.Context, p Page) (*OperatorList, error) {
	return c.ListOperators(ctx, OperatorFilter{Page: p})
}

// apiRevoked names the embedded api.Revoked so that its field Revoked is
// not shadowed by the embedding.
type apiRevoked = api.Revoked

// Revoked is the body of POST /v1/auth/revoke.
type Revoked struct {
	apiRevoked
	Replayed bool   `json:"-"`
	Raw      []byte `json:"-"`
}

// Revoke revokes a credential or an execution token by its id. It sends
// opts.IdempotencyKey, or a fresh key when none is given.
func (c *Client) Revoke(ctx context.Context, tokenID string, opts *RequestOptions) (*Revoked, error) {
	body := api.RevokeRequest{TokenID: tokenID}
	var out Revoked
	resp, err := c.decode(ctx, http.MethodPost, "/v1/auth/revoke", body, withKey(opts), &out)
	if err != nil {
		return nil, err
	}
	out.Raw = resp.Body
	out.Replayed = resp.Replayed
	return &out, nil
}
