package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/webhook"
)

// ingresses runs the registrations' ingresses: each while the active
// generation enables its registration, with that generation's config, and
// again when an apply changes it. Their Events are accepted through the
// kernel with the registration's name as their source. A webhook ingress
// (extension.Webhook) whose config turns it on is served at its path on
// the one webhook listener, which listens while at least one is.
type ingresses struct {
	host     *toolbelt.Host
	ctl      *kernel.Control
	cfg      configSource
	resolver *config.Resolver
	log      *slog.Logger
	// accepted is called after every Event an ingress got accepted (the
	// daemon wakes its loop).
	accepted func()
	// delivered counts one delivery's outcome by the ingress's source.
	delivered func(source, outcome string)

	mu      sync.Mutex
	base    context.Context
	stopped bool
	running map[string]*runningIngress
	// hooks is the webhook listener (made at the first sync).
	hooks *webhook.Listener
}

type runningIngress struct {
	config []byte // its fingerprint
	cancel context.CancelFunc
	done   chan struct{}
	// endpoint is its webhook endpoint (nil for none), listen the
	// address its own config names for it (deprecated). Its worker
	// outlives the daemon's context, so that what the listener still
	// answers at shutdown is accepted, until stopWork; worked is closed
	// when it ended.
	endpoint *webhook.Endpoint
	listen   string
	stopWork context.CancelFunc
	worked   chan struct{}
}

// end stops the ingress and its endpoint's worker, and waits for both.
func (r *runningIngress) end() {
	r.cancel()
	<-r.done
	if r.endpoint != nil {
		r.stopWork()
		<-r.worked
	}
}

// start runs every enabled ingress under ctx; sync follows applies.
func (g *ingresses) start(ctx context.Context) {
	g.mu.Lock()
	g.base = ctx
	g.mu.Unlock()
	g.sync()
}

// sync starts, stops or restarts each ingress to match the active
// generation.
func (g *ingresses) sync() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.base == nil || g.stopped {
		return
	}
	if g.running == nil {
		g.running = map[string]*runningIngress{}
	}
	if g.hooks == nil {
		g.hooks = webhook.NewListener(g.log)
	}
	regs := g.host.Ingresses()
	for _, reg := range regs {
		enabled, cfg := g.host.IngressConfig(reg.Name)
		fp := g.fingerprint(cfg)
		cur := g.running[reg.Name]
		if cur != nil && enabled && bytes.Equal(cur.config, fp) {
			continue
		}
		if cur != nil {
			cur.end()
			delete(g.running, reg.Name)
		}
		if !enabled {
			continue
		}
		ctx, cancel := context.WithCancel(g.base)
		r := &runningIngress{config: fp, cancel: cancel, done: make(chan struct{})}
		g.running[reg.Name] = r
		log := g.log.With("ingress", reg.Name)
		port := &ingressPort{g: g, reg: reg.Name, source: reg.Ingress.Source(), log: log}
		if wh, ok := reg.Ingress.(extension.Webhook); ok {
			if spec, on := wh.Endpoint(cfg); on {
				workCtx, stopWork := context.WithCancel(context.WithoutCancel(g.base))
				r.endpoint, r.listen, r.stopWork, r.worked = webhook.NewEndpoint(spec, port), spec.Listen, stopWork, make(chan struct{})
				go func(e *webhook.Endpoint) {
					defer close(r.worked)
					e.Run(workCtx)
				}(r.endpoint)
			}
		}
		go func(ing extension.Ingress) {
			defer close(r.done)
			if err := ing.Serve(ctx, cfg, port); err != nil && ctx.Err() == nil {
				// Only the error's type: its text may hold what it read.
				log.Error("the ingress stopped; it runs again after an apply that changes its config", "error_type", fmt.Sprintf("%T", err))
			}
		}(reg.Ingress)
	}
	g.serveHooks(regs)
}

// serveHooks has the webhook listener serve the running endpoints, on
// the address the active generation names; without one, on the first
// (by registration name) that an ingress's own config names, a member
// kept for one release; else on the default.
func (g *ingresses) serveHooks(regs []extension.Registration) {
	addr := g.cfg.Active().Ingress().Listen
	var eps []*webhook.Endpoint
	for _, reg := range regs {
		r := g.running[reg.Name]
		if r == nil || r.endpoint == nil {
			continue
		}
		eps = append(eps, r.endpoint)
		if addr == "" {
			addr = r.listen
		}
	}
	// Set logs a listen error with its address; the next apply tries
	// again.
	_ = g.hooks.Set(addr, eps)
}

// addr is where the webhook listener listens, nil when it does not.
func (g *ingresses) addr() net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hooks == nil {
		return nil
	}
	return g.hooks.Addr()
}

// fingerprint is what an ingress runs on: its config and the active
// generation's secret references (so a changed reference runs it again
// and it resolves its secret anew). It is kept in memory only.
func (g *ingresses) fingerprint(cfg json.RawMessage) []byte {
	out := append([]byte(nil), cfg...)
	snap := g.cfg.Active()
	for _, name := range snap.SecretNames() {
		ref, _ := snap.Secret(name)
		out = fmt.Appendf(out, "\x00%s=%v", name, ref)
	}
	return out
}

// stop ends every ingress and waits for them (before storage closes).
func (g *ingresses) stop() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	// The listener answers what it is reading first, while the
	// endpoints' workers still accept.
	if g.hooks != nil {
		g.hooks.Close()
	}
	for name, r := range g.running {
		r.end()
		delete(g.running, name)
	}
	return nil
}

// ingressPort is one ingress's extension.IngressHost.
type ingressPort struct {
	g      *ingresses
	reg    string // its registration
	source string // its Events' source
	log    *slog.Logger
}

func (p *ingressPort) Logger() *slog.Logger { return p.log }

// Count counts one delivery's outcome under the ingress's source.
func (p *ingressPort) Count(outcome string) {
	if p.g.delivered != nil {
		p.g.delivered(p.source, outcome)
	}
}

// Accept accepts the Event from the ingress's source, in a scope the
// active generation enables its registration for.
func (p *ingressPort) Accept(ctx context.Context, ev extension.IngressEvent) (extension.IngressAccepted, error) {
	if !p.g.host.IngressEnabledIn(p.reg, ev.Scope) {
		return extension.IngressAccepted{}, fmt.Errorf("%w: the extension is not enabled for the scope", extension.ErrForbidden)
	}
	res, err := p.g.ctl.Ingest(ctx, kernel.IngestRequest{
		Source: p.source, Scope: ev.Scope, Type: ev.Type, CorrelationKey: ev.CorrelationKey, Data: ev.Data, DeliveryID: ev.DeliveryID,
	})
	if err != nil {
		switch {
		case kernel.CodeOf(err) == kernel.ErrScopeInactive.Code:
			return extension.IngressAccepted{}, fmt.Errorf("%w: the scope is not active", extension.ErrForbidden)
		case errors.Is(err, extension.ErrInvalid):
			return extension.IngressAccepted{}, fmt.Errorf("%w: %s", extension.ErrInvalid, kernel.CodeOf(err))
		}
		return extension.IngressAccepted{}, err
	}
	if p.g.accepted != nil && !res.Event.Replayed {
		p.g.accepted()
	}
	return extension.IngressAccepted{Event: res.Event.ID, Replayed: res.Event.Replayed, Effect: string(res.Decision.Effect)}, nil
}

// Secret resolves a secret of the active generation by name; a failure
// says only its code.
func (p *ingressPort) Secret(ctx context.Context, name string) (string, error) {
	ref, ok := p.g.cfg.Active().Secret(name)
	if !ok {
		return "", fmt.Errorf("%w: no secret has this name", extension.ErrNotFound)
	}
	v, err := p.g.resolver.ResolveRef(ctx, ref)
	if err != nil {
		code := "secret_unavailable"
		var se *config.SecretError
		if errors.As(err, &se) {
			code = se.Code
		}
		return "", errors.New(code)
	}
	return v, nil
}

// IngressAddr is where the webhook listener listens, nil when no webhook
// ingress is on.
func (d *Daemon) IngressAddr() net.Addr {
	if d.ingress == nil {
		return nil
	}
	return d.ingress.addr()
}
