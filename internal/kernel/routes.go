package kernel

import (
	"context"
	"strings"
)

// Effect is what a route (or the router) does with an event.
type Effect string

const (
	// EffectStart: a new Work on the route's binding, the event its first
	// input (or queue, when a nonterminal Work already owns the key).
	EffectStart Effect = "start"
	// EffectQueue: an input for the Work that owns the correlation key.
	EffectQueue Effect = "queue"
	// EffectWake: the event satisfies the Work's Wait.
	EffectWake Effect = "wake"
	// EffectDrop: recorded, nothing else.
	EffectDrop Effect = "drop"
	// EffectUnmatched: no route matched.
	EffectUnmatched Effect = "unmatched"
	// EffectInject: an input for the key's owner delivered to its live
	// attempt without stopping it (the attempt reads it through
	// read_context; a resume-capable agent gets it at its next turn).
	// Without a running attempt it is an ordinary queue.
	EffectInject Effect = "inject"
	// EffectInterrupt: the key owner's running attempt is fenced
	// (stopping) and the Work made ready, so that its next attempt starts
	// with the event as input once the old one has stopped. Without a
	// running attempt (or for a held Work) it is an ordinary queue.
	EffectInterrupt Effect = "interrupt"
)

// Route is one ordered rule of a scope, as the daemon adapts it from the
// active configuration generation.
type Route struct {
	ID string
	// MatchType is an exact type ("github.pr_opened") or a prefix
	// ("github.*", matching github.x and github.x.y but not github).
	MatchType string
	// MatchSource, when set, must equal the event's source.
	MatchSource string
	Binding     string
	// Effect is start, queue, inject, interrupt or drop.
	Effect Effect
}

// RouteProvider supplies a scope's routes, in order.
type RouteProvider interface {
	Routes(ctx context.Context, scope string) ([]Route, error)
}

// RouteTable is a fixed RouteProvider: per scope, ordered routes.
type RouteTable map[string][]Route

// Routes returns the scope's routes.
func (t RouteTable) Routes(_ context.Context, scope string) ([]Route, error) { return t[scope], nil }

// RouteFunc adapts a function to RouteProvider.
type RouteFunc func(ctx context.Context, scope string) ([]Route, error)

// Routes calls f.
func (f RouteFunc) Routes(ctx context.Context, scope string) ([]Route, error) { return f(ctx, scope) }

// matchType reports whether typ matches pattern (exact, or "prefix.*").
func matchType(pattern, typ string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok {
		return strings.HasPrefix(typ, prefix+".")
	}
	return pattern == typ
}
