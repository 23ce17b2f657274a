package management

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// Parts are what the daemon's servers serve. The daemon passes its own;
// the test stack (mgmttest.StartStack) passes the same kinds over a test
// state directory, so that tests serve exactly what the daemon serves.
type Parts struct {
	// Store is coordination storage (required): operator credentials,
	// Idempotency-Key history and every read of the resource routes.
	Store storage.Store
	// Control carries out the operator controls (required).
	Control Controls
	// Actions lists and runs the operator actions (required).
	Actions ActionControls
	// Config is the configuration service (required); it also answers
	// the health route.
	Config *configsvc.Service
	// Artifacts serves artifact content (required).
	Artifacts ArtifactStore
	// Cursors authenticates list cursors (required): NewCursors over the
	// key LoadCursorKey returns.
	Cursors *Cursors
	// LiveLogs, when set, says where a running attempt writes its log
	// (the log routes follow it).
	LiveLogs LiveLogs
	// Owner is this daemon's owner id (ResourcesOptions.Owner).
	Owner string
	// Toolbelt, when set, answers every execution's toolbelt socket.
	Toolbelt extension.Toolbelt
	// ExecutionTokens, when set, lets the management socket recognise an
	// execution token (to refuse it by name) and revoke one.
	ExecutionTokens ExecutionTokens
	// Sources, when set, says whether a route trace may name a
	// registered ingress's source in a scope (see TraceSources); nil
	// registers none.
	Sources TraceSources
	// Samples, when set, lists the sample Events the ingresses offer in
	// a scope (see IngressSamples).
	Samples IngressSamples
	// Clock, Entropy and Logger are the daemon's injected services
	// (required: the servers refuse to start without them).
	Clock   clock.Clock
	Entropy clock.Entropy
	// Version is reported by the health route.
	Version string
	// Ready, when set, says whether the daemon is ready (the health
	// route's state).
	Ready func() bool
	// Logger receives both servers' failures.
	Logger *slog.Logger
	// Metrics, when set, serves GET /metrics on the management socket.
	Metrics http.Handler
	// Refused, when set, is told every refusal either socket answers.
	Refused func(socket, code string)
	// Packages, when set, serves the package routes (/v1/packages).
	Packages PackageControls
}

// Servers are the handlers built from Parts.
type Servers struct {
	// Management serves the management socket: the built-in routes, every
	// resource route and the action routes.
	Management *Server
	Resources  *Resources
	Actions    *Actions
	// Toolbelt serves every execution's own toolbelt socket (give it to
	// runs.Dirs.Serve); nil without Parts.Toolbelt.
	Toolbelt http.Handler
}

// NewServers builds the daemon's servers from their parts: the one
// composition of the management server, its route table and the toolbelt
// socket's handler. Every authenticated request carries its principal as
// the kernel's actor.
func NewServers(p Parts) (*Servers, error) {
	if p.Store == nil || p.Cursors == nil {
		return nil, errors.New("management: Parts need a Store and Cursors")
	}
	resources, err := NewResources(ResourcesOptions{
		Store: p.Store, Control: p.Control, Artifacts: p.Artifacts, Config: p.Config, Cursors: p.Cursors, Clock: p.Clock,
		Sources:  p.Sources,
		Samples:  p.Samples,
		LiveLogs: p.LiveLogs, Owner: p.Owner,
	})
	if err != nil {
		return nil, err
	}
	actions, err := NewActions(ActionsOptions{Control: p.Actions, Config: p.Config})
	if err != nil {
		return nil, err
	}
	routes := append(resources.Routes(), actions.Routes()...)
	if p.Packages != nil {
		routes = append(routes, packageRouteTable(p.Packages)...)
	}
	srv, err := New(Options{
		Credentials:     StoreCredentials(p.Store),
		ExecutionTokens: p.ExecutionTokens,
		Idempotency:     StoreIdempotency(p.Store),
		Health:          p.Config,
		Ready:           p.Ready,
		Clock:           p.Clock,
		Entropy:         p.Entropy,
		Cursors:         p.Cursors,
		Version:         p.Version,
		Logger:          p.Logger,
		Metrics:         p.Metrics,
		Refused:         p.Refused,
		Routes:          routes,
		Authenticated: func(ctx context.Context, pr Principal) context.Context {
			return kernel.WithActor(ctx, pr.Actor())
		},
	})
	if err != nil {
		return nil, err
	}
	out := &Servers{Management: srv, Resources: resources, Actions: actions}
	if p.Toolbelt != nil {
		out.Toolbelt = srv.ExecutionHandler(p.Toolbelt)
	}
	return out, nil
}

// HTTPServer is the net/http server every socket of the daemon is served
// with: its timeouts and header limit, the management socket's limits
// (unixsock.ManagementLimits: connections held at once and the time a
// body may take), no answer of its own to OPTIONS * (the handler decides,
// as for any other request), and its own errors logged as warnings.
func HTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return httpServer(h, log, unixsock.Limits{})
}

// httpServer is HTTPServer with limits (zero fields take the management
// socket's).
func httpServer(h http.Handler, log *slog.Logger, limits unixsock.Limits) *http.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &http.Server{
		Handler:                      h,
		ReadHeaderTimeout:            10 * time.Second,
		IdleTimeout:                  2 * time.Minute,
		MaxHeaderBytes:               64 << 10,
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	limits.Apply(s, unixsock.ManagementLimits, log)
	return s
}
