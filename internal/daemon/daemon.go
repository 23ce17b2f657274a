package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/buildinfo"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/daemon/humanport"
	"github.com/open-conduit/open-conduit/internal/egress"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
	"github.com/open-conduit/open-conduit/internal/executor/claudecode"
	"github.com/open-conduit/open-conduit/internal/executor/codex"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/metrics"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/postgres"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// Names inside the state directory (see the package documentation).
const (
	DatabaseFile  = "coordination.db"
	ArtifactsDir  = "artifacts"
	ExecutionsDir = "executions"
	PlaybooksDir  = "playbooks"
	// WorkspacesDir holds the agent executors' per-Work git checkouts.
	WorkspacesDir = "workspaces"
	BinDir        = "bin"
)

// Defaults of the loops.
const (
	DefaultTickInterval  = time.Second
	DefaultSweepInterval = time.Minute
	// shutdownGrace bounds how long shutdown waits for management requests
	// in flight.
	shutdownGrace = 5 * time.Second
)

// OwnerPrefix is the prefix of a daemon instance's owner id.
const OwnerPrefix = "dmn"

// NodePrefix is the prefix of a state directory's node id
// (statedir.NodeFile), made once and kept across restarts.
const NodePrefix = "nod"

// Options configure a daemon.
type Options struct {
	// StateDir is the state directory (required); the CLI resolves it from
	// --state, $OPEN_CONDUIT_STATE and the XDG state directory.
	StateDir string
	// LogFormat is "text" (the default) or "json".
	LogFormat string
	// LogLevel is "debug", "info" (the default), "warn" or "error".
	LogLevel string
	// Stderr receives the logs; os.Stderr when nil.
	Stderr io.Writer
	// Logger, when set, is used instead of LogFormat and Stderr.
	Logger *slog.Logger
	// Executable is the open-conduit binary: the shell executor's
	// supervisor and the source of the <state>/bin/os copy. os.Executable() when
	// empty.
	Executable string
	// Version is reported by the health route; the build's module version
	// when empty.
	Version string
	// Clock and Entropy default to the system's: the daemon is where the
	// one clock, entropy source, id generator and logger are made, and
	// every part gets them from here.
	Clock   clock.Clock
	Entropy clock.Entropy
	// Registry is what the release registers; bootstrap.ReleaseRegistry()
	// when nil.
	Registry *config.Registry
	// Keyring answers keyring: secret references; the platform keyring
	// when nil.
	Keyring config.Keyring
	// Extensions are registered once, on the toolbelt's Host: their
	// operations can be called, Registry holds their operations and
	// toolsets, so a binding may grant them, and their actions are served
	// to operators (POST /v1/actions/{name}). They are registered besides
	// the release's own (the introspection extension); a host that embeds
	// the daemon (the end-to-end suite's test daemon) passes its own. A
	// refused registration stops the start.
	Extensions []extension.Registration
	// PackageRuntimes run installed packages, by kind
	// (packages.KindProtocol, packages.KindMCP); a kind it does not name
	// takes the release's runtime. The daemon discovers the packages
	// installed under <state>/packages at start, verifies them and starts
	// each through its kind's runtime (see docs/packages.md).
	PackageRuntimes map[string]packages.Runtime
	// TickInterval and SweepInterval pace the loops (DefaultTickInterval,
	// DefaultSweepInterval when zero).
	TickInterval  time.Duration
	SweepInterval time.Duration
	// Ready, when set, is called once the daemon serves.
	Ready func(Info)
	// NotifySocket is the service manager's readiness socket (the CLI
	// passes $NOTIFY_SOCKET): READY=1 is sent once adoption, the first
	// round and the first sweep are done and the sockets serve, STOPPING=1
	// when a graceful stop begins. Empty sends nothing.
	NotifySocket string
	// MetricsRegistry is where the daemon registers its metrics; a
	// registry of its own (with the Go runtime's and the process's
	// collectors) when nil. Never the client library's global one.
	MetricsRegistry *prometheus.Registry
	// MetricsAddress, when set, also serves GET /metrics, without
	// authentication, on this TCP host:port; it must be a loopback
	// address unless MetricsAllowRemote.
	MetricsAddress     string
	MetricsAllowRemote bool
	// Store, when set, is the postgres:// URL of a PostgreSQL database
	// that keeps coordination storage in place of <state>/coordination.db
	// (docs/storage.md). It must not hold a password (StorePassword names
	// it) and is never logged.
	Store string
	// StorePassword is a secret reference (keyring:, file:, env:, cmd:)
	// to Store's password, resolved at start by the daemon's resolver;
	// empty for none.
	StorePassword string
	// ticked, when set, is called after every scheduler round (a seam for
	// this package's tests: a round that started after an observation has
	// decided on it).
	ticked func()
	// draining, when set, is called when shutdown begins to wait for the
	// requests in flight (a seam for this package's tests).
	draining func()
	// followed, when set, is called after every look at a shared store's
	// latest generation (a seam for this package's tests).
	followed func()
	// deafToWork, when set, keeps the daemon from running a round when
	// another daemon announces new Work (storage.TopicWork): a seam for
	// this package's tests that want Work run by the daemon it was
	// created through.
	deafToWork bool
}

// Info describes a serving daemon.
type Info struct {
	StateDir  string
	Socket    string
	TokenFile string
	Owner     string
	// Node is the state directory's node id.
	Node       string
	Generation int64
}

// Daemon is a composed daemon. New builds it (holding the state
// directory's lock), Serve runs it until its context ends, Close releases
// everything.
type Daemon struct {
	opts  Options
	log   *slog.Logger
	state string
	owner string
	// node is the state directory's node id; duties are the store-wide
	// duties this daemon takes under it.
	node   string
	duties *scheduler.Duties
	clock  clock.Clock
	host   *toolbelt.Host

	// live says where a running attempt writes its log (the log routes);
	// endStreams ends the log streams still following at shutdown.
	live       *liveLogs
	endStreams func()

	lock *statedir.Lock
	// store is db, waking the loop after a write that could start or
	// wake Work (scheduler.WakeOnWrites); every part but the scheduler
	// writes through it.
	store storage.Store
	// raw is the store itself, unwrapped, for the scheduler.
	raw storage.Store
	// db is raw when it is SQLite, for what only it answers (the
	// metrics' tallies).
	db      *sqlite.Store
	metrics *metrics.Metrics
	// metricsLn and metricsHTTP serve the optional TCP metrics listener.
	metricsLn   net.Listener
	metricsHTTP *http.Server
	cfg         configSource
	// follow serves the store's latest generation when another daemon
	// committed it (configsvc's Follow; see followStore).
	follow func(context.Context) (bool, error)
	rt     *kernel.Runtime
	ids    *ids.Generator
	// regs are every registration on host, the release's and the
	// embedder's; human is the human extension's port.
	regs  []extension.Registration
	human *humanport.Port
	ctl   *kernel.Control
	tb    *toolbelt.Toolbelt
	dirs  *runs.Dirs
	sched *scheduler.Scheduler
	srv   *management.Server
	arts  *storage.Artifacts

	// pg is store itself when it is PostgreSQL (Options.Store).
	pg *postgres.Store

	// ingress runs the registrations' ingresses.
	ingress *ingresses

	// pkgs runs the installed packages.
	pkgs *pkgHost

	// egress is the egress proxy served on every execution's egress.sock.
	egress *egress.Proxy

	execHandler http.Handler
	http        *http.Server
	ln          net.Listener
	served      chan error
	wake        chan struct{}
	// announce holds one pending storage.TopicWork announcement (wakeAll);
	// announceWork sends it.
	announce chan struct{}
	// limitsApplied tells the loop that an apply replaced the limits, so
	// that it re-paces lease renewal.
	limitsApplied chan struct{}
	// dutiesHeld is the duties held at the last renewal, joined (a
	// change is logged).
	dutiesHeld atomic.Value
	// ready: start-up adoption and the first round and sweep are done
	// (the health route says ready from then on).
	ready atomic.Bool
	// calls are the requests in flight on both sockets (see drain).
	calls inflight

	closeOnce sync.Once
	closers   []func() error // in the order they run
}

// Run builds the daemon, serves until ctx ends (SIGINT or SIGTERM in the
// CLI), then shuts it down gracefully: it stops serving, detaches from
// running processes (they keep running for the next daemon to adopt),
// closes the sockets but keeps the run directories, closes storage and
// releases the lock.
func Run(ctx context.Context, opts Options) error {
	d, err := New(ctx, opts)
	if err != nil {
		return err
	}
	err = d.Serve(ctx)
	return errors.Join(err, d.Close())
}

// New takes the state directory and builds every part of the daemon. It
// does not serve yet. A failure releases what was taken.
func New(ctx context.Context, opts Options) (_ *Daemon, err error) {
	d := &Daemon{opts: opts, wake: make(chan struct{}, 1), announce: make(chan struct{}, 1), served: make(chan error, 1), limitsApplied: make(chan struct{}, 1)}
	if err := d.defaults(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if err := d.takeState(); err != nil {
		return nil, err
	}
	if err := d.openStorage(ctx); err != nil {
		return nil, err
	}
	if err := d.build(ctx); err != nil {
		return nil, err
	}
	if err := d.listen(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Daemon) defaults() error {
	o := &d.opts
	if o.StateDir == "" {
		return errors.New("no state directory given: pass --state DIR or set OPEN_CONDUIT_STATE")
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return fmt.Errorf("cannot resolve the state directory %s: %w", o.StateDir, err)
	}
	d.state = abs
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Entropy == nil {
		o.Entropy = clock.SystemEntropy()
	}
	if o.Registry == nil {
		o.Registry = bootstrap.ReleaseRegistry()
	}
	// Registered before the configuration is restored, which validates
	// against Registry.
	d.host = toolbelt.NewHost(o.Registry)
	for _, ext := range o.Extensions {
		if err := d.host.Register(ext); err != nil {
			return fmt.Errorf("cannot register extension %s: %w", ext.Name, err)
		}
		d.regs = append(d.regs, ext)
	}
	if o.TickInterval <= 0 {
		o.TickInterval = DefaultTickInterval
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.Version == "" {
		o.Version = buildinfo.Version()
	}
	if err := checkStore(o.Store, o.StorePassword); err != nil {
		return err
	}
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cannot find the open-conduit binary itself (needed to supervise shell commands): %w", err)
		}
		o.Executable = exe
	}
	d.clock = o.Clock
	d.log = o.Logger
	if d.log == nil {
		d.log, err = newLogger(o.Stderr, o.LogFormat, o.LogLevel)
		if err != nil {
			return err
		}
	}
	if o.MetricsAddress != "" {
		// Refused before the state directory is touched.
		if err := checkMetricsAddress(o.MetricsAddress, o.MetricsAllowRemote); err != nil {
			return err
		}
	}
	return d.newMetrics()
}

// takeState prepares the state directory (0700, refused when unsafe) and
// takes its lock. A state directory whose management socket path would be
// too long is refused first, before anything is created.
func (d *Daemon) takeState() error {
	if err := statedir.CheckSocketPath(filepath.Join(d.state, statedir.SocketName)); err != nil {
		return err
	}
	if err := statedir.Prepare(d.state); err != nil {
		return err
	}
	lock, err := statedir.AcquireLock(d.state)
	if err != nil {
		return err
	}
	d.lock = lock
	d.closers = append(d.closers, lock.Close)
	return nil
}

// checkStore refuses a PostgreSQL store the daemon cannot use, before the
// state directory is touched, without repeating the URL.
func checkStore(url, password string) error {
	if url == "" {
		if password != "" {
			return errors.New("a store password was given without a store: pass --store postgres://… too")
		}
		return nil
	}
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return errors.New("the store must be a postgres:// URL (or leave --store out for the state directory's SQLite)")
	}
	if postgres.InlinePassword(url) {
		return errors.New("the store URL holds a password; leave it out and name it as a secret reference with --store-password (keyring:, file:, env: or cmd:)")
	}
	if password != "" {
		if _, err := config.ParseSecretRef(password); err != nil {
			return fmt.Errorf("the store password: %w", err)
		}
	}
	return nil
}

func (d *Daemon) openStorage(ctx context.Context) error {
	if d.opts.Store != "" {
		return d.openPostgres(ctx)
	}
	path := filepath.Join(d.state, DatabaseFile)
	// Create the database owner-only; SQLite gives its -wal and -shm files
	// the database file's mode.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		f.Close()
	}
	store, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: d.clock, OnCommit: d.metrics.Commit})
	if err != nil {
		return fmt.Errorf("cannot open coordination storage in %s: %w", d.state, err)
	}
	// Every write on behalf of a request goes through d.store, which
	// wakes the loop when it could start or wake Work; the scheduler
	// writes to the store itself (see scheduler.WakeOnWrites).
	d.store, d.raw, d.db = scheduler.WakeOnWrites(store, d.Wake), store, store
	// Closed before the lock is released.
	d.closers = append([]func() error{store.Close}, d.closers...)
	return nil
}

// openPostgres opens the PostgreSQL store Options.Store names, its
// password resolved from Options.StorePassword.
func (d *Daemon) openPostgres(ctx context.Context) error {
	password, err := storePassword(ctx, d.opts.StorePassword, d.state, d.opts.Keyring, d.opts.Executable)
	if err != nil {
		return err
	}
	store, err := postgres.Open(ctx, postgres.Options{ConnString: d.opts.Store, Password: password, Clock: d.clock, OnCommit: d.metrics.Commit, OnListen: d.onListen})
	if err != nil {
		return fmt.Errorf("cannot open coordination storage on PostgreSQL: %w", err)
	}
	// As with SQLite, requests write through the waking wrapper and the
	// scheduler to the store itself.
	// A write that can start or wake Work wakes every daemon's
	// scheduler, this one's at once and the others' through the store
	// (storage.TopicWork).
	d.store, d.raw, d.pg = scheduler.WakeOnWrites(store, d.wakeAll), store, store
	// Closed before the lock is released.
	d.closers = append([]func() error{store.Close}, d.closers...)
	d.log.Info("coordination storage on PostgreSQL")
	return nil
}

// build restores the configuration and composes the runtime, the
// toolbelt, the executors, the scheduler and the management server.
func (d *Daemon) build(ctx context.Context) error {
	gen := ids.NewGenerator(d.clock, d.opts.Entropy)
	d.ids = gen
	d.owner = gen.New(OwnerPrefix)
	node, err := statedir.NodeID(d.state, func() string { return gen.New(NodePrefix) })
	if err != nil {
		return err
	}
	d.node = node
	if err := d.registerRelease(); err != nil {
		return err
	}
	// Installed packages register before the configuration is restored
	// too; their processes stop before storage closes.
	runtimes, err := d.releaseRuntimes()
	if err != nil {
		return err
	}
	for k, rt := range d.opts.PackageRuntimes {
		runtimes[k] = rt
	}
	d.pkgs = newPkgHost(packages.NewStore(d.state, d.clock.Now), d.host, d.opts.Registry, runtimes, d.log.With("component", "packages"))
	d.closers = append([]func() error{d.pkgs.stopAll}, d.closers...)
	if err := d.pkgs.startAll(ctx); err != nil {
		return err
	}

	// The operator's playbooks are read again before every validation,
	// so a config naming one just added applies; every playbook is
	// written out at start and after every apply.
	pbs := &playbooks{dir: filepath.Join(d.state, PlaybooksDir), reg: d.opts.Registry, log: d.log.With("component", "playbooks")}
	cfgOpts := configsvc.Options{
		Store: d.store, StateDir: d.state, Default: bootstrap.DefaultConfig(), Registry: d.opts.Registry,
		Clock: d.clock, Logger: d.log.With("component", "config"), Refresh: pbs.read,
	}
	if d.pg != nil {
		// Every daemon on the store can load every generation.
		cfgOpts.Documents = d.pg
	}
	svc, err := configsvc.New(cfgOpts)
	if err != nil {
		return err
	}
	d.follow = svc.Follow
	if err := svc.Restore(ctx); err != nil {
		return err
	}
	if err := pbs.write(); err != nil {
		return err
	}
	d.cfg = svc
	d.pkgs.active = svc.Active
	d.pkgs.changed = func() {
		if err := pbs.write(); err != nil {
			d.log.Error("cannot write the playbooks after a package changed", "error", err.Error())
		}
	}
	active := svc.Active()
	d.log.Info("configuration active", "generation", active.Generation, "hash", active.Hash)
	limits := active.Limits()

	if d.rt, err = kernel.New(kernel.Options{Clock: d.clock, IDs: gen, Routes: routesOf(d.cfg), Causal: causalOf(limits)}); err != nil {
		return err
	}
	d.human.Runtime = d.rt
	d.ctl = kernel.NewControl(kernel.ControlOptions{Runtime: d.rt, Store: d.store, Scopes: svc})
	// Registrations follow the generations from here on: what each one
	// enables is asked on every call, so an apply takes effect at once.
	d.host.Follow(extensionsOf(d.cfg))
	actions := toolbelt.NewActions(d.ctl, d.host)
	d.tb, err = toolbelt.New(toolbelt.Options{
		Runtime: d.rt, Store: d.store, Host: d.host, Entropy: d.opts.Entropy, Owner: d.owner,
		Bindings:      bindingAuthority(d.cfg),
		Scopes:        svc,
		Authorize:     func(scope, op string) bool { return d.cfg.Active().AuthorizeOperation(scope, op) },
		AuthorizeAt:   authorizeAt(d.cfg),
		AuthorizeRead: func(scope, read string) bool { return d.cfg.Active().AuthorizeRead(scope, read) },
		EmitAllowed:   emitAllowed(d.cfg),
		OnCall:        d.metrics.ToolbeltCall,
		Logger:        d.log.With("component", "toolbelt"),
	})
	if err != nil {
		return err
	}

	cursorKey, err := management.LoadCursorKey(ctx, d.store, d.opts.Entropy, d.clock.Now())
	if err != nil {
		return fmt.Errorf("cannot load the list cursor key: %w", err)
	}
	cursors, err := management.NewCursors(cursorKey, d.opts.Entropy, d.clock)
	if err != nil {
		return err
	}
	if d.arts, err = storage.NewArtifacts(d.store, filepath.Join(d.state, ArtifactsDir)); err != nil {
		return err
	}
	d.live = &liveLogs{dir: filepath.Join(d.state, ExecutionsDir)}
	execTokens := management.ToolbeltTokens(d.tb)
	if d.pg != nil {
		execTokens = announcingTokens{ExecutionTokens: execTokens, w: d.pg, log: d.log.With("component", "management").Warn}
	}
	servers, err := management.NewServers(management.Parts{
		LiveLogs: d.live,
		Store:    d.store, Control: d.ctl, Actions: actions, Config: svc, Artifacts: d.arts, Cursors: cursors, Sources: d.host.AdmitsTrace,
		Samples:  d.ingressSamples,
		Toolbelt: d.tb, ExecutionTokens: execTokens,
		Clock: d.clock, Entropy: d.opts.Entropy, Version: d.opts.Version, Ready: d.ready.Load, Logger: d.log.With("component", "management"),
		Metrics: d.metrics.Handler(), Refused: d.metrics.Refusal,
		Packages: d.pkgs,
		Owner:    d.owner,
	})
	if err != nil {
		return err
	}
	d.srv = servers.Management
	d.endStreams = servers.Resources.EndStreams
	if was, err := statedir.RepairTokenFileMode(statedir.OwnerTokenPath(d.state)); err != nil {
		return err
	} else if was != 0 {
		d.log.Warn("the owner's token file was open to other users; it is now owner-only (0600): rotate the owner's token ('open-conduit auth rotate') if anyone may have read it", "token_file", statedir.OwnerTokenPath(d.state), "mode_was", fmt.Sprintf("%04o", was))
	}
	st, err := management.BootstrapOperator(ctx, d.lock, d.srv.Operators())
	if err != nil {
		return fmt.Errorf("cannot bootstrap the owner's operator token: %w", err)
	}
	if st == management.BootstrapStale {
		d.ownerTokenAdvice()
	}
	d.execHandler = d.calls.wrap(servers.Toolbelt)

	if d.dirs, err = runs.New(d.state, runs.Options{Logger: d.log.With("component", "runs")}); err != nil {
		return err
	}
	if d.egress, err = egress.New(egress.Options{
		Execution: runs.ExecutionFromContext, Policy: d.egressPolicy,
		Store: d.store, NewID: func() string { return d.ids.New("egr") }, Clock: d.clock,
		OnConnection: d.metrics.EgressConnection, Logger: d.log.With("component", "egress"),
	}); err != nil {
		return err
	}
	// The toolbelt and egress sockets close and the egress tunnels with
	// them (an adopted attempt opens new ones through the next daemon),
	// then the calls still in flight on them (and on the management
	// socket) return, before storage closes.
	d.closers = append([]func() error{func() error { d.dirs.CloseAll(); return d.egress.Close() }, d.drain}, d.closers...)
	binDir, wrote, err := installOS(d.state, d.opts.Executable)
	if err != nil {
		return err
	}
	if wrote {
		d.log.Info("installed the os binary executions run", "path", filepath.Join(binDir, OSName))
	}
	for _, dir := range []string{ExecutionsDir, PlaybooksDir, WorkspacesDir} {
		if err := os.MkdirAll(filepath.Join(d.state, dir), 0o700); err != nil {
			return fmt.Errorf("cannot create %s: %w", filepath.Join(d.state, dir), err)
		}
	}
	// One bwrap check for every executor; the daemon says at start when
	// sandboxed bindings cannot run (they are then held, never run
	// unsandboxed).
	box := &sandbox.Runtime{}
	if _, err := box.Check(); err != nil {
		d.log.Warn("sandboxed executions cannot run: their Work is held as sandbox_unavailable until bubblewrap works", "package", sandbox.Package, "detail", err.Error())
	}
	sh, err := shell.New(shell.Options{Supervisor: d.opts.Executable, Clock: d.clock, Sandbox: box})
	if err != nil {
		return err
	}
	agentOpts := agentrun.Options{Supervisor: d.opts.Executable, Clock: d.clock, Workspaces: filepath.Join(d.state, WorkspacesDir), Sandbox: box}
	cc, err := claudecode.New(agentOpts)
	if err != nil {
		return err
	}
	cx, err := codex.New(agentOpts)
	if err != nil {
		return err
	}
	execs := map[string]executor.Executor{shell.Name: sh, claudecode.Name: cc, codex.Name: cx}
	secrets := &secretResolver{cfg: d.cfg, resolver: &config.Resolver{Keyring: d.opts.Keyring, StateDir: d.state, Reaper: []string{d.opts.Executable, "reap", "--"}}}
	d.ingress = &ingresses{host: d.host, ctl: d.ctl, cfg: d.cfg, resolver: secrets.resolver, log: d.log.With("component", "ingress"), accepted: d.Wake, delivered: d.metrics.IngressDelivery}
	// The store-wide duties are the node's: one daemon at a time runs
	// them on a shared store, and on SQLite this daemon always holds them.
	d.duties = scheduler.NewDuties(d.raw, d.node, d.clock, d.rt.LeaseMargin())
	d.sched, err = scheduler.New(scheduler.Options{
		Store: d.raw, Runtime: d.rt, Owner: d.owner, Node: d.node, Duties: d.duties,
		Limits:            schedulerLimits(limits),
		Executors:         execs,
		MoreExecutors:     d.pkgs.executor,
		Bindings:          bindingLookup(d.cfg),
		Toolbelt:          d.tb,
		ToolbeltEndpoints: d.endpoint,
		ToolbeltDir:       binDir,
		PlaybookDir:       filepath.Join(d.state, PlaybooksDir),
		Secrets:           secrets.resolve,
		StartGates:        startGates(d.host),
		ExecutionsDir:     filepath.Join(d.state, ExecutionsDir),
		Artifacts:         d.arts,
		OnRenewal:         d.metrics.LeaseRenewal,
		Logger:            d.log.With("component", "scheduler"),
	})
	if err != nil {
		return err
	}
	d.live.executors = execs
	d.live.more = d.pkgs.executor
	// Detach from every segment before the sockets close and storage goes;
	// the ingresses stop accepting first.
	d.closers = append([]func() error{d.ingress.stop, d.sched.Close, d.releaseDuties}, d.closers...)

	// Registered once every part exists; no apply can come before the
	// management socket serves.
	svc.OnApply(func(snap *config.Snapshot) {
		// Routes, ceilings and bindings read the active snapshot on every
		// use, so a new generation takes effect at once. The limits are
		// handed to the parts here, before the apply returns, so the next
		// decision uses them; a round now lets ready Work run on it.
		d.setLimits(snap.Limits())
		// Nothing the toolbelt's calls trust from before the apply
		// outlives it (the ceiling itself is asked on every call).
		d.tb.InvalidateTokens()
		if err := pbs.write(); err != nil {
			d.log.Error("cannot write the playbooks after an apply", "error", err.Error())
		}
		d.log.Info("configuration applied", "generation", snap.Generation, "hash", snap.Hash)
		d.ingress.sync()
		d.Wake()
	})
	return nil
}

// setLimits hands a new generation's limits to every part that applies
// them, each at its next decision: the causal limits to the kernel, which
// route starts, operator emissions and the toolbelt's emissions and
// create_work all read, for roots not pinned yet; max_running, lease and
// attempt_timeout to the scheduler. Then the loop re-paces lease renewal.
func (d *Daemon) setLimits(l config.Limits) {
	d.rt.SetCausal(causalOf(l))
	d.sched.SetLimits(schedulerLimits(l))
	select {
	case d.limitsApplied <- struct{}{}:
	default:
	}
}

// endpoint prepares an execution's run directory with its fresh token and
// serves its toolbelt socket and its egress proxy (the scheduler's
// ToolbeltEndpoints; an adopted attempt is served both again).
func (d *Daemon) endpoint(_ context.Context, executionID, token string) (scheduler.Endpoint, error) {
	ep, err := d.dirs.Prepare(executionID, token)
	if err != nil {
		return scheduler.Endpoint{}, err
	}
	if err := d.dirs.Serve(executionID, ep, d.execHandler); err != nil {
		return scheduler.Endpoint{}, err
	}
	if err := d.dirs.ServeEgress(executionID, ep, d.egress); err != nil {
		return scheduler.Endpoint{}, err
	}
	return scheduler.Endpoint{Socket: ep.Socket, TokenFile: ep.TokenFile}, nil
}

// Wake asks the loop for a scheduler round now.
func (d *Daemon) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// wakeAll wakes this daemon's scheduler and has the other daemons on a
// shared store woken (announceWork).
func (d *Daemon) wakeAll() {
	d.Wake()
	select {
	case d.announce <- struct{}{}:
	default:
	}
}

// listen opens the management socket under the lock.
func (d *Daemon) listen(context.Context) error {
	ln, err := statedir.Listen(filepath.Join(d.state, statedir.SocketName), d.lock)
	if err != nil {
		return err
	}
	d.ln = ln
	d.http = management.HTTPServer(d.calls.wrap(d.srv), d.log.With("component", "management"))
	// Stop serving first of all; storage must outlive requests in flight.
	d.closers = append([]func() error{d.shutdownHTTP}, d.closers...)
	return d.listenMetrics()
}

func (d *Daemon) shutdownHTTP() error {
	if d.endStreams != nil {
		d.endStreams()
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := d.http.Shutdown(ctx); err != nil {
		d.http.Close()
	}
	d.ln.Close()
	return nil
}

// Info describes the daemon.
func (d *Daemon) Info() Info {
	return Info{
		StateDir: d.state, Socket: filepath.Join(d.state, statedir.SocketName),
		TokenFile: statedir.OwnerTokenPath(d.state), Owner: d.owner, Node: d.node, Generation: d.cfg.Active().Generation,
	}
}

// Close shuts the daemon down: it stops serving the management API,
// detaches from every running segment (their processes keep running),
// closes every toolbelt socket and keeps the run directories, closes
// storage and releases the lock. It is safe to call more than once.
func (d *Daemon) Close() error {
	var errs []error
	d.closeOnce.Do(func() {
		for _, c := range d.closers {
			if err := c(); err != nil {
				errs = append(errs, err)
			}
		}
		if d.log != nil && d.lock != nil {
			d.log.Info("daemon stopped", "owner", d.owner)
		}
	})
	return errors.Join(errs...)
}

// ingressSamples adapts the host's ingress samples to the management
// routes' samples.
func (d *Daemon) ingressSamples(scope string) []management.Sample {
	var out []management.Sample
	for _, s := range d.host.IngressSamples(scope) {
		out = append(out, management.Sample{Name: s.Name, Type: s.Type, Source: s.Source, CorrelationKey: s.CorrelationKey, Data: s.Data})
	}
	return out
}
