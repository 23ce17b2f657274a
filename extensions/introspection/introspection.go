package introspection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// Name is the registration name: it owns introspection.*.
const Name = "introspection"

// The operations, and the toolset that grants them all.
const (
	OpWork       = "introspection.work"
	OpEvents     = "introspection.events"
	OpChain      = "introspection.chain"
	OpExecutions = "introspection.executions"
	OpWaits      = "introspection.waits"
	ToolsetRead  = "introspection.reader"
)

// Since is the release the operations joined introspection.reader in.
const Since = "0.1.0"

// Codes of the operations' refusals (422).
const (
	// CodeNotInTree: the Work or Event named is not the caller's Work, one
	// of its descendants or one of theirs; the same whether or not it
	// exists.
	CodeNotInTree = "not_in_tree"
	// CodeReadNotAllowed: the scope's read ceiling does not allow the read.
	CodeReadNotAllowed = "read_not_allowed"
	// CodeInvalidInput: the input does not match the operation's schema.
	CodeInvalidInput = "invalid_input"
)

// Bounds of one answer.
const (
	DefaultLimit = 50
	MaxLimit     = 200
	// MaxTree bounds the descendants introspection.work lists at once.
	MaxTree = 500
	// MaxAncestors bounds the causal chain walked up from an Event.
	MaxAncestors = 256
	// maxDepth bounds the parent walk that decides tree membership.
	maxDepth = 1024
	// maxScan bounds the Events of a causal root scanned for one page of
	// introspection.chain.
	maxScan = 2000
)

// Registration is the extension's registration, built on extension/inproc
// and reading through port. A nil port registers the operations without
// serving them (an offline configuration check and the operations
// reference need only their names); a call then fails. The extension is
// opt-in: only a generation whose entry enables it for a scope declares
// its operations there.
func Registration(port Port) extension.Registration {
	return inproc.Registration(&ext{port: port})
}

type ext struct{ port Port }

// Name is the registration name.
func (*ext) Name() string { return Name }

// OptIn: a configuration without an introspection entry does not enable
// it.
func (*ext) OptIn() bool { return true }

// Toolsets publishes introspection.reader: every operation, each since
// Since.
func (x *ext) Toolsets() []extension.Toolset {
	ts := extension.Toolset{Name: ToolsetRead}
	for _, op := range x.Operations() {
		ts.Operations = append(ts.Operations, extension.ToolsetOperation{Name: op.Name, Since: Since})
	}
	return []extension.Toolset{ts}
}

// Operations are the five reads.
func (x *ext) Operations() []extension.Operation {
	return []extension.Operation{
		{
			Name:    OpWork,
			Summary: "Read this Work, or a Work of its tree, and the Work it created, transitively.",
			InputSchema: schema(`"work":{"type":"string","description":"a Work of this attempt's tree; this attempt's own Work when absent"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":500,"description":"at most this many descendants (default 50)"}`),
			Guidance: "Returns `work` and its `descendants` breadth first (each names its `parent`). " +
				"When `truncated` is true there are more: call again on a descendant to read its part of the tree. " +
				"Only this Work and the Work it created, and theirs, can be read; any other is refused with not_in_tree.",
			Handler: x.work,
		},
		{
			Name:    OpEvents,
			Summary: "Read the Events of a Work of this attempt's tree, page by page.",
			InputSchema: schema(`"work":{"type":"string","description":"a Work of this attempt's tree; this attempt's own Work when absent"},` +
				`"type":{"type":"string","description":"only Events of this type"},` +
				`"after_seq":{"type":"integer","minimum":0,"description":"the next_after_seq of the previous page"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":200,"description":"at most this many Events (default 50)"}`),
			Guidance: "Events come in acceptance order. When the answer has `next_after_seq`, pass it as `after_seq` for the next page; " +
				"without it this was the last page.",
			Handler: x.events,
		},
		{
			Name:    OpChain,
			Summary: "Read the causal chain of an Event of this attempt's tree: what caused it, and the tree's Events of the same root.",
			InputSchema: schemaRequired(`"event"`, `"event":{"type":"string","description":"an Event of a Work of this attempt's tree"},`+
				`"after_seq":{"type":"integer","minimum":0,"description":"the next_after_seq of the previous page of events"},`+
				`"limit":{"type":"integer","minimum":1,"maximum":200,"description":"at most this many events of the root (default 50)"}`),
			Guidance: "`ancestors` runs from the causal root down to the Event's parent; `ancestors_truncated` says the chain goes on " +
				"through an Event outside this tree, which is not shown. `events` are the Events of the same causal root that belong " +
				"to this tree, paged like introspection.events.",
			Handler: x.chain,
		},
		{
			Name:    OpExecutions,
			Summary: "Read the executions (attempts) of a Work of this attempt's tree, page by page.",
			InputSchema: schema(`"work":{"type":"string","description":"a Work of this attempt's tree; this attempt's own Work when absent"},` +
				`"after":{"type":"string","description":"the next of the previous page"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":200,"description":"at most this many executions (default 50)"}`),
			Guidance: "Executions come oldest first. When the answer has `next`, pass it as `after` for the next page.",
			Handler:  x.executions,
		},
		{
			Name:    OpWaits,
			Summary: "Read the waits of a Work of this attempt's tree, page by page.",
			InputSchema: schema(`"work":{"type":"string","description":"a Work of this attempt's tree; this attempt's own Work when absent"},` +
				`"state":{"enum":["active","satisfied","timed_out","cancelled"]},` +
				`"after":{"type":"string","description":"the next of the previous page"},` +
				`"limit":{"type":"integer","minimum":1,"maximum":200,"description":"at most this many waits (default 50)"}`),
			Guidance: "Waits come oldest first. When the answer has `next`, pass it as `after` for the next page.",
			Handler:  x.waits,
		},
	}
}

func schema(props string) json.RawMessage {
	return json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` + props + `}}`)
}

func schemaRequired(required, props string) json.RawMessage {
	return json.RawMessage(`{"type":"object","additionalProperties":false,"required":[` + required + `],"properties":{` + props + `}}`)
}

// refuse is an operation's refusal.
func refuse(code, format string, args ...any) error {
	return &extension.OperationError{Code: code, Message: fmt.Sprintf(format, args...)}
}

var errNotInTree = refuse(CodeNotInTree, "the Work named is not this attempt's Work or one it created (directly or through its children)")

var errEventNotInTree = refuse(CodeNotInTree, "the Event named is not an Event of this attempt's Work or of one it created")

// begin checks what every operation checks before it reads: the scope's
// read ceiling allows read. Whether the generation enables the extension
// is the host's to check: an operation of a generation that does not is
// undeclared, and its call never reaches a handler.
func (x *ext) begin(_ context.Context, auth extension.Authority, read string) error {
	if x.port == nil {
		return errors.New("introspection: registered without a port")
	}
	if !x.port.AuthorizeRead(auth.Scope, read) {
		return refuse(CodeReadNotAllowed, "the read ceiling of scope %s does not allow reading %s", auth.Scope, read)
	}
	return nil
}

// decode decodes an operation's input strictly: unknown members are
// refused.
func decode(op string, input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(CodeInvalidInput, "the input of %s does not match its schema (see its guidance)", op)
	}
	return nil
}

// limit applies the default and the bound of a page.
func limit(op string, n *int, max int) (int, error) {
	switch {
	case n == nil:
		return min(DefaultLimit, max), nil
	case *n < 1 || *n > max:
		return 0, refuse(CodeInvalidInput, "limit of %s is between 1 and %d", op, max)
	}
	return *n, nil
}

// tree decides membership of the caller's Work tree, remembering what it
// found for the rest of the call.
type tree struct {
	port Port
	auth extension.Authority
	in   map[string]bool
}

func (x *ext) tree(auth extension.Authority) *tree {
	return &tree{port: x.port, auth: auth, in: map[string]bool{auth.Work: true}}
}

// contains reports whether the Work id is the caller's Work or a
// descendant of it: its chain of parents reaches the caller's Work within
// the caller's scope.
func (t *tree) contains(ctx context.Context, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	var path []string // the Work walked through, which share the verdict
	verdict := false
	cur := id
	for range maxDepth {
		if v, ok := t.in[cur]; ok {
			verdict = v
			break
		}
		path = append(path, cur)
		w, err := t.port.Work(ctx, cur)
		if errors.Is(err, extension.ErrNotFound) {
			break
		}
		if err != nil {
			return false, err
		}
		if w.Scope != t.auth.Scope || w.Parent == "" {
			break
		}
		cur = w.Parent
	}
	for _, p := range path {
		t.in[p] = verdict
	}
	return verdict, nil
}

// work returns the Work named (the caller's own when id is empty), or
// not_in_tree.
func (t *tree) work(ctx context.Context, id string) (api.Work, error) {
	if id == "" {
		id = t.auth.Work
	}
	ok, err := t.contains(ctx, id)
	if err != nil {
		return api.Work{}, err
	}
	if !ok {
		return api.Work{}, errNotInTree
	}
	w, err := t.port.Work(ctx, id)
	if errors.Is(err, extension.ErrNotFound) {
		return api.Work{}, errNotInTree
	}
	return w, err
}

func answer(v any) (json.RawMessage, error) { return json.Marshal(v) }

// ---- introspection.work ----

type workInput struct {
	Work  string `json:"work"`
	Limit *int   `json:"limit"`
}

// WorkResult is introspection.work's answer.
type WorkResult struct {
	Work        api.Work   `json:"work"`
	Descendants []api.Work `json:"descendants"`
	Truncated   bool       `json:"truncated"`
}

func (x *ext) work(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in workInput
	if err := decode(OpWork, input, &in); err != nil {
		return nil, err
	}
	n, err := limit(OpWork, in.Limit, MaxTree)
	if err != nil {
		return nil, err
	}
	if err := x.begin(ctx, auth, ReadWork); err != nil {
		return nil, err
	}
	w, err := x.tree(auth).work(ctx, in.Work)
	if err != nil {
		return nil, err
	}
	out := WorkResult{Work: w, Descendants: []api.Work{}}
	// Breadth first: every child of the Work, then theirs.
	queue := []string{w.ID}
	for len(queue) > 0 && !out.Truncated {
		parent := queue[0]
		queue = queue[1:]
		var after *Position
		for {
			page, err := x.port.Children(ctx, ListQuery{Scope: auth.Scope, Work: parent, After: after, Limit: min(MaxLimit, n-len(out.Descendants)+1)})
			if err != nil {
				return nil, err
			}
			for _, c := range page {
				if len(out.Descendants) == n {
					out.Truncated = true
					break
				}
				out.Descendants = append(out.Descendants, c)
				queue = append(queue, c.ID)
			}
			if out.Truncated || len(page) == 0 {
				break
			}
			last := page[len(page)-1]
			after = &Position{CreatedAt: last.CreatedAt, ID: last.ID}
		}
	}
	return answer(out)
}

// ---- introspection.events ----

type eventsInput struct {
	Work     string `json:"work"`
	Type     string `json:"type"`
	AfterSeq int64  `json:"after_seq"`
	Limit    *int   `json:"limit"`
}

// EventsResult is introspection.events' answer.
type EventsResult struct {
	Events []api.Event `json:"events"`
	// NextAfterSeq, when set, is the after_seq of the next page.
	NextAfterSeq int64 `json:"next_after_seq,omitempty"`
}

func (x *ext) events(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in eventsInput
	if err := decode(OpEvents, input, &in); err != nil {
		return nil, err
	}
	n, err := limit(OpEvents, in.Limit, MaxLimit)
	if err != nil {
		return nil, err
	}
	if in.AfterSeq < 0 {
		return nil, refuse(CodeInvalidInput, "after_seq of %s is not negative", OpEvents)
	}
	if err := x.begin(ctx, auth, ReadEvents); err != nil {
		return nil, err
	}
	w, err := x.tree(auth).work(ctx, in.Work)
	if err != nil {
		return nil, err
	}
	evs, err := x.port.Events(ctx, EventQuery{Scope: auth.Scope, Work: w.ID, Type: in.Type, AfterSeq: in.AfterSeq, Limit: n + 1})
	if err != nil {
		return nil, err
	}
	out := EventsResult{Events: evs}
	if len(evs) > n {
		out.Events = evs[:n]
		out.NextAfterSeq = evs[n-1].Seq
	}
	return answer(out)
}

// ---- introspection.chain ----

type chainInput struct {
	Event    string `json:"event"`
	AfterSeq int64  `json:"after_seq"`
	Limit    *int   `json:"limit"`
}

// ChainResult is introspection.chain's answer.
type ChainResult struct {
	Event api.Event `json:"event"`
	// Ancestors run from the causal root down to the Event's parent.
	Ancestors []api.Event `json:"ancestors"`
	// AncestorsTruncated: the chain goes on through an Event that is not
	// shown (outside the tree, or beyond MaxAncestors).
	AncestorsTruncated bool `json:"ancestors_truncated"`
	// Events are the tree's Events of the same causal root.
	Events       []api.Event `json:"events"`
	NextAfterSeq int64       `json:"next_after_seq,omitempty"`
}

// visible reports whether an Event of the caller's scope may be shown: it
// belongs to a Work of the tree, or (withWorkless) to no Work at all (an
// operator's or an ingress's root, which caused the tree's history).
func (t *tree) visible(ctx context.Context, ev api.Event, withWorkless bool) (bool, error) {
	if ev.Scope != t.auth.Scope {
		return false, nil
	}
	if ev.Work == "" {
		return withWorkless, nil
	}
	return t.contains(ctx, ev.Work)
}

func (x *ext) chain(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in chainInput
	if err := decode(OpChain, input, &in); err != nil {
		return nil, err
	}
	n, err := limit(OpChain, in.Limit, MaxLimit)
	if err != nil {
		return nil, err
	}
	if in.Event == "" || in.AfterSeq < 0 {
		return nil, refuse(CodeInvalidInput, "%s takes an event and a non-negative after_seq", OpChain)
	}
	if err := x.begin(ctx, auth, ReadEvents); err != nil {
		return nil, err
	}
	t := x.tree(auth)
	ev, err := x.port.Event(ctx, in.Event)
	if errors.Is(err, extension.ErrNotFound) {
		return nil, errEventNotInTree
	}
	if err != nil {
		return nil, err
	}
	if ok, err := t.visible(ctx, ev, false); err != nil {
		return nil, err
	} else if !ok {
		return nil, errEventNotInTree
	}
	out := ChainResult{Event: ev, Ancestors: []api.Event{}, Events: []api.Event{}}
	for parent := ev.Parent; parent != ""; {
		if len(out.Ancestors) == MaxAncestors {
			out.AncestorsTruncated = true
			break
		}
		p, err := x.port.Event(ctx, parent)
		if errors.Is(err, extension.ErrNotFound) {
			out.AncestorsTruncated = true
			break
		}
		if err != nil {
			return nil, err
		}
		ok, err := t.visible(ctx, p, true)
		if err != nil {
			return nil, err
		}
		if !ok {
			out.AncestorsTruncated = true
			break
		}
		out.Ancestors = append(out.Ancestors, p)
		parent = p.Parent
	}
	// Root first.
	for i, j := 0, len(out.Ancestors)-1; i < j; i, j = i+1, j-1 {
		out.Ancestors[i], out.Ancestors[j] = out.Ancestors[j], out.Ancestors[i]
	}
	// The root's Events of the tree, scanning at most maxScan of them.
	after, scanned := in.AfterSeq, 0
	for scanned < maxScan {
		page, err := x.port.Events(ctx, EventQuery{Scope: auth.Scope, Root: ev.Root, AfterSeq: after, Limit: MaxLimit})
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if len(out.Events) == n {
				out.NextAfterSeq = after
				return answer(out)
			}
			scanned++
			after = e.Seq
			ok, err := t.visible(ctx, e, false)
			if err != nil {
				return nil, err
			}
			if ok {
				out.Events = append(out.Events, e)
			}
		}
		if len(page) < MaxLimit {
			return answer(out)
		}
	}
	out.NextAfterSeq = after
	return answer(out)
}

// ---- introspection.executions and introspection.waits ----

type listInput struct {
	Work  string `json:"work"`
	State string `json:"state"`
	After string `json:"after"`
	Limit *int   `json:"limit"`
}

// ExecutionsResult is introspection.executions' answer.
type ExecutionsResult struct {
	Executions []api.Execution `json:"executions"`
	// Next, when set, is the after of the next page.
	Next string `json:"next,omitempty"`
}

// WaitsResult is introspection.waits' answer.
type WaitsResult struct {
	Waits []api.Wait `json:"waits"`
	Next  string     `json:"next,omitempty"`
}

// cursor is the opaque after of a list: the last row's position. A forged
// one only moves the window within the same Work's list.
func cursor(at time.Time, id string) string {
	return strconv.FormatInt(at.UnixNano(), 10) + "." + id
}

func parseCursor(op, s string) (*Position, error) {
	if s == "" {
		return nil, nil
	}
	ns, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, refuse(CodeInvalidInput, "after of %s is not a next this operation answered", op)
	}
	return &Position{CreatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// list decodes a list's input and checks what every list checks.
func (x *ext) list(ctx context.Context, auth extension.Authority, op, read string, input json.RawMessage) (ListQuery, error) {
	var in listInput
	if err := decode(op, input, &in); err != nil {
		return ListQuery{}, err
	}
	if op != OpWaits && in.State != "" {
		return ListQuery{}, refuse(CodeInvalidInput, "%s takes no state", op)
	}
	switch in.State {
	case "", api.WaitActive, api.WaitSatisfied, api.WaitTimedOut, api.WaitCancelled:
	default:
		return ListQuery{}, refuse(CodeInvalidInput, "state of %s is one of active, satisfied, timed_out and cancelled", op)
	}
	n, err := limit(op, in.Limit, MaxLimit)
	if err != nil {
		return ListQuery{}, err
	}
	after, err := parseCursor(op, in.After)
	if err != nil {
		return ListQuery{}, err
	}
	if err := x.begin(ctx, auth, read); err != nil {
		return ListQuery{}, err
	}
	w, err := x.tree(auth).work(ctx, in.Work)
	if err != nil {
		return ListQuery{}, err
	}
	return ListQuery{Scope: auth.Scope, Work: w.ID, State: in.State, After: after, Limit: n + 1}, nil
}

func (x *ext) executions(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	q, err := x.list(ctx, auth, OpExecutions, ReadExecutions, input)
	if err != nil {
		return nil, err
	}
	rows, err := x.port.Executions(ctx, q)
	if err != nil {
		return nil, err
	}
	out := ExecutionsResult{Executions: rows}
	if n := q.Limit - 1; len(rows) > n {
		out.Executions = rows[:n]
		out.Next = cursor(rows[n-1].CreatedAt, rows[n-1].ID)
	}
	return answer(out)
}

func (x *ext) waits(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	q, err := x.list(ctx, auth, OpWaits, ReadWaits, input)
	if err != nil {
		return nil, err
	}
	rows, err := x.port.Waits(ctx, q)
	if err != nil {
		return nil, err
	}
	out := WaitsResult{Waits: rows}
	if n := q.Limit - 1; len(rows) > n {
		out.Waits = rows[:n]
		out.Next = cursor(rows[n-1].CreatedAt, rows[n-1].ID)
	}
	return answer(out)
}
