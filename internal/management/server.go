package management

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// APIPrefix is the version prefix of every route.
const APIPrefix = "/v1"

// Route is one entry of the route table.
type Route struct {
	// Method is GET or POST.
	Method string
	// Pattern is the path pattern, as net/http.ServeMux reads it
	// ("/v1/work/{id}"). A wildcard matches one escaped segment, so an id
	// containing "/" is sent as %2F and PathValue returns it unescaped.
	Pattern string
	// Role is the least role a credential needs; every route has one.
	Role Role
	// Idempotent says the route needs an Idempotency-Key.
	Idempotent bool
	// Class is the credential class the route serves; empty means
	// operator. Routes of the execution class (the toolbelt's) are
	// declared so that the management socket refuses them by name.
	Class Class
	// Handler serves the route; the principal and the effective
	// Idempotency-Key are on the request's context.
	Handler httpapi.HandlerFunc
}

func (rt Route) key() string { return rt.Method + " " + rt.Pattern }

// Health is what the health route asks of the daemon.
type Health interface {
	// Generation returns the active configuration generation.
	Generation(ctx context.Context) (int64, error)
}

// HealthFunc adapts a function to Health.
type HealthFunc func(ctx context.Context) (int64, error)

// Generation calls f.
func (f HealthFunc) Generation(ctx context.Context) (int64, error) { return f(ctx) }

// Options are the server's backends and settings.
type Options struct {
	// Credentials stores operator credentials (required).
	Credentials Credentials
	// ExecutionTokens, if set, lets the server recognise execution
	// tokens (to refuse them with wrong_credential_class) and revoke them.
	ExecutionTokens ExecutionTokens
	// Idempotency keeps Idempotency-Key history (required).
	Idempotency IdempotencyStore
	// Health answers the health route (required).
	Health Health
	// Ready, when set, says whether the daemon is ready (the health
	// route's state: starting until it is); nil means always ready.
	Ready func() bool
	// Clock and Entropy default to the system's.
	Clock   clock.Clock
	Entropy clock.Entropy
	// CursorKey authenticates list cursors; at least 32 bytes. When empty
	// a fresh key is drawn from Entropy, so cursors end with the process.
	CursorKey []byte
	// Cursors, when set, is the list cursor codec (the one the resource
	// routes use) and CursorKey is not read.
	Cursors *Cursors
	// Version is reported by the health route.
	Version string
	// Logger receives failures; never a token, digest or request body.
	Logger *slog.Logger
	// Routes are served in addition to the built-in ones.
	Routes []Route
	// Authenticated, if set, derives every authenticated request's
	// context, after the principal is on it. The daemon bridges the
	// principal to the runtime's actor here:
	//
	//	func(ctx context.Context, p Principal) context.Context {
	//		return runtime.WithActor(ctx, p.Actor())
	//	}
	Authenticated func(ctx context.Context, p Principal) context.Context
	// Limits bound Serve's connections and body read time; zero fields
	// take unixsock.ManagementLimits.
	Limits unixsock.Limits
	// Metrics, when set, serves GET /metrics (the Prometheus exposition)
	// to a credential of MetricsRole.
	Metrics http.Handler
	// Refused, when set, is told the socket ("management" or "toolbelt")
	// and code of every refusal either socket answers.
	Refused func(socket, code string)
}

// MetricsPath is the path of the metrics, outside the versioned API as
// Prometheus expects it.
const MetricsPath = "/metrics"

// MetricsRole is the least role that reads the metrics: they hold counts
// only, never an id, and every view credential already reads far more.
const MetricsRole = RoleView

// Sockets named to Options.Refused.
const (
	SocketManagement = "management"
	SocketToolbelt   = "toolbelt"
)

// Server is the management API's HTTP handler and server.
type Server struct {
	opts    Options
	ops     *Operators
	cursors *Cursors
	routes  []Route
	mux     *http.ServeMux
	keys    keyLocks
	log     *slog.Logger
	out     httpapi.Writer

	mu   sync.Mutex
	http *http.Server
	// stopped is set by Shutdown and Close, so that a Serve that starts
	// after them (its goroutine scheduled late) returns at once instead of
	// serving a server its owner already stopped.
	stopped bool
}

// New checks the options and the route table and builds the server. A
// route without a valid role, with an unknown method, or registered twice
// is refused here, so the table can never serve a route nobody classified.
func New(opts Options) (*Server, error) {
	if opts.Credentials == nil || opts.Idempotency == nil || opts.Health == nil {
		return nil, errors.New("management: Options need Credentials, Idempotency and Health")
	}
	switch {
	case opts.Clock == nil:
		return nil, errors.New("management: Options need a Clock")
	case opts.Entropy == nil:
		return nil, errors.New("management: Options need an Entropy source")
	case opts.Logger == nil:
		return nil, errors.New("management: Options need a Logger")
	}
	cursors := opts.Cursors
	if cursors == nil {
		var err error
		if cursors, err = NewCursors(opts.CursorKey, opts.Entropy, opts.Clock); err != nil {
			return nil, err
		}
	}
	ops, err := NewOperators(opts.Credentials, opts.Clock, opts.Entropy)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:    opts,
		ops:     ops,
		cursors: cursors,
		mux:     http.NewServeMux(),
		log:     opts.Logger,
		out: httpapi.Writer{Log: opts.Logger, Failed: "management request failed", Caller: func(r *http.Request) string {
			p, _ := PrincipalFrom(r.Context())
			return p.Actor()
		}},
	}
	if opts.Refused != nil {
		s.out.Refused = func(code string) { opts.Refused(SocketManagement, code) }
	}
	s.routes = append(s.builtinRoutes(), opts.Routes...)
	seen := map[string]bool{}
	for i := range s.routes {
		rt := &s.routes[i]
		if err := checkRoute(*rt); err != nil {
			return nil, err
		}
		if seen[rt.key()] {
			return nil, fmt.Errorf("management: route %s is registered twice", rt.key())
		}
		seen[rt.key()] = true
		s.mux.Handle(rt.key(), s.serveRoute(rt))
	}
	return s, nil
}

func checkRoute(rt Route) error {
	switch {
	case rt.Method != http.MethodGet && rt.Method != http.MethodPost:
		return fmt.Errorf("management: route %s: method must be GET or POST", rt.key())
	case !strings.HasPrefix(rt.Pattern, APIPrefix+"/"):
		return fmt.Errorf("management: route %s: pattern must start with %s/", rt.key(), APIPrefix)
	case !rt.Role.Valid():
		return fmt.Errorf("management: route %s has no role: every route must say which role it needs", rt.key())
	case rt.Handler == nil:
		return fmt.Errorf("management: route %s has no handler", rt.key())
	case rt.Idempotent && rt.Method != http.MethodPost:
		return fmt.Errorf("management: route %s: only POST routes take an Idempotency-Key", rt.key())
	case rt.Class != "" && rt.Class != ClassOperator && rt.Class != ClassExecution:
		return fmt.Errorf("management: route %s: unknown credential class", rt.key())
	}
	return nil
}

// builtinRoutes is the route table of this package, sorted by pattern.
func (s *Server) builtinRoutes() []Route {
	return []Route{
		{Method: "POST", Pattern: "/v1/auth/operators", Role: RoleAdmin, Handler: s.handleIssueOperator},
		{Method: "GET", Pattern: "/v1/auth/operators", Role: RoleView, Handler: s.handleListOperators},
		{Method: "POST", Pattern: "/v1/auth/revoke", Role: RoleOperate, Idempotent: true, Handler: s.handleRevoke},
		{Method: "POST", Pattern: "/v1/auth/rotate", Role: RoleOperate, Handler: s.handleRotate},
		{Method: "GET", Pattern: "/v1/health", Role: RoleView, Handler: s.handleHealth},
		{Method: "POST", Pattern: "/v1/toolbelt/call", Role: RoleView, Class: ClassExecution, Handler: refuseOperator},
		{Method: "GET", Pattern: "/v1/toolbelt/guidance", Role: RoleView, Class: ClassExecution, Handler: refuseOperator},
		{Method: "GET", Pattern: "/v1/toolbelt/serving", Role: RoleView, Class: ClassExecution, Handler: refuseOperator},
	}
}

// Routes returns a copy of the route table, in registration order.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// Operators returns the server's operator credential service.
func (s *Server) Operators() *Operators { return s.ops }

// Cursors returns the server's cursor codec, for list handlers.
func (s *Server) Cursors() *Cursors { return s.cursors }

func (s *Server) now() time.Time { return s.opts.Clock.Now() }

// ServeHTTP authenticates the request, matches its route and serves it.
// Authentication comes first, so an unauthenticated caller learns nothing
// about which paths exist.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.recoverPanic(w, r)
	p, err := s.authenticate(r)
	if err != nil {
		s.out.Error(w, r, err)
		return
	}
	ctx := WithPrincipal(r.Context(), p)
	if s.opts.Authenticated != nil {
		ctx = s.opts.Authenticated(ctx, p)
	}
	r = r.WithContext(ctx)
	escaped := r.URL.EscapedPath()
	if escaped == "" || path.Clean(escaped) != escaped {
		// ServeMux would redirect to the cleaned path; a client that
		// follows no redirects is better told plainly.
		s.out.Error(w, r, httpapi.Errorf(httpapi.CodeNotFound, "no route for this path; paths are not cleaned or redirected"))
		return
	}
	if escaped == MetricsPath && s.opts.Metrics != nil {
		s.serveMetrics(w, r, p)
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", probe.header.Get("Allow"))
			s.out.Error(w, r, httpapi.Errorf(httpapi.CodeMethodNotAllowed, "this path accepts only %s", probe.header.Get("Allow")))
			return
		}
		s.out.Error(w, r, httpapi.Errorf(httpapi.CodeNotFound, "no route for %s %s", r.Method, safePath(escaped)))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// serveMetrics answers GET /metrics: the role first, as on every route,
// then the exposition; no query and no body are read.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, p Principal) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.out.Error(w, r, httpapi.Errorf(httpapi.CodeMethodNotAllowed, "this path accepts only GET"))
		return
	}
	if !p.Role.Allows(MetricsRole) {
		s.out.Error(w, r, httpapi.Wrap(httpapi.CodeForbiddenRole, httpapi.ErrForbiddenRole,
			fmt.Sprintf("GET %s needs the %s role; this credential's role is %s (ask an admin for a credential with that role)", MetricsPath, MetricsRole, p.Role)))
		return
	}
	r.Body = http.NoBody
	s.opts.Metrics.ServeHTTP(w, r)
}

// recoverPanic turns a handler's panic into a logged 500 internal, so
// one bad request never takes the connection down without an answer.
func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.out.Error(w, r, fmt.Errorf("management: handler panicked: %v", v))
}

// statusProbe records what ServeMux's own not-found and
// method-not-allowed handlers would answer, so that the answer can be
// given in the envelope instead.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

// safePath shortens a request path for a message.
func safePath(p string) string {
	if len(p) > 200 {
		return p[:200] + "…"
	}
	return p
}

// serveRoute is the pipeline every route goes through after matching:
// credential class, role (before the body is read), request discipline,
// Idempotency-Key, handler, response.
func (s *Server) serveRoute(rt *Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalFrom(r.Context())
		if rt.Class == ClassExecution {
			s.out.Error(w, r, toolbeltRefusal())
			return
		}
		if !p.Role.Allows(rt.Role) {
			s.out.Error(w, r, httpapi.Wrap(httpapi.CodeForbiddenRole, httpapi.ErrForbiddenRole,
				fmt.Sprintf("%s %s needs the %s role; this credential's role is %s (ask an admin for a credential with that role)", rt.Method, rt.Pattern, rt.Role, p.Role)))
			return
		}
		if isMutation(r.Method) {
			body, hash, err := httpapi.ReadBody(w, r)
			if err != nil {
				s.out.Error(w, r, err)
				return
			}
			r = httpapi.WithBody(r, body)
			if rt.Idempotent {
				s.serveIdempotent(w, r, rt, p, hash)
				return
			}
		} else {
			r.Body = http.NoBody
		}
		out, err := rt.Handler(r)
		if err != nil {
			s.out.Error(w, r, err)
			return
		}
		s.out.Result(w, r, out)
	})
}

// toolbeltRefusal is what an execution-class route answers on this socket.
func toolbeltRefusal() error {
	return httpapi.Wrap(httpapi.CodeWrongCredentialClass, httpapi.ErrWrongCredentialClass,
		"the toolbelt is not served on the management socket: an execution calls it on its own toolbelt socket, and operator credentials never reach it")
}

func refuseOperator(*http.Request) (any, error) { return nil, toolbeltRefusal() }

func isMutation(method string) bool { return method != http.MethodGet && method != http.MethodHead }

// Serve serves the API on l until Shutdown or Close.
func (s *Server) Serve(l net.Listener) error {
	hs := httpServer(s, s.log, s.opts.Limits)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	if s.http != nil {
		s.mu.Unlock()
		return errors.New("management: Serve called twice")
	}
	s.http = hs
	s.mu.Unlock()
	err := hs.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and waits for requests in flight
// until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopped = true
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Shutdown(ctx)
}

// Close stops serving at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.stopped = true
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	return hs.Close()
}

// handleHealth answers GET /v1/health.
func (s *Server) handleHealth(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	gen, err := s.opts.Health.Generation(r.Context())
	if err != nil {
		return nil, err
	}
	state := api.HealthReady
	if s.opts.Ready != nil && !s.opts.Ready() {
		state = api.HealthStarting
	}
	return healthOut(s.opts.Version, gen, state), nil
}
