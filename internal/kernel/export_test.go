package kernel

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The router decision's steps, for the tests of each step alone.

// ResolveOwner is the owner step.
func ResolveOwner(ctx context.Context, rd storage.Reader, ev storage.Event) (*storage.Work, error) {
	keyOwner, err := lookupKeyOwner(ctx, rd, ev)
	if err != nil {
		return nil, err
	}
	return resolveOwner(ctx, rd, ev, keyOwner)
}

// WakesFor is the wakes step.
func (r *Runtime) WakesFor(ctx context.Context, rd storage.Reader, ev storage.Event) ([]Wake, error) {
	keyOwner, err := lookupKeyOwner(ctx, rd, ev)
	if err != nil {
		return nil, err
	}
	return r.wakesFor(ctx, rd, ev, keyOwner)
}

// SplitWakes separates the owner's wake from the others.
func SplitWakes(wakes []Wake, owner *storage.Work) (*Wake, []Wake) { return splitWakes(wakes, owner) }

// ScopeRoutes is the lookup of the scope's routes.
func (r *Runtime) ScopeRoutes(ctx context.Context, scope string) ([]Route, error) {
	return r.scopeRoutes(ctx, scope)
}

// Bypass is the bypass step: whether the owner skips the routes and, when
// it does, the routes' verdicts and the event's effect.
func Bypass(routes []Route, owner *storage.Work, primary *Wake) (bool, []RouteVerdict, Effect, string, string) {
	if !bypasses(owner) {
		return false, nil, "", "", ""
	}
	effect, wait, detail := bypassEffect(owner, primary)
	return true, bypassRoutes(routes, owner), effect, wait, detail
}

// MatchRoutes is the match step.
func MatchRoutes(routes []Route, ev storage.Event) ([]RouteVerdict, int) {
	return matchRoutes(routes, ev)
}

// RouteEffect is the matching route's effect.
func RouteEffect(rt Route, owner *storage.Work, ev storage.Event) (Effect, string, string) {
	return routeEffect(rt, owner, ev)
}
