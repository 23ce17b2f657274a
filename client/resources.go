package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// The management API's resources: scopes, Work, Events, executions, waits,
// artifacts, configuration and toolbelt call records. docs/api.md
// describes every route and shape.

// List is one page of a list route. NextCursor is empty on the last page;
// pass it back, with the same filters, for the next.
type List[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
	// Raw is the response body as the API sent it.
	Raw []byte `json:"-"`
}

// Page selects a page: Limit 0 is the API's default (50); Cursor is the
// previous page's NextCursor.
type Page struct {
	Limit  int
	Cursor string
}

func (p Page) add(q url.Values) {
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
	ID            string        `json:"id"`
	Parent        string        `json:"parent,omitempty"`
	Enabled       bool          `json:"enabled"`
	Removed       bool          `json:"removed"`
	Active        bool          `json:"active"`
	Authorization Authorization `json:"authorization"`
	Bindings      []Binding     `json:"bindings"`
	Routes        []Route       `json:"routes"`
	Generation    int64         `json:"generation"`
	Read          `json:"-"`
}

// Authorization is a scope's effective ceiling.
type Authorization struct {
	Operations []string `json:"operations"`
	Reads      []string `json:"reads"`
}

// Binding is a binding's effective authority. Secrets maps environment
// variables to secret names (never references).
type Binding struct {
	ID         string              `json:"id"`
	Executor   string              `json:"executor"`
	Operations []string            `json:"operations"`
	Grants     map[string][]string `json:"grants"`
	Secrets    map[string]string   `json:"secrets"`
	Requires   []string            `json:"requires"`
	Playbook   string              `json:"playbook,omitempty"`
}

// Route is one ordered route of a scope.
type Route struct {
	ID          string `json:"id"`
	MatchType   string `json:"match_type"`
	MatchSource string `json:"match_source,omitempty"`
	Binding     string `json:"binding,omitempty"`
	Effect      string `json:"effect"`
}

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
type TraceRequest struct {
	Type           string         `json:"type"`
	Source         string         `json:"source,omitempty"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	WorkID         string         `json:"work_id,omitempty"`
	Data           jsontext.Value `json:"data,omitempty"`
}

// RouteVerdict is one route's verdict in a Decision.
type RouteVerdict struct {
	Route   string `json:"route"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Wake is a Wait an event satisfies.
type Wake struct {
	Work   string `json:"work"`
	Wait   string `json:"wait"`
	Reason string `json:"reason"`
}

// Decision is how the router handles (or would handle) an event.
type Decision struct {
	Routes     []RouteVerdict `json:"routes"`
	Work       string         `json:"work,omitempty"`
	WorkState  string         `json:"work_state,omitempty"`
	Effect     string         `json:"effect"`
	Detail     string         `json:"detail"`
	Route      string         `json:"route,omitempty"`
	Binding    string         `json:"binding,omitempty"`
	Wait       string         `json:"wait,omitempty"`
	OtherWakes []Wake         `json:"other_wakes"`
	Started    string         `json:"started,omitempty"`
}

// Trace is the answer of a route trace.
type Trace struct {
	Scope      string   `json:"scope"`
	Generation int64    `json:"generation"`
	Decision   Decision `json:"decision"`
	Raw        []byte   `json:"-"`
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
type Sample struct {
	Name  string         `json:"name"`
	Event jsontext.Value `json:"event"`
}

// RouteSamples lists the sample Events the scope's route handlers offer
// (none in this release).
func (c *Client) RouteSamples(ctx context.Context, scope string) (*List[Sample], error) {
	return list[Sample](ctx, c, "/v1/scopes/"+PathEscape(scope)+"/route/samples")
}

// ---- work ----

// Work is a unit of work.
type Work struct {
	ID             string         `json:"id"`
	Scope          string         `json:"scope"`
	Binding        string         `json:"binding"`
	State          string         `json:"state"`
	BlockedReason  string         `json:"blocked_reason,omitempty"`
	BlockedDetail  string         `json:"blocked_detail,omitempty"`
	Parent         string         `json:"parent,omitempty"`
	CreatedEvent   string         `json:"created_event"`
	OutcomeMessage string         `json:"outcome_message,omitempty"`
	OutcomeData    jsontext.Value `json:"outcome_data,omitempty"`
	Grants         []string       `json:"grants"`
	InputWatermark int64          `json:"input_watermark"`
	InputCount     int64          `json:"input_count"`
	Attempts       int            `json:"attempts"`
	Revision       int64          `json:"revision"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	Read           `json:"-"`
}

// Terminal reports whether the Work has finished.
func (w *Work) Terminal() bool {
	return w.State == "succeeded" || w.State == "failed" || w.State == "cancelled"
}

// Held reports whether the Work is held (not started until a retry).
func (w *Work) Held() bool { return w.BlockedReason != "" }

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
type Input struct {
	Type string         `json:"type,omitempty"`
	Data jsontext.Value `json:"data,omitempty"`
}

// CreateWorkRequest is a manual Work.
type CreateWorkRequest struct {
	Scope string `json:"scope"`
	// Binding may be empty when the scope has exactly one.
	Binding        string   `json:"binding,omitempty"`
	Input          *Input   `json:"input,omitempty"`
	CorrelationKey string   `json:"correlation_key,omitempty"`
	Grants         []string `json:"grants,omitempty"`
}

// Event is an accepted Event.
type Event struct {
	Seq            int64          `json:"seq"`
	ID             string         `json:"id"`
	Type           string         `json:"type"`
	Source         string         `json:"source"`
	Scope          string         `json:"scope"`
	Work           string         `json:"work,omitempty"`
	Execution      string         `json:"execution,omitempty"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	Data           jsontext.Value `json:"data"`
	Parent         string         `json:"parent,omitempty"`
	Root           string         `json:"root"`
	Depth          int            `json:"depth"`
	Actor          string         `json:"actor,omitempty"`
	DeliveryID     string         `json:"delivery_id,omitempty"`
	AcceptedAt     time.Time      `json:"accepted_at"`
	Read           `json:"-"`
}

// CreatedWork is the answer of a Work creation.
type CreatedWork struct {
	Work         Work  `json:"work"`
	CreatedEvent Event `json:"created_event"`
	InputEvent   Event `json:"input_event"`
	// Existing: the Work already existed under this Idempotency-Key.
	Existing bool `json:"existing"`
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
	Event     Event      `json:"event"`
	Work      Work       `json:"work"`
	Execution *Execution `json:"execution,omitempty"`
	Existing  bool       `json:"existing"`
	Mutation  `json:"-"`
}

func (c *Client) control(ctx context.Context, path, reason string, opts *RequestOptions) (*Controlled, error) {
	body := struct {
		Reason string `json:"reason,omitempty"`
	}{reason}
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
type WakeRequest struct {
	Type string         `json:"type,omitempty"`
	Data jsontext.Value `json:"data,omitempty"`
}

// Woken is the answer of a wake.
type Woken struct {
	Event    Event    `json:"event"`
	Decision Decision `json:"decision"`
	Matched  bool     `json:"matched"`
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
type EmitRequest struct {
	Scope          string         `json:"scope,omitempty"`
	Type           string         `json:"type"`
	Data           jsontext.Value `json:"data,omitempty"`
	CorrelationKey string         `json:"correlation_key,omitempty"`
	Parent         string         `json:"parent,omitempty"`
}

// Emitted is the answer of an emit.
type Emitted struct {
	Event    Event    `json:"event"`
	Decision Decision `json:"decision"`
	Existing bool     `json:"existing"`
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
	ID             string    `json:"id"`
	Work           string    `json:"work"`
	Scope          string    `json:"scope"`
	Binding        string    `json:"binding"`
	Executor       string    `json:"executor"`
	Generation     int64     `json:"generation"`
	Epoch          int64     `json:"epoch"`
	Owner          string    `json:"owner"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Deadline       time.Time `json:"deadline"`
	State          string    `json:"state"`
	InputWatermark int64     `json:"input_watermark"`
	Result         string    `json:"result,omitempty"`
	Message        string    `json:"message,omitempty"`
	ExitCode       *int      `json:"exit_code,omitempty"`
	Revision       int64     `json:"revision"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Read           `json:"-"`
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
	ID           string    `json:"id"`
	Work         string    `json:"work"`
	Scope        string    `json:"scope"`
	Execution    string    `json:"execution,omitempty"`
	Epoch        int64     `json:"epoch"`
	Registration string    `json:"registration,omitempty"`
	Types        []string  `json:"types"`
	Keys         []string  `json:"keys"`
	OnWorkKeys   bool      `json:"on_work_keys"`
	Watermark    int64     `json:"watermark"`
	Timer        string    `json:"timer,omitempty"`
	TimeoutAt    time.Time `json:"timeout_at,omitzero"`
	State        string    `json:"state"`
	SatisfiedBy  string    `json:"satisfied_by,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	Read         `json:"-"`
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
	ID        string    `json:"id"`
	Execution string    `json:"execution"`
	Work      string    `json:"work"`
	Name      string    `json:"name"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
	Read      `json:"-"`
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
type Diagnostic struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Remedy  string `json:"remedy"`
}

func (d Diagnostic) String() string {
	p := d.Pointer
	if p == "" {
		p = "(document)"
	}
	return p + ": " + d.Code + ": " + d.Remedy
}

// Warning is something a valid configuration probably did not mean.
type Warning struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (w Warning) String() string {
	p := w.Pointer
	if p == "" {
		p = "(document)"
	}
	return p + ": " + w.Code + ": " + w.Message
}

// Config is the active configuration generation; Config is the normalized
// document with every secret reference redacted.
type Config struct {
	Generation int64          `json:"generation"`
	Hash       string         `json:"hash"`
	Config     jsontext.Value `json:"config"`
	Actor      string         `json:"actor"`
	CreatedAt  time.Time      `json:"created_at"`
	Read       `json:"-"`
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
	Valid       bool         `json:"valid"`
	Hash        string       `json:"hash,omitempty"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	Warnings    []Warning    `json:"warnings"`
	Raw         []byte       `json:"-"`
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
	body := struct {
		Config jsontext.Value `json:"config"`
	}{v}
	var out Validation
	m, err := post(ctx, c, "/v1/config/validate", body, nil, false, &out)
	out.Raw = m.Raw
	return &out, err
}

// Applied is the answer of a config apply.
type Applied struct {
	Generation         int64     `json:"generation"`
	Hash               string    `json:"hash"`
	PreviousGeneration int64     `json:"previous_generation"`
	Warnings           []Warning `json:"warnings"`
	Mutation           `json:"-"`
}

// ApplyConfig publishes a configuration document as the next generation.
// expectedGeneration must be the active generation (else
// stale_generation); hash, when not empty, must be the document's hash.
func (c *Client) ApplyConfig(ctx context.Context, doc []byte, expectedGeneration int64, hash string, opts *RequestOptions) (*Applied, error) {
	v, err := configBody(doc)
	if err != nil {
		return nil, err
	}
	body := struct {
		Config             jsontext.Value `json:"config"`
		ExpectedGeneration int64          `json:"expected_generation"`
		Hash               string         `json:"hash,omitempty"`
	}{v, expectedGeneration, hash}
	var out Applied
	m, err := post(ctx, c, "/v1/config/apply", body, opts, true, &out)
	out.Mutation = m
	return &out, err
}

// ---- toolbelt call records ----

// ToolbeltCall is one toolbelt request or refusal.
type ToolbeltCall struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Operation string    `json:"operation"`
	Execution string    `json:"execution,omitempty"`
	Epoch     int64     `json:"epoch,omitempty"`
	TokenID   string    `json:"token_id,omitempty"`
	Result    string    `json:"result"`
	Gate      string    `json:"gate,omitempty"`
	Replayed  bool      `json:"replayed,omitempty"`
	At        time.Time `json:"at"`
}

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

// ---- error helpers ----

// IsScopeInUse: a removed or reparented scope still has unfinished Work.
func IsScopeInUse(err error) bool { return isCode(err, "scope_in_use") }

// IsInvalidConfig: the configuration does not validate; the *APIError's
// Diagnostics say why.
func IsInvalidConfig(err error) bool { return isCode(err, "invalid_config") }

// IsIdempotencyKeyRequired: the route needs an Idempotency-Key (400).
func IsIdempotencyKeyRequired(err error) bool { return isCode(err, "idempotency_key_required") }

// IsCursorError: a list cursor was refused (invalid_cursor,
// cursor_mismatch or cursor_expired); start the listing again.
func IsCursorError(err error) bool {
	c := ErrorCode(err)
	return c == "invalid_cursor" || c == "cursor_mismatch" || c == "cursor_expired"
}

// IsRangeNotSatisfiable: the byte range lies past the artifact's end, or
// more than one was asked (416).
func IsRangeNotSatisfiable(err error) bool { return isCode(err, "range_not_satisfiable") }

// Diagnostics returns the configuration diagnostics an invalid_config
// refusal carries.
func Diagnostics(err error) []Diagnostic {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Diagnostics
	}
	return nil
}
