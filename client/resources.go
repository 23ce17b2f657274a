package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/api"
)

// The management API's resources: scopes, Work, Events, executions, waits,
// artifacts, configuration and toolbelt call records. docs/api.md
// describes every route and shape.

// List is one page of a list route. NextCursor is empty on the last page;
// pass it back, with the same filters, for the next.
type List[T any] struct {
	api.Page[T]
	// Raw is the response body as the API sent it.
	Raw []byte `json:"-"`
}

// Page selects a page: Limit 0 is the API's default (50); Cursor is the
// previous page's NextCursor.
type Page struct {
	Limit  int
	Cursor string
	// Desc lists newest first (order=desc); the work, events, executions
	// and waits lists take it. A cursor continues in the order it began.
	Desc bool
}

func (p Page) add(q url.Values) {
	if p.Desc {
		q.Set("order", "desc")
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
}

// query renders path with the non-empty values of q.
func query(path string, q url.Values) string {
	for k, v := range q {
		if len(v) == 0 || v[0] == "" {
			delete(q, k)
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Read says how a single read went: its ETag, and NotModified when the
// If-None-Match sent matched (the record's fields are then empty).
type Read struct {
	ETag        string
	NotModified bool
	Raw         []byte
}

func list[T any](ctx context.Context, c *Client, path string) (*List[T], error) {
	var out List[T]
	resp, err := c.decode(ctx, http.MethodGet, path, nil, nil, &out)
	if err != nil {
		return nil, err
	}
	if out.Items == nil {
		out.Items = []T{}
	}
	out.Raw = resp.Body
	return &out, nil
}

func get(ctx context.Context, c *Client, path string, opts *RequestOptions, out any) (Read, error) {
	resp, err := c.decode(ctx, http.MethodGet, path, nil, opts, out)
	if err != nil {
		return Read{}, err
	}
	return Read{ETag: resp.Header.Get("ETag"), NotModified: resp.Status == http.StatusNotModified, Raw: resp.Body}, nil
}

// Mutation says how a mutation went.
type Mutation struct {
	Status int
	// Replayed: the API replayed the response of an earlier request with
	// the same Idempotency-Key.
	Replayed bool
	// IdempotencyKey is the key the request was sent with.
	IdempotencyKey string
	Raw            []byte
}

func post(ctx context.Context, c *Client, path string, body any, opts *RequestOptions, idempotent bool, out any) (Mutation, error) {
	if idempotent {
		opts = withKey(opts)
	}
	resp, err := c.decode(ctx, http.MethodPost, path, body, opts, out)
	if err != nil {
		return Mutation{}, err
	}
	m := Mutation{Status: resp.Status, Replayed: resp.Replayed, Raw: resp.Body}
	if opts != nil {
		m.IdempotencyKey = opts.IdempotencyKey
	}
	return m, nil
}

// ---- scopes ----

// Scope is a scope of the active configuration generation.
type Scope struct {
	api.Scope
	Read `json:"-"`
}

// Authorization is a scope's effective ceiling.
type Authorization = api.Authorization

// Binding is a binding's effective authority. Secrets maps environment
// variables to secret names (never references).
type Binding = api.Binding

// Route is one ordered route of a scope.
type Route = api.Route

// Scopes lists the scopes of the active generation by id, one page at a
// time: pass the previous page's NextCursor in p for the next. A cursor
// from an earlier generation is refused with cursor_mismatch.
func (c *Client) Scopes(ctx context.Context, p Page) (*List[Scope], error) {
	q := url.Values{}
	p.add(q)
	return list[Scope](ctx, c, query("/v1/scopes", q))
}

// Scope reads one scope.
func (c *Client) Scope(ctx context.Context, id string, opts *RequestOptions) (*Scope, error) {
	var out Scope
	rd, err := get(ctx, c, "/v1/scopes/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// TraceRequest is a hypothetical Event for a route trace.
type TraceRequest = api.TraceRequest

// RouteVerdict is one route's verdict in a Decision.
type RouteVerdict = api.RouteVerdict

// Wake is a Wait an event satisfies.
type Wake = api.Wake

// Decision is how the router handles (or would handle) an event.
type Decision = api.Decision

// Trace is the answer of a route trace.
type Trace struct {
	api.Trace
	Raw []byte `json:"-"`
}

// TraceRoute asks how the router would handle ev in scope now; nothing is
// accepted or recorded.
func (c *Client) TraceRoute(ctx context.Context, scope string, ev TraceRequest) (*Trace, error) {
	var out Trace
	m, err := post(ctx, c, "/v1/scopes/"+PathEscape(scope)+"/route/trace", ev, nil, false, &out)
	out.Raw = m.Raw
	return &out, err
}

// Sample is a named sample Event a scope's route handlers offer.
type Sample = api.RouteSample

// RouteSamples lists the sample Events the scope's route handlers offer
// (none in this release).
func (c *Client) RouteSamples(ctx context.Context, scope string) (*List[Sample], error) {
	return list[Sample](ctx, c, "/v1/scopes/"+PathEscape(scope)+"/route/samples")
}

// ---- work ----

// Work is a unit of work.
type Work struct {
	api.Work
	Read `json:"-"`
}

// WorkFilter filters the Work list.
type WorkFilter struct {
	Scope, State, Parent string
	Page
}

// ListWork lists Work by creation time, oldest first.
func (c *Client) ListWork(ctx context.Context, f WorkFilter) (*List[Work], error) {
	q := url.Values{"scope": {f.Scope}, "state": {f.State}, "parent": {f.Parent}}
	f.Page.add(q)
	return list[Work](ctx, c, query("/v1/work", q))
}

// GetWork reads one Work. With opts.IfNoneMatch set to its last ETag, an
// unchanged Work comes back with NotModified.
func (c *Client) GetWork(ctx context.Context, id string, opts *RequestOptions) (*Work, error) {
	var out Work
	rd, err := get(ctx, c, "/v1/work/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// Input is the input bound to a manual Work.
type Input = api.Input

// CreateWorkRequest is a manual Work.
type CreateWorkRequest = api.CreateWorkRequest

// Event is an accepted Event.
type Event struct {
	api.Event
	Read `json:"-"`
}

// CreatedWork is the answer of a Work creation.
type CreatedWork struct {
	api.CreatedWork
	Mutation `json:"-"`
}

// CreateWork creates a ready Work with its input. It sends
// opts.IdempotencyKey, or a fresh key; the Work's id is derived from the
// key, so retrying with the same key never creates a second Work.
func (c *Client) CreateWork(ctx context.Context, req CreateWorkRequest, opts *RequestOptions) (*CreatedWork, error) {
	var out CreatedWork
	m, err := post(ctx, c, "/v1/work", req, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// Controlled is the answer of a control: its event and the state it left.
type Controlled struct {
	api.Controlled
	Mutation `json:"-"`
}

func (c *Client) control(ctx context.Context, path, reason string, opts *RequestOptions) (*Controlled, error) {
	body := api.ControlRequest{Reason: reason}
	var out Controlled
	m, err := post(ctx, c, path, body, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// CancelWork cancels a Work and fences its live attempt.
func (c *Client) CancelWork(ctx context.Context, id, reason string, opts *RequestOptions) (*Controlled, error) {
	return c.control(ctx, "/v1/work/"+PathEscape(id)+"/cancel", reason, opts)
}

// RetryWork retries a failed or cancelled Work, or releases a held one.
func (c *Client) RetryWork(ctx context.Context, id, reason string, opts *RequestOptions) (*Controlled, error) {
	return c.control(ctx, "/v1/work/"+PathEscape(id)+"/retry", reason, opts)
}

// WakeRequest is the event a wake sends; both fields are optional.
type WakeRequest = api.WakeRequest

// Woken is the answer of a wake.
type Woken struct {
	api.Woken
	Mutation `json:"-"`
}

// WakeWork sends an event on the Work's own key and reports whether it
// satisfied a Wait.
func (c *Client) WakeWork(ctx context.Context, id string, req WakeRequest, opts *RequestOptions) (*Woken, error) {
	var out Woken
	m, err := post(ctx, c, "/v1/work/"+PathEscape(id)+"/wake", req, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// ---- events ----

// EventFilter filters the Event list.
type EventFilter struct {
	Scope, Work, Execution, Type, Root, CorrelationKey string
	Page
}

// ListEvents lists Events by acceptance sequence.
func (c *Client) ListEvents(ctx context.Context, f EventFilter) (*List[Event], error) {
	q := url.Values{"scope": {f.Scope}, "work": {f.Work}, "execution": {f.Execution}, "type": {f.Type}, "root": {f.Root}, "correlation_key": {f.CorrelationKey}}
	f.Page.add(q)
	return list[Event](ctx, c, query("/v1/events", q))
}

// GetEvent reads one Event.
func (c *Client) GetEvent(ctx context.Context, id string, opts *RequestOptions) (*Event, error) {
	var out Event
	rd, err := get(ctx, c, "/v1/events/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// EventChain lists the causal tree the Event belongs to: its root and
// every event derived from it, by acceptance sequence.
func (c *Client) EventChain(ctx context.Context, id string, p Page) (*List[Event], error) {
	q := url.Values{}
	p.add(q)
	return list[Event](ctx, c, query("/v1/events/"+PathEscape(id)+"/chain", q))
}

// EmitRequest is an operator's Event: a core.manual root, or derived from
// Parent (whose scope it takes when Scope is empty).
type EmitRequest = api.EmitRequest

// Emitted is the answer of an emit.
type Emitted struct {
	api.Emitted
	Mutation `json:"-"`
}

// Emit accepts an operator's Event and routes it at once.
func (c *Client) Emit(ctx context.Context, req EmitRequest, opts *RequestOptions) (*Emitted, error) {
	var out Emitted
	m, err := post(ctx, c, "/v1/events", req, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// ---- executions ----

// Execution is one attempt of a Work. ExitCode is the exit code the
// daemon observed when its segment ended; nil (exit_code absent) while it
// observed none.
type Execution struct {
	api.Execution
	Read `json:"-"`
}

// ExecutionFilter filters the execution list.
type ExecutionFilter struct {
	Work, Scope, State string
	Page
}

// ListExecutions lists executions by creation time.
func (c *Client) ListExecutions(ctx context.Context, f ExecutionFilter) (*List[Execution], error) {
	q := url.Values{"work": {f.Work}, "scope": {f.Scope}, "state": {f.State}}
	f.Page.add(q)
	return list[Execution](ctx, c, query("/v1/executions", q))
}

// GetExecution reads one execution.
func (c *Client) GetExecution(ctx context.Context, id string, opts *RequestOptions) (*Execution, error) {
	var out Execution
	rd, err := get(ctx, c, "/v1/executions/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// CancelExecution fences one attempt and holds its Work
// (operator_cancelled) until a manual retry.
func (c *Client) CancelExecution(ctx context.Context, id, reason string, opts *RequestOptions) (*Controlled, error) {
	return c.control(ctx, "/v1/executions/"+PathEscape(id)+"/cancel", reason, opts)
}

// ---- waits ----

// Wait is a registered predicate that wakes a Work.
type Wait struct {
	api.Wait
	Read `json:"-"`
}

// WaitFilter filters the wait list.
type WaitFilter struct {
	Work, Scope, State string
	Page
}

// ListWaits lists waits by creation time.
func (c *Client) ListWaits(ctx context.Context, f WaitFilter) (*List[Wait], error) {
	q := url.Values{"work": {f.Work}, "scope": {f.Scope}, "state": {f.State}}
	f.Page.add(q)
	return list[Wait](ctx, c, query("/v1/waits", q))
}

// GetWait reads one wait.
func (c *Client) GetWait(ctx context.Context, id string, opts *RequestOptions) (*Wait, error) {
	var out Wait
	rd, err := get(ctx, c, "/v1/waits/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// ---- artifacts ----

// Artifact is the metadata of bytes an execution produced.
type Artifact struct {
	api.Artifact
	Read `json:"-"`
}

// ArtifactFilter filters the artifact list.
type ArtifactFilter struct {
	Execution, Work string
	Page
}

// ListArtifacts lists artifacts by creation time.
func (c *Client) ListArtifacts(ctx context.Context, f ArtifactFilter) (*List[Artifact], error) {
	q := url.Values{"execution": {f.Execution}, "work": {f.Work}}
	f.Page.add(q)
	return list[Artifact](ctx, c, query("/v1/artifacts", q))
}

// GetArtifact reads one artifact's metadata.
func (c *Client) GetArtifact(ctx context.Context, id string, opts *RequestOptions) (*Artifact, error) {
	var out Artifact
	rd, err := get(ctx, c, "/v1/artifacts/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// Content is what an artifact content read returned.
type Content struct {
	// Status is 200 (the whole body) or 206 (a range).
	Status int
	// ContentRange is the Content-Range of a 206 ("bytes a-b/size").
	ContentRange string
	// Written is how many bytes were copied to the writer.
	Written int64
}

// ArtifactContent copies an artifact's bytes to w as they arrive. rng, if
// not empty, is one byte range: "a-b", "a-" or "-n" (sent as Range:
// bytes=rng); a range past the end is refused with range_not_satisfiable.
func (c *Client) ArtifactContent(ctx context.Context, id, rng string, w io.Writer) (*Content, error) {
	var h http.Header
	if rng != "" {
		h = http.Header{"Range": {"bytes=" + rng}}
	}
	resp, err := c.send(ctx, http.MethodGet, "/v1/artifacts/"+PathEscape(id)+"/content", nil, nil, h)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	out := &Content{Status: resp.StatusCode, ContentRange: resp.Header.Get("Content-Range"), Written: n}
	if err != nil {
		return out, fmt.Errorf("reading the artifact from the daemon failed after %d bytes: %w", n, err)
	}
	return out, nil
}

// ---- configuration ----

// Diagnostic is one problem of a configuration: a JSON pointer, a code
// and a remedy (never a configured value).
type Diagnostic = api.Diagnostic

// Warning is something a valid configuration probably did not mean.
type Warning = api.Warning

// apiConfig names the embedded api.Config so that its field Config (the
// document) is not shadowed by the embedding.
type apiConfig = api.Config

// Config is the active configuration generation; Config is the normalized
// document with every secret reference redacted.
type Config struct {
	apiConfig
	Read `json:"-"`
}

// Config reads the active configuration generation.
func (c *Client) Config(ctx context.Context, opts *RequestOptions) (*Config, error) {
	var out Config
	rd, err := get(ctx, c, "/v1/config", opts, &out)
	out.Read = rd
	return &out, err
}

// Validation is the answer of a config validation.
type Validation struct {
	api.Validation
	Raw []byte `json:"-"`
}

func configBody(doc []byte) (jsontext.Value, error) {
	v := jsontext.Value(doc)
	if !v.IsValid() || v.Kind() != '{' {
		return nil, errors.New("the configuration must be one JSON object")
	}
	return v, nil
}

// ValidateConfig checks a configuration document against what the daemon
// registers, with no effect.
func (c *Client) ValidateConfig(ctx context.Context, doc []byte) (*Validation, error) {
	v, err := configBody(doc)
	if err != nil {
		return nil, err
	}
	body := api.ValidateRequest{Config: []byte(v)}
	var out Validation
	m, err := post(ctx, c, "/v1/config/validate", body, nil, false, &out)
	out.Raw = m.Raw
	return &out, err
}

// Applied is the answer of a config apply.
type Applied struct {
	api.Applied
	Mutation `json:"-"`
}

// ApplyConfig publishes a configuration document as the next generation.
// expectedGeneration must be the active generation (else
// stale_generation); hash, when not empty, must be the document's hash.
func (c *Client) ApplyConfig(ctx context.Context, doc []byte, expectedGeneration int64, hash string, opts *RequestOptions) (*Applied, error) {
	v, err := configBody(doc)
	if err != nil {
		return nil, err
	}
	body := api.ApplyRequest{Config: []byte(v), ExpectedGeneration: expectedGeneration, Hash: hash}
	var out Applied
	m, err := post(ctx, c, "/v1/config/apply", body, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// SetConfig changes the member at an RFC 6901 pointer of the active
// configuration to value (one JSON value) and publishes the result as the
// next generation, as ApplyConfig does. expectedGeneration must be the
// active generation (else stale_generation).
func (c *Client) SetConfig(ctx context.Context, pointer string, value []byte, expectedGeneration int64, opts *RequestOptions) (*Applied, error) {
	v := jsontext.Value(bytes.TrimSpace(value))
	if !v.IsValid() {
		return nil, errors.New("the value must be one JSON value")
	}
	body := api.SetRequest{Pointer: pointer, Value: []byte(v), ExpectedGeneration: expectedGeneration}
	var out Applied
	m, err := post(ctx, c, "/v1/config/set", body, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// ---- toolbelt call records ----

// ToolbeltCall is one toolbelt request or refusal.
type ToolbeltCall = api.ToolbeltCall

// ToolbeltCallFilter filters the call records.
type ToolbeltCallFilter struct {
	Execution, Kind, Result string
	Page
}

// ToolbeltCalls lists the toolbelt's call records by time.
func (c *Client) ToolbeltCalls(ctx context.Context, f ToolbeltCallFilter) (*List[ToolbeltCall], error) {
	q := url.Values{"execution": {f.Execution}, "kind": {f.Kind}, "result": {f.Result}}
	f.Page.add(q)
	return list[ToolbeltCall](ctx, c, query("/v1/toolbelt/calls", q))
}

// ---- egress connection records ----

// EgressConnection is one connection through an execution's egress proxy.
type EgressConnection = api.EgressConnection

// EgressConnections lists the connections an execution opened, or tried
// to open, through the egress proxy, oldest first.
func (c *Client) EgressConnections(ctx context.Context, executionID string, p Page) (*List[EgressConnection], error) {
	q := url.Values{}
	p.add(q)
	return list[EgressConnection](ctx, c, query("/v1/executions/"+PathEscape(executionID)+"/egress", q))
}

// ---- error helpers ----

// IsScopeInUse: a removed or reparented scope still has unfinished Work.
func IsScopeInUse(err error) bool { return isCode(err, api.CodeScopeInUse) }

// IsInvalidConfig: the configuration does not validate; the *APIError's
// Diagnostics say why.
func IsInvalidConfig(err error) bool { return isCode(err, api.CodeInvalidConfig) }

// IsIdempotencyKeyRequired: the route needs an Idempotency-Key (400).
func IsIdempotencyKeyRequired(err error) bool { return isCode(err, api.CodeIdempotencyKeyRequired) }

// IsCursorError: a list cursor was refused (invalid_cursor,
// cursor_mismatch or cursor_expired); start the listing again.
func IsCursorError(err error) bool {
	c := ErrorCode(err)
	return c == api.CodeInvalidCursor || c == api.CodeCursorMismatch || c == api.CodeCursorExpired
}

// IsRangeNotSatisfiable: the byte range lies past the artifact's end, or
// more than one was asked (416).
func IsRangeNotSatisfiable(err error) bool { return isCode(err, api.CodeRangeNotSatisfiable) }

// Diagnostics returns the configuration diagnostics an invalid_config
// refusal carries.
func Diagnostics(err error) []Diagnostic {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Diagnostics
	}
	return nil
}
