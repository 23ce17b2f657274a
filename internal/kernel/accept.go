package kernel

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Sources the host assigns. Only host code sets a core.* source; an event
// of a core.* type is accepted only from one.
const (
	// SourceManual: an operator, through Control. Keeps its Actor.
	SourceManual = "core.manual"
	// SourceAction: an operator's action (Control.Act). Keeps its Actor.
	SourceAction = "core.action"
	// SourceHost: the daemon itself (Work lifecycle, timers, retries of
	// the scheduler).
	SourceHost = "core.host"
	// SourceExecution: an execution, through the toolbelt; the host sets
	// the event's Execution, Work and causation.
	SourceExecution = "execution"
)

// Types the host emits.
const (
	TypeWorkCreated        = "core.work.created"
	TypeWorkFinished       = "core.work.finished"
	TypeWorkCancelled      = "core.work.cancelled"
	TypeExecutionCancelled = "core.execution.cancelled"
	TypeExecutionStopped   = "core.execution.stopped"
	TypeWaitTimedOut       = "core.wait.timed_out"
	TypeManualRetry        = "core.manual.retry"
	TypeManualWake         = "core.manual.wake"
	TypeManualHold         = "core.manual.hold"
	TypeManualRelease      = "core.manual.release"
	TypeManualRebind       = "core.manual.rebind"
	TypeManualAttach       = "core.manual.attach"
)

// Bounds of an event.
const (
	// MaxDataBytes bounds an event's data, a JSON object: 256 KiB.
	MaxDataBytes = 256 << 10
	// MaxNameBytes bounds a type or source.
	MaxNameBytes = 128
	// MaxKeyBytes bounds a correlation key, a scope id and a delivery id.
	MaxKeyBytes = 512
)

// CausalLimits bound a causal chain: depth (a root is depth 0) and derived
// emissions per minute per root. They are pinned on the root at its first
// derived emission and never change for that root afterwards. The limits a
// Runtime, a Control or a Toolbelt applies can be replaced while it runs
// (SetCausal); a replacement reaches only roots pinned after it.
type CausalLimits struct {
	MaxDepth  int
	PerMinute int
}

// causalHolder holds the current causal limits of a Runtime, a Control or
// a Toolbelt, replaced with SetCausal while they are in use. A decision
// loads them once.
type causalHolder struct{ p atomic.Pointer[CausalLimits] }

func (h *causalHolder) set(l CausalLimits) {
	l = l.orDefault()
	h.p.Store(&l)
}

func (h *causalHolder) get() CausalLimits { return *h.p.Load() }

// DefaultCausalLimits apply where a caller passes zero limits. They are
// the configuration's defaults (causal_max_depth 8, causal_per_minute
// 60), and the daemon's tests hold the two equal.
var DefaultCausalLimits = CausalLimits{MaxDepth: 8, PerMinute: 60}

func (l CausalLimits) orDefault() CausalLimits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultCausalLimits.MaxDepth
	}
	if l.PerMinute <= 0 {
		l.PerMinute = DefaultCausalLimits.PerMinute
	}
	return l
}

// IsCore reports whether a type or source is in the host's core namespace.
func IsCore(name string) bool { return strings.HasPrefix(name, "core.") || name == "core" }

// KeepsActor reports whether events of source keep their Actor.
func KeepsActor(source string) bool { return source == SourceManual || source == SourceAction }

// checkName checks dot-separated segments of [a-z][a-z0-9_-]*, at least
// minSegments of them.
func checkName(what, name string, minSegments int) error {
	if name == "" {
		return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event has no %s", what)
	}
	if len(name) > MaxNameBytes {
		return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event %s is longer than %d bytes", what, MaxNameBytes)
	}
	segs := strings.Split(name, ".")
	if len(segs) < minSegments {
		return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event %s %q must be namespaced like \"github.pr_opened\": at least %d dot-separated segments", what, name, minSegments)
	}
	for _, seg := range segs {
		if seg == "" {
			return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event %s %q has an empty segment", what, name)
		}
		for i, r := range seg {
			switch {
			case r >= 'a' && r <= 'z':
			case i > 0 && (r >= '0' && r <= '9' || r == '_' || r == '-'):
			default:
				return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event %s %q must be lower case: each segment a letter followed by letters, digits, '_' or '-'", what, name)
			}
		}
	}
	return nil
}

func checkText(what, s string, required bool) error {
	if s == "" {
		if required {
			return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event has no %s", what)
		}
		return nil
	}
	if len(s) > MaxKeyBytes {
		return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event %s is longer than %d bytes", what, MaxKeyBytes)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event %s contains a control character or invalid UTF-8", what)
		}
	}
	return nil
}

// NormalizeData checks that data is one JSON object of at most
// MaxDataBytes (no duplicate names, valid UTF-8) and returns it compacted.
// Empty data is the empty object.
func NormalizeData(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return []byte(`{}`), nil
	}
	if len(data) > MaxDataBytes {
		return nil, Refuse(extension.ErrInvalid, ErrDataTooLarge.Code, "the event data is %d bytes; the limit is %d (256 KiB): store large content as an artifact and refer to it", len(data), MaxDataBytes)
	}
	v := jsontext.Value(append([]byte(nil), data...))
	if err := v.Format(); err != nil {
		return nil, Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event data is not valid JSON (RFC 7493: UTF-8, no duplicate names)")
	}
	if v.Kind() != '{' {
		return nil, Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "the event data must be a JSON object, not %s", v.Kind())
	}
	return v, nil
}

// validate checks an event before acceptance and normalises it in place.
func validate(ev *storage.Event) error {
	if err := checkName("type", ev.Type, 2); err != nil {
		return err
	}
	if err := checkName("source", ev.Source, 1); err != nil {
		return err
	}
	if IsCore(ev.Type) && !IsCore(ev.Source) {
		return Refuse(extension.ErrInvalid, ErrCoreTypeReserved.Code, "type %s is reserved for the host: core.* events come only from core.* sources", ev.Type)
	}
	if err := checkText("scope", ev.Scope, true); err != nil {
		return err
	}
	if err := checkText("correlation key", ev.CorrelationKey, false); err != nil {
		return err
	}
	if err := checkText("delivery id", ev.DeliveryID, false); err != nil {
		return err
	}
	if err := checkText("parent", ev.Parent, false); err != nil {
		return err
	}
	data, err := NormalizeData(ev.Data)
	if err != nil {
		return err
	}
	ev.Data = data
	if !KeepsActor(ev.Source) {
		ev.Actor = ""
	}
	return nil
}

// CheckTraceEvent checks a hypothetical event for a route trace the way
// acceptance would, and refuses what an operator could not send: a core
// type, or a core source other than core.manual and core.action. An empty
// source is core.manual.
func CheckTraceEvent(ev *storage.Event) error {
	if ev.Source == "" {
		ev.Source = SourceManual
	}
	if IsCore(ev.Source) && ev.Source != SourceManual && ev.Source != SourceAction {
		return Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "source %s is the host's own; trace an operator's event (core.manual) or an ingress source", ev.Source)
	}
	if IsCore(ev.Type) {
		return Refuse(extension.ErrInvalid, ErrCoreTypeReserved.Code, "type %s is reserved for the host; trace a namespaced type of your own", ev.Type)
	}
	return validate(ev)
}

// replay returns an event accepted earlier under the same identity: the
// same source and delivery id, or the same event id. A different event
// under a taken id is a conflict.
func replay(ctx context.Context, tx storage.Reader, ev *storage.Event) (storage.Event, bool, error) {
	if ev.DeliveryID != "" {
		got, err := tx.GetEventByDelivery(ctx, ev.Source, ev.DeliveryID)
		if err == nil {
			got.Replayed = true
			return got, true, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return storage.Event{}, false, err
		}
	}
	if ev.ID != "" {
		got, err := tx.GetEvent(ctx, ev.ID)
		if err == nil {
			if got.Source != ev.Source || got.Type != ev.Type || got.Scope != ev.Scope {
				return storage.Event{}, false, Refuse(extension.ErrConflict, ErrEventConflict.Code, "event id %s names another event; use a new id or idempotency key", ev.ID)
			}
			got.Replayed = true
			return got, true, nil
		}
		if !errors.Is(err, storage.ErrNotFound) {
			return storage.Event{}, false, err
		}
	}
	return storage.Event{}, false, nil
}

// causation fills Root and Depth from the parent.
func causation(ctx context.Context, tx storage.Reader, ev *storage.Event) (storage.Event, error) {
	if ev.Parent == "" {
		ev.Depth = 0
		return storage.Event{}, nil
	}
	parent, err := tx.GetEvent(ctx, ev.Parent)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Event{}, Refuse(extension.ErrInvalid, ErrParentNotFound.Code, "parent event %s does not exist; name an accepted event", ev.Parent)
	}
	if err != nil {
		return storage.Event{}, err
	}
	ev.Root, ev.Depth = parent.Root, parent.Depth+1
	return parent, nil
}

func (r *Runtime) insert(ctx context.Context, tx storage.Tx, ev storage.Event, now time.Time) (storage.Event, error) {
	fresh := ev.ID == "" && ev.DeliveryID == ""
	if ev.ID == "" {
		ev.ID = r.ids.New(ids.Event)
	}
	if ev.Parent == "" {
		ev.Root = ev.ID
	}
	return tx.InsertEvent(ctx, &storage.InsertEventParams{
		ID: ev.ID, Type: ev.Type, Source: ev.Source, Scope: ev.Scope, Work: ev.Work, Execution: ev.Execution,
		CorrelationKey: ev.CorrelationKey, Data: ev.Data, Parent: ev.Parent, Root: ev.Root, Depth: ev.Depth,
		Actor: ev.Actor, DeliveryID: ev.DeliveryID, AcceptedAt: now, Fresh: fresh,
	})
}

// AcceptInTx accepts an event from a trusted host caller: it validates it
// (namespaced lower-case type, data a JSON object of at most MaxDataBytes,
// core.* types only from core.* sources), drops the Actor unless the source
// is core.manual or core.action, and appends it with the next acceptance
// sequence. With a Parent it records causation (root, depth) without causal
// bounds; use AcceptDerivedInTx for emissions that must respect them. The
// same source and delivery id (or the same event id) return the event
// accepted first, with Replayed set, and never make a second one. ID,
// Seq, Root, Depth and AcceptedAt are assigned here (ID only when empty).
func (r *Runtime) AcceptInTx(ctx context.Context, tx storage.Tx, ev storage.Event) (storage.Event, error) {
	if err := validate(&ev); err != nil {
		return storage.Event{}, err
	}
	if got, ok, err := replay(ctx, tx, &ev); err != nil || ok {
		return got, err
	}
	if _, err := causation(ctx, tx, &ev); err != nil {
		return storage.Event{}, err
	}
	return r.insert(ctx, tx, ev, r.clock.Now())
}

// AcceptDerivedInTx accepts an event caused by ev.Parent (required) under
// causal bounds. The root's limits are pinned from limits at its first
// derived emission (zero fields take DefaultCausalLimits) and never change
// afterwards; an emission deeper than the pinned depth is refused with
// causal_depth_exceeded, and one past the pinned number per minute (a
// fixed one-minute window on the injected clock, counted per root) with
// causal_rate_exceeded. A replay of an accepted emission is returned
// without counting again.
func (r *Runtime) AcceptDerivedInTx(ctx context.Context, tx storage.Tx, ev storage.Event, limits CausalLimits) (storage.Event, error) {
	if ev.Parent == "" {
		return storage.Event{}, Refuse(extension.ErrInvalid, ErrInvalidEvent.Code, "a derived event needs the event that caused it")
	}
	if err := validate(&ev); err != nil {
		return storage.Event{}, err
	}
	if got, ok, err := replay(ctx, tx, &ev); err != nil || ok {
		return got, err
	}
	if _, err := causation(ctx, tx, &ev); err != nil {
		return storage.Event{}, err
	}
	now := r.clock.Now()
	// Most derived events are within the limits of a root already
	// pinned: one statement counts them. The rest (a root's first
	// derived event, a refusal) read the root and decide below.
	if _, err := tx.CountCausal(ctx, &storage.CountCausalParams{Root: ev.Root, Depth: ev.Depth, Now: now}); err == nil {
		return r.insert(ctx, tx, ev, now)
	} else if !errors.Is(err, storage.ErrFenced) {
		return storage.Event{}, err
	}
	pin, err := tx.GetCausalRoot(ctx, ev.Root)
	pinned := err == nil
	switch {
	case errors.Is(err, storage.ErrNotFound):
		l := limits.orDefault()
		pin = storage.CausalRoot{Root: ev.Root, MaxDepth: l.MaxDepth, PerMinute: l.PerMinute, WindowStart: now, PinnedAt: now}
	case err != nil:
		return storage.Event{}, err
	}
	// Refuse before writing anything, so that a caller that goes on after
	// a refusal (the router turns a refused start into a drop) leaves no
	// pin behind that would fix the root's limits for good.
	if ev.Depth > pin.MaxDepth {
		return storage.Event{}, Refuse(extension.ErrInvalid, ErrCausalDepthExceeded.Code,
			"this event would be %d steps from its root %s; the chain's limit is %d (causal_max_depth), so it is refused to stop a loop",
			ev.Depth, ev.Root, pin.MaxDepth)
	}
	if !pinned {
		if err := tx.InsertCausalRoot(ctx, &pin); err != nil {
			return storage.Event{}, err
		}
	}
	start, count := pin.WindowStart, pin.WindowCount
	if now.Sub(start) >= time.Minute || now.Before(start) {
		start, count = now, 0
	}
	if count >= pin.PerMinute {
		return storage.Event{}, Refuse(extension.ErrInvalid, ErrCausalRateExceeded.Code,
			"the causal chain of root %s already emitted %d events this minute (causal_per_minute); it is refused to stop a loop, try again after %s",
			ev.Root, count, start.Add(time.Minute).Format(time.RFC3339))
	}
	if err := tx.UpdateCausalWindow(ctx, &storage.UpdateCausalWindowParams{
		Root: ev.Root, FromWindowStart: pin.WindowStart, FromWindowCount: pin.WindowCount, WindowStart: start, WindowCount: count + 1,
	}); err != nil {
		return storage.Event{}, err
	}
	return r.insert(ctx, tx, ev, now)
}
