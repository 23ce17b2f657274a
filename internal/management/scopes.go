package management

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The scope routes, read from the active configuration generation: list,
// get, route trace and route samples. They never show a secret reference
// or an executor's config (GET /v1/config shows the redacted document).

func orEmptyList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// scopeKey is a position in the scope listing: the configuration
// generation the listing was first read at and, after a page, the last
// scope id it returned. A cursor's bound is the generation alone.
type scopeKey struct {
	Generation int64  `json:"g"`
	ID         string `json:"i"`
}

// scopeFilters are the filters of GET /v1/scopes, bound into its cursors:
// none yet, so a cursor binds to the endpoint alone.
type scopeFilters struct{}

// listScopes serves GET /v1/scopes: every scope of the active generation,
// tombstones included, by id, paged on the id. The set of scopes is fixed
// within a generation, so the generation is the listing's captured bound:
// a cursor read under another generation is refused with cursor_mismatch
// (the scopes may have changed), and the listing starts again.
func (rs *Resources) listScopes(r *http.Request) (any, error) {
	_, limit, cursor, err := listQuery(r)
	if err != nil {
		return nil, err
	}
	snap := rs.config.Active()
	scopes := snap.Scopes()
	start := 0
	if cursor != "" {
		ks, err := DecodeCursor[scopeKey](rs.cursors, r, scopeFilters{}, cursor)
		if err != nil {
			return nil, err
		}
		if ks.Bound.Generation != snap.Generation || ks.After.Generation != snap.Generation {
			return nil, httpapi.Wrap(httpapi.CodeCursorMismatch, httpapi.ErrCursorMismatch, fmt.Sprintf(
				"the cursor was issued under configuration generation %d and generation %d is active now, so the scopes may have changed; start the listing again without a cursor",
				ks.Bound.Generation, snap.Generation))
		}
		// Scopes are sorted by id: start after the last one returned.
		i, found := slices.BinarySearchFunc(scopes, ks.After.ID, func(sc *config.EffectiveScope, id string) int { return strings.Compare(sc.ID, id) })
		if found {
			i++
		}
		start = i
	}
	end := min(start+limit, len(scopes))
	page := api.Page[api.Scope]{Items: make([]api.Scope, 0, end-start)}
	for _, sc := range scopes[start:end] {
		page.Items = append(page.Items, scopeOut(sc, snap.Generation))
	}
	if end < len(scopes) {
		ks := Keyset[scopeKey]{Bound: scopeKey{Generation: snap.Generation}, After: scopeKey{Generation: snap.Generation, ID: scopes[end-1].ID}}
		if page.NextCursor, err = EncodeCursor(rs.cursors, r, scopeFilters{}, ks); err != nil {
			return nil, err
		}
	}
	return page, nil
}

func (rs *Resources) scope(r *http.Request) (*config.Snapshot, *config.EffectiveScope, error) {
	id := r.PathValue("id")
	snap := rs.config.Active()
	sc, ok := snap.Scope(id)
	if !ok {
		return nil, nil, httpapi.Errorf(httpapi.CodeNotFound, "no scope has id %s in configuration generation %d (open-conduit scopes lists them)", httpapi.Clip(id), snap.Generation)
	}
	return snap, sc, nil
}

func (rs *Resources) getScope(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	snap, sc, err := rs.scope(r)
	if err != nil {
		return nil, err
	}
	return httpapi.Tagged(fmt.Sprintf("scope/%s/%d", sc.ID, snap.Generation), scopeOut(sc, snap.Generation)), nil
}

// TraceRequest is the body of POST /v1/scopes/{id}/route/trace: a
// hypothetical Event.
type TraceRequest struct {
	Type string `json:"type"`
	// Source defaults to core.manual.
	Source         string `json:"source,omitempty"`
	CorrelationKey string `json:"correlation_key,omitempty"`
	// WorkID, without a correlation key, resolves the event to that Work
	// (a Work's id is one of its keys).
	WorkID string         `json:"work_id,omitempty"`
	Data   jsontext.Value `json:"data,omitempty"`
	// Sample names one of the scope's samples (GET …/route/samples):
	// the Event is that sample's, and type, source, correlation_key and
	// data, when given, replace its own.
	Sample string `json:"sample,omitempty"`
}

// traceRoute answers how the router would handle a hypothetical event in
// the scope now, against the active generation and the current Work
// state. Nothing is accepted, routed or recorded. An event acceptance
// would refuse is refused with invalid_request.
func (rs *Resources) traceRoute(r *http.Request) (any, error) {
	var req TraceRequest
	if err := httpapi.DecodeBody(r, &req); err != nil {
		return nil, err
	}
	snap, sc, err := rs.scope(r)
	if err != nil {
		return nil, err
	}
	if req.Sample != "" {
		sm, ok := rs.findSample(sc, req.Sample)
		if !ok {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "scope %s offers no sample %s (open-conduit route --samples --scope %s lists them)", httpapi.Clip(sc.ID), httpapi.Clip(req.Sample), httpapi.Clip(sc.ID))
		}
		req.Type = cmp.Or(req.Type, sm.Type)
		req.Source = cmp.Or(req.Source, sm.Source)
		req.CorrelationKey = cmp.Or(req.CorrelationKey, sm.CorrelationKey)
		if len(req.Data) == 0 && len(sm.Data) > 0 {
			req.Data = jsontext.Value(sm.Data)
		}
	}
	data, err := objectData("data", req.Data)
	if err != nil {
		return nil, err
	}
	key := req.CorrelationKey
	if key == "" {
		key = req.WorkID
	}
	ev := storage.Event{Type: req.Type, Source: req.Source, Scope: sc.ID, Work: req.WorkID, CorrelationKey: key, Data: data}
	if err := kernel.CheckTraceEvent(&ev); err != nil {
		return nil, err
	}
	if !knownTraceSource(ev.Source) {
		registered, admits := false, false
		if rs.sources != nil {
			registered, admits = rs.sources(ev.Source, sc.ID)
		}
		if registered && !admits {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "source %s is an ingress that sends no event to scope %s: trace it in a scope its configuration routes to, or trace an operator's event (leave source out)",
				httpapi.Clip(ev.Source), httpapi.Clip(sc.ID))
		}
		if !registered {
			return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "source %s is unknown: no ingress of this daemon registers it and no package owns type %s; trace an operator's event (leave source out, or %s) or an action's (%s)",
				httpapi.Clip(ev.Source), httpapi.Clip(ev.Type), kernel.SourceManual, kernel.SourceAction)
		}
	}
	d, err := rs.control.Trace(r.Context(), ev)
	if err != nil {
		return nil, err
	}
	return traceOut(sc.ID, snap.Generation, d), nil
}

// knownTraceSource reports whether a trace may name source in every
// scope: the operator's (core.manual) and an action's (core.action). A
// registered ingress's source is admitted only in the scopes its ingress
// admits (TraceSources); the spec also admits sources of types a package
// owns, and this release has no package, so every other source is
// unknown and refused rather than explained.
func knownTraceSource(source string) bool {
	return source == kernel.SourceManual || source == kernel.SourceAction
}

// routeSamples serves GET /v1/scopes/{id}/route/samples: the named
// sample Events the scope's routes offer in the active generation (a
// route's samples, in route order), then those of the ingresses that send
// Events to the scope. An inactive scope's routes offer none.
func (rs *Resources) routeSamples(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	_, sc, err := rs.scope(r)
	if err != nil {
		return nil, err
	}
	items := []api.RouteSample{}
	for _, sm := range rs.scopeSamples(sc) {
		items = append(items, sampleOut(sm))
	}
	return api.Page[api.RouteSample]{Items: items}, nil
}

// scopeSamples are the samples offered in the scope: its routes' (when
// the scope is active), then the ingresses'. A name the routes use hides
// an ingress's sample of the same name.
func (rs *Resources) scopeSamples(sc *config.EffectiveScope) []Sample {
	var out []Sample
	seen := map[string]bool{}
	if sc.Active {
		for _, rt := range sc.Routes {
			for _, sm := range rt.Samples {
				seen[sm.Name] = true
				out = append(out, Sample{Name: sm.Name, Type: sm.Type, Source: sm.Source, CorrelationKey: sm.CorrelationKey, Data: sm.Data, Route: rt.ID})
			}
		}
	}
	if rs.samples != nil && sc.Active {
		for _, sm := range rs.samples(sc.ID) {
			if seen[sm.Name] {
				continue
			}
			seen[sm.Name] = true
			out = append(out, sm)
		}
	}
	return out
}

func (rs *Resources) findSample(sc *config.EffectiveScope, name string) (Sample, bool) {
	for _, sm := range rs.scopeSamples(sc) {
		if sm.Name == name {
			return sm, true
		}
	}
	return Sample{}, false
}

// sampleOut is a sample on the wire: its name, the route that offers it
// and its Event as a trace request would send it.
func sampleOut(sm Sample) api.RouteSample {
	ev := api.TraceRequest{Type: sm.Type, Source: sm.Source, CorrelationKey: sm.CorrelationKey, Data: sm.Data}
	if ev.Source == "" {
		ev.Source = kernel.SourceManual
	}
	raw, _ := json.Marshal(ev)
	return api.RouteSample{Name: sm.Name, Route: sm.Route, Event: raw}
}
