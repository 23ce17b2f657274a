package management

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// The action routes: the operator actions extensions register, listed and
// run. An action is operator-side only; the toolbelt never serves one.

// ActionControls list and run the operator actions; *toolbelt.Actions
// implements them.
type ActionControls interface {
	List() []toolbelt.ActionInfo
	Act(ctx context.Context, req toolbelt.ActRequest) (toolbelt.ActResult, error)
}

var _ ActionControls = (*toolbelt.Actions)(nil)

// ActionsOptions are what the action routes call and read.
type ActionsOptions struct {
	// Control lists and runs the actions (required).
	Control ActionControls
	// Config is the configuration service (required): an action is taken
	// in an active scope of the active generation.
	Config *configsvc.Service
}

// Actions serves the action routes.
type Actions struct {
	control ActionControls
	config  *configsvc.Service
}

// NewActions checks the options and returns the action routes.
func NewActions(opts ActionsOptions) (*Actions, error) {
	if opts.Control == nil || opts.Config == nil {
		return nil, errors.New("management: ActionsOptions need Control and Config")
	}
	return &Actions{control: opts.Control, config: opts.Config}, nil
}

// Routes is the actions' part of the route table, for Options.Routes:
// the list needs view; running one needs operate and an Idempotency-Key.
func (as *Actions) Routes() []Route {
	return []Route{
		{Method: "GET", Pattern: "/v1/actions", Role: RoleView, Handler: as.list},
		{Method: "POST", Pattern: "/v1/actions/{name}", Role: RoleOperate, Idempotent: true, Handler: as.act},
	}
}

// list serves GET /v1/actions: every registered action, in name order,
// in one page.
func (as *Actions) list(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	return pageOut(api.Page[toolbelt.ActionInfo]{Items: as.control.List()}, actionOut), nil
}

// ActRequest is the body of POST /v1/actions/{name}.
type ActRequest struct {
	Scope string `json:"scope"`
	// Work, when set, is a Work of the scope the action is about.
	Work  string         `json:"work,omitempty"`
	Input jsontext.Value `json:"input,omitempty"`
}

func (as *Actions) act(r *http.Request) (any, error) {
	var req ActRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if !slices.ContainsFunc(as.control.List(), func(a toolbelt.ActionInfo) bool { return a.Name == name }) {
		return nil, httpapi.Errorf(httpapi.CodeNotFound, "no action %s is registered (open-conduit actions lists them)", httpapi.Clip(name))
	}
	if req.Scope == "" {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "scope is required: name the scope the action is taken in (open-conduit scopes lists them)")
	}
	snap := as.config.Active()
	if sc, ok := snap.Scope(req.Scope); !ok || !sc.Active {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "scope %s is not an active scope of configuration generation %d (open-conduit scopes lists them)", httpapi.Clip(req.Scope), snap.Generation)
	}
	input, err := objectData("input", req.Input)
	if err != nil {
		return nil, err
	}
	delivery, err := derived(r, "actions.act", name)
	if err != nil {
		return nil, err
	}
	ctx, _ := actorContext(r)
	res, err := as.control.Act(ctx, toolbelt.ActRequest{Action: name, Scope: req.Scope, Work: req.Work, Input: input, DeliveryID: delivery})
	if err != nil {
		return nil, err
	}
	return actedOut(res), nil
}
