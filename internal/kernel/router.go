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
	Route   string
	Verdict Verdict
	Reason  string
}

// Wake is a Wait an event satisfies.
type Wake struct {
	Work   string
	Wait   string
	Reason string
}

// Decision is how the router handles an event. Route applies it; Trace
// returns it without writing anything.
type Decision struct {
	Routes []RouteVerdict
	// Work is the Work the event resolves to through its correlation key
	// ("" for none), in WorkState.
	Work      string
	WorkState storage.WorkState
	Effect    Effect
	Detail    string
	// Route and Binding name the matching route and, for start, the
	// binding the new Work runs on.
	Route   string
	Binding string
	// Wait is the Work's Wait the event satisfies (effect wake).
	Wait string
	// OtherWakes are the waits of other Work the event satisfies.
	OtherWakes []Wake
	// Started is the Work a start created (Route only).
	Started string
	// QueuedAhead counts the inputs the resolved Work already has queued
	// that no attempt has taken yet: another input wakes it first, and an
	// event queued, injected or interrupting for it is taken by the same
	// next attempt.
	QueuedAhead int64
	// Interrupted is the execution an interrupt fenced (Route only).
	Interrupted string
}

// Woke reports whether the event satisfied any Wait.
func (d Decision) Woke() bool { return d.Effect == EffectWake || len(d.OtherWakes) > 0 }

// decide is the router's one decision function: Route and Trace both call
// it, so a trace shows exactly what routing would do. Its steps, in order:
//
//  1. owner: the correlation key resolves the event to the nonterminal
//     Work that owns it in the event's scope (or, when the key is the id
//     of a Work that has finished, to that Work).
//  2. wakes: the resolved Work's active Wait, the active waits that name
//     the key explicitly, and the active Wait of the parent of the Work
//     whose id the key is (a type-only wait subscribes on its children),
//     split by splitWakes into the owner's own wake and the others.
//  3. bypass: a waiting or finished Work bypasses the routes: the event
//     wakes the Work when it satisfies its Wait, else it is queued for it
//     (waiting) or dropped (finished).
//  4. match: otherwise the scope's routes are matched in order (type exact
//     or prefix.*, then source); the first match decides (routeEffect):
//     start (queue when a Work owns the key), queue, inject or interrupt
//     (drop when none does; inject and interrupt act on a running, unheld
//     owner and are a queue otherwise: liveEffect) or drop; no match is
//     unmatched. An event from the owning Work itself is never queued back
//     to it (drop). An event for the owner reports the inputs queued ahead
//     of it (another input wakes the Work first).
func (r *Runtime) decide(ctx context.Context, rd storage.Reader, ev storage.Event) (Decision, error) {
	d := Decision{OtherWakes: []Wake{}}
	// The key's owner is read once, for both steps that need it.
	keyOwner, err := lookupKeyOwner(ctx, rd, ev)
	if err != nil {
		return d, err
	}
	owner, err := resolveOwner(ctx, rd, ev, keyOwner)
	if err != nil {
		return d, err
	}
	if owner != nil {
		d.Work, d.WorkState = owner.ID, owner.State
	}

	wakes, err := r.wakesFor(ctx, rd, ev, keyOwner)
	if err != nil {
		return d, err
	}
	primary, others := splitWakes(wakes, owner)
	d.OtherWakes = append(d.OtherWakes, others...)

	routes, err := r.scopeRoutes(ctx, ev.Scope)
	if err != nil {
		return d, err
	}

	if bypasses(owner) {
		d.Routes = bypassRoutes(routes, owner)
		d.Effect, d.Wait, d.Detail = bypassEffect(owner, primary)
		if d.Effect == EffectQueue {
			d.QueuedAhead = queuedAhead(*owner)
		}
		return d, nil
	}

	verdicts, matched := matchRoutes(routes, ev)
	d.Routes = verdicts
	if matched < 0 {
		d.Effect = EffectUnmatched
		d.Detail = fmt.Sprintf("no route of scope %s matches type %s from %s", ev.Scope, ev.Type, ev.Source)
		return d, nil
	}
	rt := routes[matched]
	d.Route = rt.ID
	d.Effect, d.Binding, d.Detail = routeEffect(rt, owner, ev)
	if d.Effect == EffectInject || d.Effect == EffectInterrupt {
		d.Effect, d.Detail = liveEffect(d.Effect, owner)
	}
	if owner != nil && (d.Effect == EffectQueue || d.Effect == EffectInject || d.Effect == EffectInterrupt) {
		d.QueuedAhead = queuedAhead(*owner)
		if d.QueuedAhead > 0 {
			d.Detail += fmt.Sprintf("; another input wakes Work %s first (%d queued that no attempt has taken), and its next attempt takes this one with it", owner.ID, d.QueuedAhead)
		}
	}
	return d, nil
}

// queuedAhead counts the Work's inputs no attempt has taken yet.
func queuedAhead(w storage.Work) int64 {
	if n := w.InputCount - w.InputWatermark; n > 0 {
		return n
	}
	return 0
}

// liveEffect is what inject and interrupt do given the owner's state
// (routeEffect has already handled no owner and the owner's own
// emission): on a running, unheld Work, inject delivers to the live
// attempt and interrupt fences it; otherwise both queue the event for the
// Work's next attempt.
func liveEffect(effect Effect, owner *storage.Work) (Effect, string) {
	switch {
	case owner.State != storage.WorkRunning:
		return EffectQueue, fmt.Sprintf("the route %ss, but Work %s is %s with no running attempt; the event is queued as input for its next attempt", effect, owner.ID, owner.State)
	case owner.Held():
		return EffectQueue, fmt.Sprintf("the route %ss, but Work %s is held (%s); the event is queued as input and its attempt is left alone", effect, owner.ID, owner.BlockedReason)
	case effect == EffectInject:
		return EffectInject, fmt.Sprintf("delivered to the running attempt of Work %s as new input, without stopping it (read_context shows it; a resume-capable agent gets it at its next turn)", owner.ID)
	}
	return EffectInterrupt, fmt.Sprintf("fences the running attempt of Work %s and starts the next one with this event as input once it has stopped", owner.ID)
}

// lookupKeyOwner is the nonterminal Work that owns the event's
// correlation key in its scope; nil for none (and for no key).
func lookupKeyOwner(ctx context.Context, rd storage.Reader, ev storage.Event) (*storage.Work, error) {
	if ev.CorrelationKey == "" {
		return nil, nil
	}
	w, err := rd.GetKeyOwner(ctx, ev.Scope, ev.CorrelationKey)
	switch {
	case err == nil:
		return &w, nil
	case errors.Is(err, storage.ErrNotFound):
		return nil, nil
	}
	return nil, err
}

// resolveOwner is the decision's owner step: the nonterminal Work that
// owns the event's correlation key in its scope (keyOwner, as
// lookupKeyOwner found it), or the finished Work of that scope whose id
// the key is; nil for none (and for no key).
func resolveOwner(ctx context.Context, rd storage.Reader, ev storage.Event, keyOwner *storage.Work) (*storage.Work, error) {
	if ev.CorrelationKey == "" {
		return nil, nil
	}
	if keyOwner != nil {
		return keyOwner, nil
	}
	w, err := rd.GetWork(ctx, ev.CorrelationKey)
	switch {
	case err == nil && w.Scope == ev.Scope && w.State.Terminal():
		return &w, nil
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return nil, err
	}
	return nil, nil
}

// splitWakes separates the wake of the owner's own Wait (when the owner
// is waiting) from the wakes of other Work, kept in order.
func splitWakes(wakes []Wake, owner *storage.Work) (primary *Wake, others []Wake) {
	for i, wk := range wakes {
		if owner != nil && wk.Work == owner.ID && owner.State == storage.WorkWaiting {
			primary = &wakes[i]
			continue
		}
		others = append(others, wk)
	}
	return primary, others
}

// scopeRoutes are the current routes of a scope, in order (none before a
// route provider is set).
func (r *Runtime) scopeRoutes(ctx context.Context, scope string) ([]Route, error) {
	h := r.routes.Load()
	if h == nil || h.p == nil {
		return nil, nil
	}
	routes, err := h.p.Routes(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("kernel: routes of scope %s: %w", scope, err)
	}
	return routes, nil
}

// bypasses reports whether the owner skips the routes: it is waiting or
// has finished.
func bypasses(owner *storage.Work) bool {
	return owner != nil && (owner.State == storage.WorkWaiting || owner.State.Terminal())
}

// bypassRoutes marks every route bypassed because of the owner's state.
func bypassRoutes(routes []Route, owner *storage.Work) []RouteVerdict {
	var out []RouteVerdict
	reason := fmt.Sprintf("Work %s is %s", owner.ID, owner.State)
	for _, rt := range routes {
		out = append(out, RouteVerdict{Route: rt.ID, Verdict: VerdictBypassed, Reason: reason})
	}
	return out
}

// bypassEffect is what becomes of an event whose owner bypasses the
// routes: it wakes the owner (primary, the Wait it satisfies), is queued
// for a waiting owner, or is dropped for a finished one.
func bypassEffect(owner *storage.Work, primary *Wake) (effect Effect, wait, detail string) {
	switch {
	case primary != nil:
		return EffectWake, primary.Wait, fmt.Sprintf("wakes Work %s: %s", owner.ID, primary.Reason)
	case owner.State == storage.WorkWaiting:
		return EffectQueue, "", fmt.Sprintf("Work %s is waiting and this event does not satisfy its Wait; it is queued as input for when the Work wakes", owner.ID)
	}
	return EffectDrop, "", fmt.Sprintf("Work %s has %s", owner.ID, owner.State)
}

// matchRoutes is the decision's match step: every route's verdict on the
// event, in order (skip with the reason, the first match, then
// not_reached), and the index of the matching route (-1 for none).
func matchRoutes(routes []Route, ev storage.Event) ([]RouteVerdict, int) {
	var out []RouteVerdict
	matched := -1
	for i, rt := range routes {
		if matched >= 0 {
			out = append(out, RouteVerdict{Route: rt.ID, Verdict: VerdictNotReached, Reason: fmt.Sprintf("route %s matched first", routes[matched].ID)})
			continue
		}
		switch {
		case !matchType(rt.MatchType, ev.Type):
			out = append(out, RouteVerdict{Route: rt.ID, Verdict: VerdictSkip, Reason: fmt.Sprintf("type %s does not match %s", ev.Type, rt.MatchType)})
		case rt.MatchSource != "" && rt.MatchSource != ev.Source:
			out = append(out, RouteVerdict{Route: rt.ID, Verdict: VerdictSkip, Reason: fmt.Sprintf("source %s is not %s", ev.Source, rt.MatchSource)})
		default:
			matched = i
			reason := fmt.Sprintf("type %s matches %s", ev.Type, rt.MatchType)
			if rt.MatchSource != "" {
				reason += " and source is " + rt.MatchSource
			}
			out = append(out, RouteVerdict{Route: rt.ID, Verdict: VerdictMatch, Reason: reason})
		}
	}
	return out, matched
}

// routeEffect is what the matching route does with the event, given the
// key's owner (nil for none): start, queue or drop, the binding of a
// start, and the detail.
func routeEffect(rt Route, owner *storage.Work, ev storage.Event) (effect Effect, binding, detail string) {
	if owner != nil && ev.Work == owner.ID && rt.Effect != EffectDrop {
		// An execution's own emission on a key its Work owns never comes
		// back to it as input (it would run the Work again on its own
		// output).
		return EffectDrop, "", fmt.Sprintf("the event came from Work %s, which owns key %q; it is not queued back to it", owner.ID, ev.CorrelationKey)
	}
	switch rt.Effect {
	case EffectStart:
		if owner != nil {
			return EffectQueue, "", fmt.Sprintf("Work %s owns key %q, so the event is queued for it instead of starting another", owner.ID, ev.CorrelationKey)
		}
		return EffectStart, rt.Binding, fmt.Sprintf("starts a new Work on binding %s with this event as its first input", rt.Binding)
	case EffectQueue, EffectInject, EffectInterrupt:
		switch {
		case owner != nil:
			return rt.Effect, "", fmt.Sprintf("queued as input for Work %s, which owns key %q", owner.ID, ev.CorrelationKey)
		case ev.CorrelationKey == "":
			return EffectDrop, "", fmt.Sprintf("the route %ss, but the event has no correlation key", rt.Effect)
		}
		return EffectDrop, "", fmt.Sprintf("the route %ss, but no unfinished Work owns key %q", rt.Effect, ev.CorrelationKey)
	case EffectDrop:
		return EffectDrop, "", fmt.Sprintf("route %s drops it", rt.ID)
	}
	return EffectDrop, "", fmt.Sprintf("route %s has effect %q, which this release does not apply", rt.ID, rt.Effect)
}

// wakesFor lists the active waits the event satisfies, given the owner
// of its key (lookupKeyOwner).
func (r *Runtime) wakesFor(ctx context.Context, rd storage.Reader, ev storage.Event, keyOwner *storage.Work) ([]Wake, error) {
	if ev.CorrelationKey == "" {
		return nil, nil
	}
	var cands []storage.Wait
	if keyOwner != nil {
		if w, err := rd.GetActiveWait(ctx, keyOwner.ID); err == nil {
			cands = append(cands, w)
		} else if !errors.Is(err, storage.ErrNotFound) {
			return nil, err
		}
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
		ok, reason, err := r.satisfiesOf(ctx, rd, w, ev, keyOwner, true)
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
	return r.satisfiesOf(ctx, rd, w, ev, nil, false)
}

// satisfiesOf is satisfies given, when known, the owner of the event's key
// (lookupKeyOwner, nil for none), which it then does not read again.
func (r *Runtime) satisfiesOf(ctx context.Context, rd storage.Reader, w storage.Wait, ev storage.Event, keyOwner *storage.Work, known bool) (bool, string, error) {
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
	if !known {
		var err error
		if keyOwner, err = lookupKeyOwner(ctx, rd, ev); err != nil {
			return false, "", err
		}
	}
	if keyOwner != nil && keyOwner.ID == w.Work {
		return true, fmt.Sprintf("Wait %s subscribes on the keys of Work %s, which owns %q", w.ID, w.Work, ev.CorrelationKey), nil
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
	case EffectQueue, EffectInject:
		if _, err := r.QueueInputInTx(ctx, tx, d.Work, ev.ID); err != nil {
			return d, err
		}
	case EffectInterrupt:
		exe, err := r.interruptInTx(ctx, tx, d.Work, ev)
		if err != nil {
			return d, err
		}
		d.Interrupted = exe
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

// interruptInTx applies an interrupt to a running Work: its live attempt
// is fenced (a running one becomes stopping, so nothing of its epoch is
// accepted any more), the event is queued as its input and the Work is
// ready again, so the scheduler claims its next attempt once the old one
// has stopped (a claim skips a Work with a live execution). It returns
// the fenced execution.
func (r *Runtime) interruptInTx(ctx context.Context, tx storage.Tx, workID string, ev storage.Event) (string, error) {
	exe, err := r.fenceLiveInTx(ctx, tx, workID, "interrupted by event "+ev.ID)
	if err != nil {
		return "", err
	}
	if _, err := r.QueueInputInTx(ctx, tx, workID, ev.ID); err != nil {
		return "", err
	}
	ready := storage.WorkReady
	_, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: workID, FromStates: []storage.WorkState{storage.WorkRunning}, State: &ready, Now: r.clock.Now()})
	if err != nil && !errors.Is(err, storage.ErrFenced) {
		return "", err
	}
	return exe.ID, nil
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
	ready, none := storage.WorkReady, ""
	_, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.Work, FromStates: []storage.WorkState{storage.WorkWaiting}, State: &ready, WaitReason: &none, Now: now})
	if errors.Is(err, storage.ErrFenced) {
		return nil
	}
	return err
}
