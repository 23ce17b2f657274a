package management

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls are the operator controls the resource routes call;
// *kernel.Control implements them.
type Controls interface {
	Emit(ctx context.Context, req kernel.EmitRequest) (kernel.EmitResult, error)
	CreateWork(ctx context.Context, req kernel.CreateWorkRequest) (kernel.CreateWorkResult, error)
	CancelWork(ctx context.Context, req kernel.ControlRequest) (kernel.ControlResult, error)
	CancelExecution(ctx context.Context, req kernel.ControlRequest) (kernel.ControlResult, error)
	Retry(ctx context.Context, req kernel.ControlRequest) (kernel.ControlResult, error)
	Wake(ctx context.Context, req kernel.WakeRequest) (kernel.WakeResult, error)
	Hold(ctx context.Context, req kernel.HoldRequest) (kernel.ControlResult, error)
	Release(ctx context.Context, req kernel.ControlRequest) (kernel.ControlResult, error)
	Rebind(ctx context.Context, req kernel.RebindRequest) (kernel.ControlResult, error)
	Attach(ctx context.Context, req kernel.AttachRequest) (kernel.ControlResult, error)
	Trace(ctx context.Context, ev storage.Event) (kernel.Decision, error)
	ReconcileScopes(ctx context.Context, req kernel.ReconcileRequest) (kernel.ReconcileResult, error)
}

var _ Controls = (*kernel.Control)(nil)

// ArtifactStore opens an artifact's bytes; *storage.Artifacts implements
// it.
type ArtifactStore interface {
	Open(ctx context.Context, id string) (storage.Artifact, storage.Blob, error)
}

var _ ArtifactStore = (*storage.Artifacts)(nil)

// ResourcesOptions are what the resource routes read and call.
type ResourcesOptions struct {
	// Store is read for every list and single read (required).
	Store storage.Reader
	// Control carries out the operator controls (required).
	Control Controls
	// Artifacts serves artifact content (required).
	Artifacts ArtifactStore
	// Config is the configuration service (required): scopes, config
	// routes, and the active generation that manual Work is checked
	// against.
	Config *configsvc.Service
	// Cursors authenticates list cursors (required): build it with
	// NewCursors over the key LoadCursorKey returns, and give the server
	// the same key as Options.CursorKey.
	Cursors *Cursors
	// Clock defaults to the system's.
	Clock clock.Clock
	// Sources answers route traces naming a registered ingress's source
	// (nil: no ingress is registered).
	Sources TraceSources
	// Samples, when set, lists the sample Events the ingresses offer in
	// a scope (nil: none); the routes' own come from the configuration.
	Samples IngressSamples
	// LiveLogs, when set, says where a running attempt writes its log, so
	// that the log routes can follow it; without it an attempt's log is
	// readable once it ended.
	LiveLogs LiveLogs
	// Owner is this daemon's owner id: a live segment another owner runs
	// has its live log on that daemon's host, so the log routes answer
	// it with what the store holds and name the owner (empty: every
	// segment is taken for this daemon's).
	Owner string
}

// IngressSamples lists the sample Events the ingresses offer in scope.
type IngressSamples func(scope string) []Sample

// Sample is a named sample Event a route or an ingress offers. Source is
// empty for core.manual.
type Sample struct {
	Name           string
	Type           string
	Source         string
	CorrelationKey string
	Data           json.RawMessage
	// Route is the route that offers it ("" for an ingress's).
	Route string
}

// TraceSources says whether source is a registered ingress's source and,
// if so, whether a route trace in scope may name it (Ingress.AdmitsTrace).
type TraceSources func(source, scope string) (registered, admits bool)

// Resources serves the management API's resources: scopes, Work, Events,
// executions, waits, artifacts, the configuration and the toolbelt's call
// records. Its handlers read storage and call the runtime's controls; they
// never hold SQL.
type Resources struct {
	store     storage.Reader
	control   Controls
	artifacts ArtifactStore
	config    *configsvc.Service
	cursors   *Cursors
	clock     clock.Clock
	sources   TraceSources
	samples   IngressSamples
	live      LiveLogs
	owner     string
	streams   *streams
	// logRecheck overrides logfollow.Recheck (tests).
	logRecheck time.Duration
}

// NewResources checks the options and returns the resources.
func NewResources(opts ResourcesOptions) (*Resources, error) {
	if opts.Store == nil || opts.Control == nil || opts.Artifacts == nil || opts.Config == nil || opts.Cursors == nil {
		return nil, errors.New("management: ResourcesOptions need Store, Control, Artifacts, Config and Cursors")
	}
	if opts.Clock == nil {
		return nil, errors.New("management: ResourcesOptions need a Clock")
	}
	return &Resources{store: opts.Store, control: opts.Control, artifacts: opts.Artifacts, config: opts.Config,
		cursors: opts.Cursors, clock: opts.Clock, sources: opts.Sources, samples: opts.Samples, live: opts.LiveLogs, owner: opts.Owner, streams: newStreams()}, nil
}

// Routes is the resources' part of the route table, for Options.Routes.
// Reads need view; route trace and config validate need view and take no
// Idempotency-Key; config apply and set need admin; every other control needs
// operate and an Idempotency-Key.
func (rs *Resources) Routes() []Route {
	return []Route{
		{Method: "GET", Pattern: "/v1/scopes", Role: RoleView, Handler: rs.listScopes},
		{Method: "GET", Pattern: "/v1/scopes/{id}", Role: RoleView, Handler: rs.getScope},
		{Method: "POST", Pattern: "/v1/scopes/{id}/route/trace", Role: RoleView, Handler: rs.traceRoute},
		{Method: "GET", Pattern: "/v1/scopes/{id}/route/samples", Role: RoleView, Handler: rs.routeSamples},
		{Method: "POST", Pattern: "/v1/scopes/reconcile", Role: RoleOperate, Idempotent: true, Handler: rs.reconcileScopes},

		{Method: "GET", Pattern: "/v1/work", Role: RoleView, Handler: rs.listWork},
		{Method: "POST", Pattern: "/v1/work", Role: RoleOperate, Idempotent: true, Handler: rs.createWork},
		{Method: "GET", Pattern: "/v1/work/{id}", Role: RoleView, Handler: rs.getWork},
		{Method: "GET", Pattern: "/v1/work/{id}/log", Role: RoleView, Handler: rs.workLog},
		{Method: "POST", Pattern: "/v1/work/{id}/cancel", Role: RoleOperate, Idempotent: true, Handler: rs.cancelWork},
		{Method: "POST", Pattern: "/v1/work/{id}/retry", Role: RoleOperate, Idempotent: true, Handler: rs.retryWork},
		{Method: "POST", Pattern: "/v1/work/{id}/wake", Role: RoleOperate, Idempotent: true, Handler: rs.wakeWork},
		{Method: "POST", Pattern: "/v1/work/{id}/hold", Role: RoleOperate, Idempotent: true, Handler: rs.holdWork},
		{Method: "POST", Pattern: "/v1/work/{id}/release", Role: RoleOperate, Idempotent: true, Handler: rs.releaseWork},
		{Method: "POST", Pattern: "/v1/work/{id}/rebind", Role: RoleOperate, Idempotent: true, Handler: rs.rebindWork},
		{Method: "POST", Pattern: "/v1/work/{id}/attach", Role: RoleOperate, Idempotent: true, Handler: rs.attachWork},

		{Method: "GET", Pattern: "/v1/events", Role: RoleView, Handler: rs.listEvents},
		{Method: "POST", Pattern: "/v1/events", Role: RoleOperate, Idempotent: true, Handler: rs.emit},
		{Method: "GET", Pattern: "/v1/events/{id}", Role: RoleView, Handler: rs.getEvent},
		{Method: "GET", Pattern: "/v1/events/{id}/chain", Role: RoleView, Handler: rs.eventChain},

		{Method: "GET", Pattern: "/v1/executions", Role: RoleView, Handler: rs.listExecutions},
		{Method: "GET", Pattern: "/v1/executions/{id}", Role: RoleView, Handler: rs.getExecution},
		{Method: "GET", Pattern: "/v1/executions/{id}/log", Role: RoleView, Handler: rs.executionLog},
		{Method: "GET", Pattern: "/v1/executions/{id}/egress", Role: RoleView, Handler: rs.listEgress},
		{Method: "POST", Pattern: "/v1/executions/{id}/cancel", Role: RoleOperate, Idempotent: true, Handler: rs.cancelExecution},

		{Method: "GET", Pattern: "/v1/waits", Role: RoleView, Handler: rs.listWaits},
		{Method: "GET", Pattern: "/v1/waits/{id}", Role: RoleView, Handler: rs.getWait},

		{Method: "GET", Pattern: "/v1/artifacts", Role: RoleView, Handler: rs.listArtifacts},
		{Method: "GET", Pattern: "/v1/artifacts/{id}", Role: RoleView, Handler: rs.getArtifact},
		{Method: "GET", Pattern: "/v1/artifacts/{id}/content", Role: RoleView, Handler: rs.artifactContent},

		{Method: "GET", Pattern: "/v1/config", Role: RoleView, Handler: rs.getConfig},
		{Method: "POST", Pattern: "/v1/config/validate", Role: RoleView, Handler: rs.validateConfig},
		{Method: "POST", Pattern: "/v1/config/apply", Role: RoleAdmin, Idempotent: true, Handler: rs.applyConfig},
		{Method: "POST", Pattern: "/v1/config/set", Role: RoleAdmin, Idempotent: true, Handler: rs.setConfig},

		{Method: "GET", Pattern: "/v1/toolbelt/calls", Role: RoleView, Handler: rs.listToolbeltCalls},

		{Method: "GET", Pattern: "/v1/runs", Role: RoleView, Handler: rs.listRuns},
		{Method: "GET", Pattern: "/v1/runs/{id}", Role: RoleView, Handler: rs.getRun},
		{Method: "GET", Pattern: "/v1/runs/{id}/log", Role: RoleView, Handler: rs.executionLog},
	}
}

// actorContext puts the authenticated principal on ctx as the runtime's
// actor, so that every control is stamped with who did it even when the
// host installed no Authenticated hook.
func actorContext(r *http.Request) (context.Context, Principal) {
	ctx := r.Context()
	p, _ := PrincipalFrom(ctx)
	return kernel.WithActor(ctx, p.Actor()), p
}

// derived returns a durable identity derived from the request's effective
// Idempotency-Key, the operation and its target, so that a retried
// request names the same record. The key may be long; the identity is a
// digest of it.
func derived(r *http.Request, op string, parts ...string) (string, error) {
	key, ok := IdempotencyKey(r.Context())
	if !ok || key == "" {
		return "", errors.New("management: a control route ran without an Idempotency-Key")
	}
	h := sha256.New()
	for _, p := range append([]string{"open-conduit management", op, key}, parts...) {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return op + ":" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// notFound maps a storage miss of a path's record to not_found naming it.
func notFound(err error, what, id string) error {
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.Wrap(httpapi.CodeNotFound, err, fmt.Sprintf("no %s has id %s", what, httpapi.Clip(id)))
	}
	return err
}

// posKey is a (created_at, id) keyset position in a cursor.
type posKey struct {
	T  int64  `json:"t"`
	ID string `json:"i"`
}

func keyOf(p storage.Position) posKey { return posKey{T: p.CreatedAt.UnixNano(), ID: p.ID} }

func (k posKey) position() *storage.Position {
	return &storage.Position{CreatedAt: time.Unix(0, k.T).UTC(), ID: k.ID}
}

// listQuery parses a list's query string: limit, cursor and the filters
// named, each at most once.
func listQuery(r *http.Request, filters ...string) (q url.Values, limit int, cursor string, err error) {
	q, err = httpapi.Query(r, append([]string{"limit", "cursor"}, filters...)...)
	if err != nil {
		return nil, 0, "", err
	}
	limit, cursor, err = PageParams(q)
	return q, limit, cursor, err
}

// pageByCreated serves one page of a list ordered by (created_at, id). The
// first page captures the listing's upper bound (its last row now), so
// rows added while it is paged never shift it; a cursor carries the bound
// and the last row returned, bound to the endpoint and the filters.
func pageByCreated[T any](c *Cursors, r *http.Request, filters any, limit int, cursor string,
	fetch func(p storage.Page) ([]T, error), pos func(T) storage.Position) (api.Page[T], error) {
	return pageByCreatedOrder(c, r, filters, limit, cursor, false, fetch, pos)
}

// pageByCreatedOrder is pageByCreated, newest first when desc: the bound
// captured at the first page is then the newest row, and each page goes on
// below the last row returned.
func pageByCreatedOrder[T any](c *Cursors, r *http.Request, filters any, limit int, cursor string, desc bool,
	fetch func(p storage.Page) ([]T, error), pos func(T) storage.Position) (api.Page[T], error) {
	var bound posKey
	var after *storage.Position
	if cursor != "" {
		ks, err := DecodeCursor[posKey](c, r, filters, cursor)
		if err != nil {
			return api.Page[T]{}, err
		}
		bound, after = ks.Bound, ks.After.position()
	} else {
		last, err := fetch(storage.Page{Desc: true, Limit: 1})
		if err != nil {
			return api.Page[T]{}, err
		}
		if len(last) == 0 {
			return api.Page[T]{Items: []T{}}, nil
		}
		bound = keyOf(pos(last[0]))
	}
	rows, err := fetch(storage.Page{After: after, Until: bound.position(), Limit: limit + 1, Desc: desc})
	if err != nil {
		return api.Page[T]{}, err
	}
	page := api.Page[T]{Items: rows}
	if page.Items == nil {
		page.Items = []T{}
	}
	if len(rows) > limit {
		page.Items = rows[:limit]
		page.NextCursor, err = EncodeCursor(c, r, filters, Keyset[posKey]{Bound: bound, After: keyOf(pos(rows[limit-1]))})
		if err != nil {
			return api.Page[T]{}, err
		}
	}
	return page, nil
}

// listOut is a list route's answer: the page of records converted to their
// wire type, or the error that stopped the listing.
func listOut[T, U any](p api.Page[T], err error, out func(T) U) (any, error) {
	if err != nil {
		return nil, err
	}
	return pageOut(p, out), nil
}

// listOrder reads a list's order query parameter: asc (the default) or
// desc, newest first.
func listOrder(q url.Values) (order string, desc bool, err error) {
	switch o := q.Get("order"); o {
	case "", "asc":
		return "", false, nil
	case "desc":
		return o, true, nil
	}
	return "", false, httpapi.Errorf(httpapi.CodeInvalidRequest, "order must be asc or desc")
}

// checkState refuses a state filter that is not one of valid.
func checkState(name, got string, valid func(string) bool, list string) error {
	if got != "" && !valid(got) {
		return httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be one of %s", name, list)
	}
	return nil
}

// objectData checks that a body's data member, when present, is a JSON
// object, and returns it compact (nil when absent).
func objectData(name string, v jsontext.Value) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if v.Kind() != '{' {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s must be a JSON object", name)
	}
	c := jsontext.Value(bytes.Clone(v))
	if err := c.Compact(); err != nil {
		return nil, httpapi.Wrap(httpapi.CodeInvalidRequest, err, name+" is not valid JSON")
	}
	return json.RawMessage(c), nil
}
