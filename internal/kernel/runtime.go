package kernel

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/ids"
)

// DefaultLeaseMargin is how long before a lease expires its holder stops
// trusting it (see LeaseGuard).
const DefaultLeaseMargin = 5 * time.Second

// Options configure a Runtime.
type Options struct {
	Clock clock.Clock
	IDs   *ids.Generator
	// Routes supplies each scope's routes (the active generation's). Nil
	// means no scope has routes; SetRoutes replaces it at run time.
	Routes RouteProvider
	// LeaseMargin: LeaseGuard refuses a lease that expires within it
	// (default DefaultLeaseMargin).
	LeaseMargin time.Duration
	// Causal bounds the Work a route starts from an event (zero fields
	// take DefaultCausalLimits): a chain of routes can't loop forever.
	// SetCausal replaces it at run time.
	Causal CausalLimits
}

// Runtime accepts, routes and changes Work inside the caller's
// transactions. It is safe for concurrent use.
type Runtime struct {
	clock  clock.Clock
	ids    *ids.Generator
	routes atomic.Pointer[routesHolder]
	margin time.Duration
	causal causalHolder
}

type routesHolder struct{ p RouteProvider }

// New returns a Runtime.
func New(opts Options) (*Runtime, error) {
	if opts.Clock == nil || opts.IDs == nil {
		return nil, errors.New("kernel: a clock and an id generator are required")
	}
	if opts.LeaseMargin <= 0 {
		opts.LeaseMargin = DefaultLeaseMargin
	}
	r := &Runtime{clock: opts.Clock, ids: opts.IDs, margin: opts.LeaseMargin}
	r.SetRoutes(opts.Routes)
	r.SetCausal(opts.Causal)
	return r, nil
}

// SetCausal replaces the causal limits a route start applies (the daemon
// calls it when a new configuration generation becomes active; zero fields
// take DefaultCausalLimits). It applies from the next route start on, and
// only to a root that has no pinned limits yet: a root keeps the limits
// pinned at its first derived emission.
func (r *Runtime) SetCausal(l CausalLimits) { r.causal.set(l) }

// Causal returns the causal limits a route start applies now.
func (r *Runtime) Causal() CausalLimits { return r.causal.get() }

// SetRoutes replaces the route provider (the daemon calls it when a new
// configuration generation becomes active).
func (r *Runtime) SetRoutes(p RouteProvider) { r.routes.Store(&routesHolder{p: p}) }

// Clock is the runtime's clock.
func (r *Runtime) Clock() clock.Clock { return r.clock }

// IDs is the runtime's identifier generator.
func (r *Runtime) IDs() *ids.Generator { return r.ids }

// LeaseMargin is how long before expiry a lease stops being trusted.
func (r *Runtime) LeaseMargin() time.Duration { return r.margin }
