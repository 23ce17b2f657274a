package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Verdict is what a route said about an event.
type Verdict string

const (
	VerdictMatch      Verdict = "match"
	VerdictSkip       Verdict = "skip"
	VerdictNotReached Verdict = "not_reached"
	// VerdictBypassed: the Work the event resolves to is waiting or has
	// finished, so the scope's routes are not consulted.
	VerdictBypassed Verdict = "bypassed"
)

// RouteVerdict is one route's verdict on an event, with the reason.
type RouteVerdict struct {
	Route   string  `json:"route"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
}

// Wake is a Wait an event satisfies.
type Wake struct {
	Work   string `json:"work"`
	Wait   string `json:"wait"`
	Reason string `json:"reason"`
}

// Decision is how the router handles an event. Route applies it; Trace
// returns it without writing anything.
type Decision struct {
	Routes []RouteVerdict `json:"routes"`
	// Work is the Work the event resolves to through its correlation key
	// ("" for none), in WorkState.
	Work      string            `json:"work,omitempty"`
	WorkState storage.WorkState `json:"work_state,omitempty"`
	Effect    Effect            `json:"effect"`
	Detail    string            `json:"detail"`
	// Route and Binding name the matching route and, for start, the
	// binding the new Work runs on.
	Route   string `json:"route,omitempty"`
	Binding string `json:"binding,omitempty"`
	// Wait is the Work's Wait the event satisfies (effect wake).
	Wait string `json:"wait,omitempty"`
	// OtherWakes are the waits of other Work the event satisfies.
	OtherWakes []Wake `json:"other_wakes"`
	// Started is the Work a start created (Route only).
	Started string `json:"started,omitempty"`
}

// Woke reports whether the event satisfied any Wait.
func (d Decision) Woke() bool { return d.Effect == EffectWake || len(d.OtherWakes) > 0 }

// decide is the router's one decision function: Route and Trace both call
// it, so a trace shows exactly what routing would do.
//
//  1. The correlation key resolves the event to the nonterminal Work that
//     owns it in the event's scope (or, when the key is the id of a Work
//     that has finished, to that Work).
//  2. Waits: the resolved Work's active Wait, the active waits that name
//     the key explicitly, and the active Wait of the parent of the Work
//     whose id the key is (a type-only wait subscribes on its children).
//  3. A waiting or finished Work bypasses the routes: the event wakes the
//     Work when it satisfies its Wait, else it is queued for it (waiting)
//     or dropped (finished).
//  4. Otherwise the scope's routes are matched in order (type exact or
//     prefix.*, then source); the first match decides: start (queue when
//     a Work owns the key), queue (drop when none does) or drop; no match
//     is unmatched. An event from the owning Work itself is never queued
//     back to it (drop).
func (r *Runtime) decide(ctx context.Context, rd storage.Reader, ev storage.Event) (Decision, error) {
	d := Decision{OtherWakes: []Wake{}}
	var owner *storage.Work
	if ev.CorrelationKey != "" {
		w, err := rd.GetKeyOwner(ctx, ev.Scope, ev.CorrelationKey)
		switch {
		case err == nil:
			owner = &w
		case !errors.Is(err, storage.ErrNotFound):
			return d, err
		default:
			if w, err := rd.GetWork(ctx, ev.CorrelationKey); err == nil && w.Scope == ev.Scope && w.State.Terminal() {
				owner = &w
			} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
				return d, err
			}
		}
	}
	if owner != nil {
		d.Work, d.WorkState = owner.ID, owner.State
	}

	wakes, err := r.wakesFor(ctx, rd, ev)
	if err != nil {
		return d, err
	}
	var primary *Wake
	for i, wk := range wakes {
		if owner != nil && wk.Work == owner.ID && owner.State == storage.WorkWaiting {
			primary = &wakes[i]
			continue
		}
		d.OtherWakes = append(d.OtherWakes, wk)
	}

	var routes []Route
	if h := r.routes.Load(); h != nil && h.p != nil {
		if routes, err = h.p.Routes(ctx, ev.Scope); err != nil {
			return d, fmt.Errorf("kernel: routes of scope %s: %w", ev.Scope, err)
		}
	}

	if owner != nil && (owner.State == storage.WorkWaiting || owner.State.Terminal()) {
		reason := fmt.Sprintf("Work %s is %s", owner.ID, owner.State)
		for _, rt := range routes {
			d.Routes = append(d.Routes, RouteVerdict{Route: rt.ID, Verdict: VerdictBypassed, Reason: reason})
		}
		switch {
		case primary != nil:
			d.Effect, d.Wait = EffectWake, primary.Wait
			d.Detail = fmt.Sprintf("wakes Work %s: %s", owner.ID, primary.Reason)
		case owner.State == storage.WorkWaiting:
			d.Effect = EffectQueue
			d.Detail = fmt.Sprintf("Work %s is waiting and this event does not satisfy its Wait; it is queued as input for when the Work wakes", owner.ID)
		default:
			d.Effect = EffectDrop
			d.Detail = fmt.Sprintf("Work %s has %s", owner.ID, owner.State)
		}
		return d, nil
	}

	matched := -1
	for i, rt := range routes {
		if matched >= 0 {
			d.Routes = append(d.Routes, RouteVerdict{Route: rt.ID, Verdict: VerdictNotReached, Reason: fmt.Sprintf("route %s matched first", routes[matched].ID)})
			continue
		}
		switch {
		case !matchType(rt.MatchType, ev.Type):
			d.Routes = append(d.Routes, RouteVerdict{Route: rt.ID, Verdict: VerdictSkip, Reason: fmt.Sprintf("type %s does not match %s", ev.Type, rt.MatchType)})
		case rt.MatchSource != "" && rt.MatchSource != ev.Source:
			d.Routes = append(d.Routes, RouteVerdict{Route: rt.ID, Verdict: VerdictSkip, Reason: fmt.Sprintf("source %s is not %s", ev.Source, rt.MatchSource)})
		default:
			matched = i
			reason := fmt.Sprintf("type %s matches %s", ev.Type, rt.MatchType)
			if rt.MatchSource != "" {
				reason += " and source is " + rt.MatchSource
			}
			d.Routes = append(d.Routes, RouteVerdict{Route: rt.ID, Verdict: VerdictMatch, Reason: reason})
		}
	}
	if matched < 0 {
		d.Effect = EffectUnmatched
		d.Detail = fmt.Sprintf("no route of scope %s matches type %s from %s", ev.Scope, ev.Type, ev.Source)
		return d, nil
	}
	rt := routes[matched]
	d.Route = rt.ID
	if owner != nil && ev.Work == owner.ID && (rt.Effect == EffectStart || rt.Effect == EffectQueue) {
		// An execution's own emission on a key its Work owns never comes
		// back to it as input (it would run the Work again on its own
		// output).
		d.Effect = EffectDrop
		d.Detail = fmt.Sprintf("the event came from Work %s, which owns key %q; it is not queued back to it", owner.ID, ev.CorrelationKey)
		return d, nil
	}
	switch rt.Effect {
	case EffectStart:
		if owner != nil {
			d.Effect = EffectQueue
			d.Detail = fmt.Sprintf("Work %s owns key %q, so the event is queued for it instead of starting another", owner.ID, ev.CorrelationKey)
		} else {
			d.Effect, d.Binding = EffectStart, rt.Binding
			d.Detail = fmt.Sprintf("starts a new Work on binding %s with this event as its first input", rt.Binding)
		}
	case EffectQueue:
		if owner != nil {
			d.Effect = EffectQueue
			d.Detail = fmt.Sprintf("queued as input for Work %s, which owns key %q", owner.ID, ev.CorrelationKey)
		} else {
			d.Effect = EffectDrop
			if ev.CorrelationKey == "" {
				d.Detail = "the route queues, but the event has no correlation key"
			} else {
				d.Detail = fmt.Sprintf("the route queues, but no unfinished Work owns key %q", ev.CorrelationKey)
			}
		}
	case EffectDrop:
		d.Effect, d.Detail = EffectDrop, fmt.Sprintf("route %s drops it", rt.ID)
	default:
		d.Effect, d.Detail = EffectDrop, fmt.Sprintf("route %s has effect %q, which this release does not apply", rt.ID, rt.Effect)
	}
	return d, nil
}

// wakesFor lists the active waits the event satisfies.
func (r *Runtime) wakesFor(ctx context.Context, rd storage.Reader, ev storage.Event) ([]Wake, error) {
	if ev.CorrelationKey == "" {
		return nil, nil
	}
	var cands []storage.Wait
	if owner, err := rd.GetKeyOwner(ctx, ev.Scope, ev.CorrelationKey); err == nil {
		if w, err := rd.GetActiveWait(ctx, owner.ID); err == nil {
			cands = append(cands, w)
		} else if !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
	} else if !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	byKey, err := rd.ListActiveWaitsByKey(ctx, ev.Scope, ev.CorrelationKey)
	if err != nil {
		return nil, err
	}
	cands = append(cands, byKey...)
	if child, err := rd.GetWork(ctx, ev.CorrelationKey); err == nil && child.Parent != "" {
		if w, err := rd.GetActiveWait(ctx, child.Parent); err == nil {
			cands = append(cands, w)
		} else if !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, err
	}
	var out []Wake
	seen := map[string]bool{}
	for _, w := range cands {
		if seen[w.ID] {
			continue
		}
		seen[w.ID] = true
		ok, reason, err := r.satisfies(ctx, rd, w, ev)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, Wake{Work: w.Work, Wait: w.ID, Reason: reason})
		}
	}
	return out, nil
}

// satisfies reports whether ev satisfies the active Wait w: same scope,
// accepted after the watermark (a hypothetical event, Seq 0, counts as
// new), a type the wait names (any when none), and a key it names, or for a
// type-only wait a key its Work owns or the id of one of its children. An
// event about or from the waiting Work itself never wakes it.
func (r *Runtime) satisfies(ctx context.Context, rd storage.Reader, w storage.Wait, ev storage.Event) (bool, string, error) {
	if ev.Scope != w.Scope || ev.CorrelationKey == "" || ev.Work == w.Work {
		return false, "", nil
	}
	if ev.Seq != 0 && ev.Seq <= w.Watermark {
		return false, "", nil
	}
	if len(w.Types) > 0 && !slices.Contains(w.Types, ev.Type) {
		return false, "", nil
	}
	if !w.OnWorkKeys {
		if slices.Contains(w.Keys, ev.CorrelationKey) {
			return true, fmt.Sprintf("Wait %s names key %q", w.ID, ev.CorrelationKey), nil
		}
		return false, "", nil
	}
	owner, err := rd.GetKeyOwner(ctx, w.Scope, ev.CorrelationKey)
	if err == nil && owner.ID == w.Work {
		return true, fmt.Sprintf("Wait %s subscribes on the keys of Work %s, which owns %q", w.ID, w.Work, ev.CorrelationKey), nil
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return false, "", err
	}
	child, err := rd.GetWork(ctx, ev.CorrelationKey)
	if err == nil && child.Parent == w.Work {
		return true, fmt.Sprintf("Wait %s subscribes on the children of Work %s, and %s is one", w.ID, w.Work, child.ID), nil
	}
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return false, "", err
	}
	return false, "", nil
}

// Route decides how an accepted event is handled and applies it in tx:
// start creates the Work (with causal bounds from the event, under the
// current causal limits: Options.Causal or the last SetCausal), queue adds the input, wake satisfies the Wait (queuing
// the event and making the Work ready). Waits of other Work the event
// satisfies are woken too. An event whose acceptance was a replay is not
// routed again.
func (r *Runtime) Route(ctx context.Context, tx storage.Tx, ev storage.Event) (Decision, error) {
	d, err := r.decide(ctx, tx, ev)
	if err != nil {
		return d, err
	}
	if ev.Replayed {
		d.Detail = "already accepted and routed once; not routed again"
		return d, nil
	}
	switch d.Effect {
	case EffectStart:
		// A refusal of the causal bounds writes nothing (AcceptDerivedInTx
		// checks before it pins or counts), so the start becomes a drop and
		// the transaction goes on.
		causal := r.Causal()
		created, err := r.CreateWorkInTx(ctx, tx, NewWork{
			Scope: ev.Scope, Binding: d.Binding, Keys: keysOf(ev), Cause: ev.ID, Causal: &causal, Input: ev.ID,
		})
		if err != nil {
			if code := CodeOf(err); code == ErrCausalDepthExceeded.Code || code == ErrCausalRateExceeded.Code || code == ErrKeyTaken.Code {
				d.Effect, d.Detail = EffectDrop, "not started: "+err.Error()
				return d, nil
			}
			return d, err
		}
		d.Started = created.Work.ID
	case EffectQueue:
		if _, err := r.QueueInputInTx(ctx, tx, d.Work, ev.ID); err != nil {
			return d, err
		}
	case EffectWake:
		if err := r.wakeInTx(ctx, tx, d.Wait, ev); err != nil {
			return d, err
		}
	}
	for _, wk := range d.OtherWakes {
		if err := r.wakeInTx(ctx, tx, wk.Wait, ev); err != nil {
			return d, err
		}
	}
	return d, nil
}

func keysOf(ev storage.Event) []string {
	if ev.CorrelationKey == "" {
		return nil
	}
	return []string{ev.CorrelationKey}
}

// Trace runs the router's decision for a hypothetical event against the
// current state, read through rd, and writes nothing. The event is checked
// as CheckTraceEvent does.
func (r *Runtime) Trace(ctx context.Context, rd storage.Reader, ev storage.Event) (Decision, error) {
	if err := CheckTraceEvent(&ev); err != nil {
		return Decision{}, err
	}
	ev.Seq, ev.ID = 0, ""
	return r.decide(ctx, rd, ev)
}

// wakeInTx satisfies an active Wait with ev: the event is queued as the
// Work's input and a waiting Work becomes ready (a parked execution is then
// resumed by the scheduler's next claim).
func (r *Runtime) wakeInTx(ctx context.Context, tx storage.Tx, waitID string, ev storage.Event) error {
	now := r.clock.Now()
	w, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: waitID, State: storage.WaitSatisfied, SatisfiedBy: ev.ID, Now: now})
	if err != nil {
		return err
	}
	if _, err := r.QueueInputInTx(ctx, tx, w.Work, ev.ID); err != nil {
		return err
	}
	ready := storage.WorkReady
	_, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.Work, FromStates: []storage.WorkState{storage.WorkWaiting}, State: &ready, Now: now})
	if errors.Is(err, storage.ErrFenced) {
		return nil
	}
	return err
}
