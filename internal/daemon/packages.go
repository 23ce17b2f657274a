package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/packages/mcppkg"
	"github.com/open-conduit/open-conduit/internal/packages/pkgproto"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// The problems a package's entry can show (api.PackageProblem.Code).
const (
	problemChanged     = packages.CodeChanged
	problemUnavailable = "package_unavailable"
	problemCrashLoop   = "package_crash_loop"
)

// packageStopGrace bounds how long the daemon waits for one package's
// process to stop, on remove, reinstall and shutdown.
const packageStopGrace = 10 * time.Second

// PackageLogsDir is where, under the state directory, each protocol
// package's stderr is written, as <name>.log (rotated to <name>.log.1).
const PackageLogsDir = "package-logs"

// releaseRuntimes are the package runtimes this release runs packages
// with, by kind: protocol packages run under the daemon's own `reap`
// subreaper (so whatever a package leaves behind goes with it), their
// stderr in <state>/package-logs; MCP servers run in a process group of
// their own that dies with the daemon.
func (d *Daemon) releaseRuntimes() (map[string]packages.Runtime, error) {
	logs := filepath.Join(d.state, PackageLogsDir)
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return nil, fmt.Errorf("cannot make the package log directory %s: %w", logs, err)
	}
	log := d.log.With("component", "packages")
	return map[string]packages.Runtime{
		packages.KindProtocol: pkgproto.NewRuntime(pkgproto.Options{
			Clock: d.clock, Logger: log, HostVersion: d.opts.Version, LogDir: logs,
			Wrap: []string{d.opts.Executable, "reap", "--"},
		}),
		packages.KindMCP: mcppkg.NewRuntime(mcppkg.Options{Clock: d.clock, Logger: log, LogDir: logs}),
	}, nil
}

// pkgHost runs the installed packages: it discovers them at start,
// verifies them, starts each through the Runtime of its kind and
// registers its Instance on the toolbelt's Host (opt-in, with the
// configuration registry's view) and its executors, and installs and
// removes them while the daemon runs. A package that cannot run (changed
// files, a runtime that refuses) is still registered from the manifest it
// was installed with, its operations refusing with package_unavailable,
// so that a configuration naming it still validates and the daemon still
// starts; its entry says why.
type pkgHost struct {
	store    *packages.Store
	host     *toolbelt.Host
	reg      *config.Registry
	runtimes map[string]packages.Runtime
	log      *slog.Logger
	// active is the active configuration (nil before it is restored):
	// install and remove refuse what would leave it invalid.
	active func() *config.Snapshot
	// changed, when set, is called after an install or a remove changed
	// what is registered (the daemon writes the playbooks out again).
	changed func()

	op sync.Mutex // serialises installs, removes, starts and stops

	mu      sync.RWMutex // guards entries and execs
	entries map[string]*pkgEntry
	execs   map[string]executor.Executor
}

// pkgEntry is one installed package as the daemon runs it.
type pkgEntry struct {
	rec  packages.Record
	inst packages.Instance // nil when it does not run
	// problem is why it does not run (nil when it runs).
	problem *api.PackageProblem
	// registered: its registration is on the host.
	registered bool
	reg        extension.Registration
	playbooks  []string
	executors  []string
}

func newPkgHost(store *packages.Store, host *toolbelt.Host, reg *config.Registry, runtimes map[string]packages.Runtime, log *slog.Logger) *pkgHost {
	return &pkgHost{store: store, host: host, reg: reg, runtimes: runtimes, log: log, entries: map[string]*pkgEntry{}, execs: map[string]executor.Executor{}}
}

// executor is an installed package's executor (the scheduler's
// MoreExecutors); nil when none has the name.
func (p *pkgHost) executor(name string) executor.Executor {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if ex, ok := p.execs[name]; ok {
		return ex
	}
	return nil
}

// startAll discovers the installed packages and starts each, before the
// configuration is restored (which validates against what they
// register). A package that cannot run is logged, and shown in packages
// list and doctor; it never stops the start.
func (p *pkgHost) startAll(ctx context.Context) error {
	if err := p.store.Sweep(); err != nil {
		p.log.Warn("cannot clear what an interrupted package install left", "dir", p.store.Dir, "error", err.Error())
	}
	names, err := p.store.Names()
	if err != nil {
		return fmt.Errorf("cannot read the installed packages in %s: %w", p.store.Dir, err)
	}
	p.op.Lock()
	defer p.op.Unlock()
	for _, name := range names {
		p.activate(ctx, name)
	}
	return nil
}

// stopAll stops every package's process (daemon shutdown).
func (p *pkgHost) stopAll() error {
	p.op.Lock()
	defer p.op.Unlock()
	p.mu.RLock()
	var running []*pkgEntry
	for _, e := range p.entries {
		if e.inst != nil {
			running = append(running, e)
		}
	}
	p.mu.RUnlock()
	for _, e := range running {
		ctx, cancel := context.WithTimeout(context.Background(), packageStopGrace)
		if err := e.inst.Stop(ctx); err != nil {
			p.log.Warn("a package's process did not stop cleanly", "package", e.rec.Name, "error_type", fmt.Sprintf("%T", err))
		}
		cancel()
	}
	return nil
}

// checkOptions are what a manifest is checked against: the host's names
// and playbooks, less those of the package being reinstalled.
func (p *pkgHost) checkOptions() packages.CheckOptions {
	return packages.CheckOptions{
		Taken: func(name string) (string, bool) {
			p.mu.RLock()
			_, ours := p.entries[name]
			p.mu.RUnlock()
			switch {
			case ours:
				return "", false
			case p.host.Registered(name):
				return "an extension the daemon registers", true
			}
			if _, ok := p.reg.Executor(name); ok {
				return "an executor of the daemon", true
			}
			return "", false
		},
		Playbook: func(pkg, name string) bool {
			p.mu.RLock()
			e := p.entries[pkg]
			p.mu.RUnlock()
			if e != nil && slices.Contains(e.playbooks, name) {
				return false
			}
			_, ok := p.reg.PlaybookOperations(name)
			return ok
		},
	}
}

// activate loads, verifies and starts an installed package and registers
// it; a package that cannot run is registered from its recorded manifest
// (see pkgHost). Called with op held.
func (p *pkgHost) activate(ctx context.Context, name string) *pkgEntry {
	inst, checked, rec, err := p.store.Load(name, p.checkOptions())
	e := &pkgEntry{rec: rec}
	var ce *packages.ChangedError
	switch {
	case errors.As(err, &ce):
		p.log.Error("an installed package's files changed since it was installed; it does not run until reinstalled", "package", name, "fix", "open-conduit packages install DIR")
		e.problem = &api.PackageProblem{Code: problemChanged, Message: ce.Error()}
	case err != nil:
		p.log.Error("cannot load an installed package", "package", name, "error", err.Error())
		e.problem = &api.PackageProblem{Code: problemUnavailable, Message: fmt.Sprintf("package %s cannot be loaded from the state directory; reinstall it (open-conduit packages install DIR) or remove it (open-conduit packages remove %s)", name, name)}
	default:
		p.start(ctx, e, inst, checked)
	}
	if e.problem != nil && e.rec.Manifest.Name == name {
		p.registerPlaceholder(e)
	}
	if e.rec.Name == "" {
		e.rec.Name = name
	}
	p.mu.Lock()
	p.entries[name] = e
	p.mu.Unlock()
	return e
}

// start starts a verified package through its kind's Runtime and
// registers what its Instance provides. On failure it sets e.problem.
func (p *pkgHost) start(ctx context.Context, e *pkgEntry, inst packages.Installed, checked *packages.Checked) {
	name, kind := inst.Manifest.Name, e.rec.Kind
	rt := p.runtimes[kind]
	if rt == nil {
		e.problem = &api.PackageProblem{Code: problemUnavailable, Message: fmt.Sprintf("package %s: this daemon has no runtime for %s packages", name, kind)}
		return
	}
	instance, err := rt.Start(ctx, inst)
	if err != nil {
		msg := fmt.Sprintf("package %s could not be started (see the daemon's log); fix it and reinstall it, or remove it", name)
		// These texts are the runtime's own, never what the package wrote.
		var se *pkgproto.StartError
		var he *pkgproto.HandshakeError
		if errors.As(err, &se) || errors.As(err, &he) {
			msg = err.Error() + "; fix it and reinstall it, or remove it"
		}
		p.log.Error("an installed package could not be started", "package", name, "kind", kind, "error_type", fmt.Sprintf("%T", err))
		e.problem = &api.PackageProblem{Code: problemUnavailable, Message: msg}
		return
	}
	reg := instance.Registration()
	if reg.Name != name {
		p.stopInstance(name, instance)
		e.problem = &api.PackageProblem{Code: problemUnavailable, Message: fmt.Sprintf("package %s: its runtime registered another name; reinstall it", name)}
		return
	}
	reg.OptIn = true
	if len(reg.Playbooks) == 0 && checked != nil {
		reg.Playbooks = slices.Clone(checked.Playbooks)
	}
	if err := p.host.Register(reg); err != nil {
		p.stopInstance(name, instance)
		p.log.Error("an installed package's registration was refused", "package", name, "reason", err.Error())
		e.problem = &api.PackageProblem{Code: problemUnavailable, Message: fmt.Sprintf("package %s: the daemon refused what it registers (see the daemon's log); reinstall a corrected package", name)}
		return
	}
	e.inst, e.reg, e.registered = instance, reg, true
	for _, pb := range reg.Playbooks {
		e.playbooks = append(e.playbooks, pb.Name)
	}
	p.addExecutors(e, instance.Executors())
	p.log.Info("package started", "package", name, "version", e.rec.Version, "kind", kind)
}

// addExecutors registers a running package's executors, each named
// <package>.<kind> of one its manifest declares.
func (p *pkgHost) addExecutors(e *pkgEntry, execs []executor.Executor) {
	m := e.rec.Manifest
	for _, ex := range execs {
		info := ex.Info()
		decl, ok := manifestExecutor(m, info.Name)
		if !ok {
			p.log.Warn("a package's runtime offered an executor its manifest does not declare; it is not registered", "package", m.Name)
			continue
		}
		if err := p.reg.AddExecutor(info, nil); err != nil {
			p.log.Warn("a package's executor was refused", "package", m.Name, "executor", info.Name, "reason", err.Error())
			continue
		}
		if decl.Playbook != "" {
			_ = p.reg.SetPlaybookNamer(info.Name, fixedPlaybook(decl.Playbook))
		}
		e.executors = append(e.executors, info.Name)
		p.mu.Lock()
		p.execs[info.Name] = ex
		p.mu.Unlock()
	}
}

func manifestExecutor(m packages.Manifest, name string) (packages.Executor, bool) {
	for _, x := range m.Provides.Executors {
		if m.Name+"."+x.Kind == name {
			return x, true
		}
	}
	return packages.Executor{}, false
}

// fixedPlaybook names the playbook a package's executor starts its turns
// on, whatever the binding's config.
type fixedPlaybook string

func (f fixedPlaybook) PlaybookName(json.RawMessage) string { return string(f) }

// registerPlaceholder registers a package that does not run from the
// manifest it was installed with: its operations and toolsets (each call
// refused with package_unavailable), any config accepted, its executors
// known to the configuration but not runnable (their Work is held).
func (p *pkgHost) registerPlaceholder(e *pkgEntry) {
	m := e.rec.Manifest
	problem := *e.problem
	reg := extension.Registration{Name: m.Name, OptIn: true, CheckConfig: func(json.RawMessage) error { return nil }}
	for _, op := range m.Provides.Operations {
		reg.Operations = append(reg.Operations, extension.Operation{
			Name: op.Name, Summary: op.Summary, InputSchema: op.InputSchema, Guidance: op.Guidance, Capabilities: op.Capabilities, Sensitive: op.Sensitive,
			Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
				return nil, &extension.OperationError{Code: problemUnavailable, Message: fmt.Sprintf("package %s does not run (%s): see open-conduit packages show %s", m.Name, problem.Code, m.Name)}
			},
		})
	}
	for _, ts := range m.Provides.Toolsets {
		t := extension.Toolset{Name: ts.Name}
		for _, op := range ts.Operations {
			t.Operations = append(t.Operations, extension.ToolsetOperation{Name: op.Name, Since: op.Since})
		}
		reg.Toolsets = append(reg.Toolsets, t)
	}
	if err := p.host.Register(reg); err != nil {
		p.log.Error("cannot register a package that does not run", "package", m.Name, "reason", err.Error())
		return
	}
	e.reg, e.registered = reg, true
	for _, x := range m.Provides.Executors {
		info := executorInfo(m.Name, x)
		if err := p.reg.AddExecutor(info, nil); err == nil {
			e.executors = append(e.executors, info.Name)
		}
	}
}

// executorInfo is how a package's executor is described from its
// manifest.
func executorInfo(pkg string, x packages.Executor) executor.Info {
	info := executor.Info{Name: pkg + "." + x.Kind, Transport: executor.TransportNone}
	if x.Toolbelt {
		info.Transport = executor.TransportOS
		info.Capabilities = append(info.Capabilities, executor.CapToolbelt)
	}
	if x.Resume {
		info.Capabilities = append(info.Capabilities, executor.CapResume)
	}
	return info
}

func (p *pkgHost) stopInstance(name string, inst packages.Instance) {
	ctx, cancel := context.WithTimeout(context.Background(), packageStopGrace)
	defer cancel()
	if err := inst.Stop(ctx); err != nil {
		p.log.Warn("a package's process did not stop cleanly", "package", name, "error_type", fmt.Sprintf("%T", err))
	}
}

// deactivate stops a package's process and takes away everything it
// registered. Called with op held.
func (p *pkgHost) deactivate(name string) {
	p.mu.Lock()
	e := p.entries[name]
	delete(p.entries, name)
	for _, x := range e.executorsOrNil() {
		delete(p.execs, x)
	}
	p.mu.Unlock()
	if e == nil {
		return
	}
	if e.inst != nil {
		p.stopInstance(name, e.inst)
	}
	if e.registered {
		if err := p.host.Unregister(name); err != nil {
			p.log.Error("cannot unregister a package", "package", name, "reason", err.Error())
		}
	}
	for _, x := range e.executors {
		_ = p.reg.RemoveExecutor(x)
	}
}

func (e *pkgEntry) executorsOrNil() []string {
	if e == nil {
		return nil
	}
	return e.executors
}

// Inspect checks a package directory and says what it provides and the
// permissions it asks for, changing nothing.
func (p *pkgHost) Inspect(_ context.Context, req api.InspectPackageRequest) (api.PackageInspection, error) {
	c, digest, err := p.inspect(req.Dir)
	if err != nil {
		return api.PackageInspection{}, err
	}
	out := api.PackageInspection{Package: manifestView(c.Manifest, digest, c.Manifest.Permissions), Warnings: warningsOut(c.Warnings)}
	p.mu.RLock()
	if e, ok := p.entries[c.Manifest.Name]; ok {
		out.Replaces = e.rec.Version
	}
	p.mu.RUnlock()
	return out, nil
}

func (p *pkgHost) inspect(dir string) (*packages.Checked, string, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, "", fmt.Errorf("%w: dir must be the package directory's absolute path", extension.ErrInvalid)
	}
	c := packages.Check(dir, p.checkOptions())
	if !c.Valid() {
		return nil, "", &packages.InvalidError{Diagnostics: c.Diagnostics, Warnings: c.Warnings}
	}
	digest, err := packages.Digest(dir)
	if err != nil {
		return nil, "", &packages.InvalidError{Diagnostics: []packages.Diagnostic{{Code: packages.CodeUnsupportedFile,
			Remedy: "the package directory holds only directories and regular files (no symlinks or devices), at most 10000 files and 256 MiB, all readable"}}}
	}
	return c, digest, nil
}

// Install installs (or replaces) a package: its files must be those the
// operator was shown (FilesHash) and every permission it asks for
// accepted. It takes effect at once: the package is started and
// registered, the version it replaces stopped first.
func (p *pkgHost) Install(ctx context.Context, req api.InstallPackageRequest) (api.InstalledPackage, error) {
	p.op.Lock()
	defer p.op.Unlock()
	c, digest, err := p.inspect(req.Dir)
	if err != nil {
		return api.InstalledPackage{}, err
	}
	m := c.Manifest
	switch {
	case req.FilesHash == "":
		return api.InstalledPackage{}, fmt.Errorf("%w: files_hash is required: send the inspection's (POST /v1/packages/inspect), the files the operator was shown", extension.ErrInvalid)
	case req.FilesHash != digest:
		return api.InstalledPackage{}, fmt.Errorf("%w: package %s: its files changed since they were inspected; inspect it again and accept what it provides now", extension.ErrConflict, m.Name)
	}
	var missing []string
	for _, perm := range m.Permissions {
		if !slices.Contains(req.AcceptPermissions, perm) {
			missing = append(missing, perm)
		}
	}
	if len(missing) > 0 {
		return api.InstalledPackage{}, fmt.Errorf("%w: package %s asks for permissions not accepted: %s; accept them to install it (open-conduit packages install DIR --accept-permissions)", extension.ErrInvalid, m.Name, strings.Join(missing, ", "))
	}
	if err := p.configAllowsInstall(c); err != nil {
		return api.InstalledPackage{}, err
	}
	p.mu.RLock()
	old, replacing := p.entries[m.Name]
	p.mu.RUnlock()
	replaced := ""
	if replacing {
		replaced = old.rec.Version
		p.deactivate(m.Name)
	}
	if _, _, err := p.store.Install(req.Dir, m, digest, slices.Clone(m.Permissions)); err != nil {
		if replacing {
			p.activate(ctx, m.Name) // the old files are untouched
		}
		return api.InstalledPackage{}, err
	}
	e := p.activate(ctx, m.Name)
	if p.changed != nil {
		p.changed()
	}
	p.log.Info("package installed", "package", m.Name, "version", m.Version, "replaced", replaced)
	return api.InstalledPackage{Package: p.view(e), Replaced: replaced, Warnings: warningsOut(c.Warnings)}, nil
}

// configAllowsInstall refuses a reinstall after which the active
// configuration would no longer validate (it grants an operation or
// toolset, or names an executor or playbook, the new version drops). An
// mcp package's tools are known only once it runs, so its reinstall is
// not checked.
func (p *pkgHost) configAllowsInstall(c *packages.Checked) error {
	m := c.Manifest
	p.mu.RLock()
	old, ok := p.entries[m.Name]
	p.mu.RUnlock()
	if !ok || m.Kind == packages.KindMCP || p.active == nil {
		return nil
	}
	trial := p.reg.Without(m.Name, old.playbooks, old.executors)
	var ops []string
	for _, op := range m.Provides.Operations {
		ops = append(ops, op.Name)
	}
	var sets []extension.Toolset
	for _, ts := range m.Provides.Toolsets {
		t := extension.Toolset{Name: ts.Name}
		for _, op := range ts.Operations {
			t.Operations = append(t.Operations, extension.ToolsetOperation{Name: op.Name, Since: op.Since})
		}
		sets = append(sets, t)
	}
	if err := trial.AddExtension(m.Name, ops, sets); err != nil {
		return nil // the install itself reports it
	}
	_ = trial.SetExtensionOptIn(m.Name)
	_ = trial.SetExtensionConfig(m.Name, func(json.RawMessage) error { return nil })
	_ = trial.AddPlaybooks(c.Playbooks)
	for _, x := range m.Provides.Executors {
		_ = trial.AddExecutor(executorInfo(m.Name, x), nil)
	}
	return p.configStillValid(trial, fmt.Sprintf("reinstalling package %s", m.Name))
}

// configStillValid refuses with a conflict when the active configuration
// does not validate against reg, naming where it refers to what goes.
func (p *pkgHost) configStillValid(reg *config.Registry, what string) error {
	if p.active == nil {
		return nil
	}
	snap := p.active()
	if snap == nil {
		return nil
	}
	_, res := config.Validate(snap.Normalized, reg)
	if res.Valid() {
		return nil
	}
	var at []string
	for _, d := range res.Diagnostics {
		if len(at) == 5 {
			at = append(at, "…")
			break
		}
		at = append(at, d.Pointer)
	}
	return fmt.Errorf("%w: %s would leave the active configuration (generation %d) invalid: it refers to the package at %s; change those places (open-conduit config set, or edit and apply the config) first", extension.ErrConflict, what, snap.Generation, strings.Join(at, ", "))
}

// Remove stops and removes an installed package. It refuses while the
// active configuration refers to it (extensions.<name>, a grant of its
// operations or toolsets, a binding on its executors): that configuration
// would not validate once it is gone.
func (p *pkgHost) Remove(_ context.Context, name string) (api.RemovedPackage, error) {
	p.op.Lock()
	defer p.op.Unlock()
	p.mu.RLock()
	e, ok := p.entries[name]
	p.mu.RUnlock()
	if !ok {
		return api.RemovedPackage{}, fmt.Errorf("%w: no package %s is installed (open-conduit packages list)", extension.ErrNotFound, name)
	}
	if err := p.configStillValid(p.reg.Without(name, e.playbooks, e.executors), fmt.Sprintf("removing package %s", name)); err != nil {
		return api.RemovedPackage{}, err
	}
	p.deactivate(name)
	if err := p.store.Remove(name); err != nil && !errors.Is(err, packages.ErrNotInstalled) {
		return api.RemovedPackage{}, err
	}
	if p.changed != nil {
		p.changed()
	}
	p.log.Info("package removed", "package", name, "version", e.rec.Version)
	return api.RemovedPackage{Name: name, Version: e.rec.Version}, nil
}

// List is every installed package, in name order.
func (p *pkgHost) List(context.Context) ([]api.Package, error) {
	p.mu.RLock()
	entries := make([]*pkgEntry, 0, len(p.entries))
	for _, e := range p.entries {
		entries = append(entries, e)
	}
	p.mu.RUnlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].rec.Name < entries[j].rec.Name })
	out := make([]api.Package, 0, len(entries))
	for _, e := range entries {
		out = append(out, p.view(e))
	}
	return out, nil
}

// Get is one installed package.
func (p *pkgHost) Get(_ context.Context, name string) (api.Package, error) {
	p.mu.RLock()
	e, ok := p.entries[name]
	p.mu.RUnlock()
	if !ok {
		return api.Package{}, fmt.Errorf("%w: no package %s is installed (open-conduit packages list)", extension.ErrNotFound, name)
	}
	return p.view(e), nil
}

// view is an entry as the API shows it: what it provides (as registered
// when it runs, else as its manifest says), and its health.
func (p *pkgHost) view(e *pkgEntry) api.Package {
	out := manifestView(e.rec.Manifest, e.rec.Digest, e.rec.Accepted)
	t := e.rec.InstalledAt
	out.InstalledAt = &t
	if e.inst != nil {
		reg := e.reg
		out.Provides.Operations = out.Provides.Operations[:0]
		for _, op := range reg.Operations {
			kind := packages.OperationCall
			switch {
			case op.Emit != nil:
				kind = packages.OperationEmit
			case op.Wait != nil:
				kind = packages.OperationWait
			}
			out.Provides.Operations = append(out.Provides.Operations, api.PackageOperation{Name: op.Name, Summary: op.Summary, Kind: kind})
		}
		out.Provides.Toolsets = out.Provides.Toolsets[:0]
		for _, ts := range reg.Toolsets {
			out.Provides.Toolsets = append(out.Provides.Toolsets, api.PackageToolset{Name: ts.Name, Operations: ts.Names()})
		}
		out.Provides.OperationGate = reg.Gate != nil
		out.Provides.StartGate = reg.StartGate != nil
		h := e.inst.Health()
		out.State, out.Restarts, out.CrashLoop = h.State, h.Restarts, h.CrashLoop
		if h.CrashLoop {
			msg := fmt.Sprintf("package %s's process keeps crashing (%d restarts); the daemon keeps restarting it with a growing backoff: see the daemon's log, then reinstall a fixed package or remove it (open-conduit packages remove %s)", e.rec.Name, h.Restarts, e.rec.Name)
			if h.LastError != "" {
				msg += "; last failure: " + h.LastError
			}
			out.Problem = &api.PackageProblem{Code: problemCrashLoop, Message: msg}
		}
		return out
	}
	out.State = "unavailable"
	if e.problem != nil {
		if e.problem.Code == problemChanged {
			out.State = "changed"
		}
		pr := *e.problem
		out.Problem = &pr
	}
	return out
}

// manifestView is what a manifest says a package provides.
func manifestView(m packages.Manifest, digest string, perms []string) api.Package {
	kind := m.Kind
	if kind == "" {
		kind = packages.KindProtocol
	}
	out := api.Package{Name: m.Name, Version: m.Version, Kind: kind, Summary: m.Summary, FilesHash: digest, Permissions: slices.Clone(perms),
		Provides: api.PackageProvides{Operations: []api.PackageOperation{}, Toolsets: []api.PackageToolset{}, Executors: []api.PackageExecutor{}, Playbooks: []string{},
			OperationGate: m.Provides.OperationGate, StartGate: m.Provides.StartGate}}
	if out.Permissions == nil {
		out.Permissions = []string{}
	}
	for _, op := range m.Provides.Operations {
		k := op.Kind
		if k == "" {
			k = packages.OperationCall
		}
		out.Provides.Operations = append(out.Provides.Operations, api.PackageOperation{Name: op.Name, Summary: op.Summary, Kind: k})
	}
	for _, ts := range m.Provides.Toolsets {
		t := api.PackageToolset{Name: ts.Name, Operations: []string{}}
		for _, op := range ts.Operations {
			t.Operations = append(t.Operations, op.Name)
		}
		out.Provides.Toolsets = append(out.Provides.Toolsets, t)
	}
	for _, x := range m.Provides.Executors {
		out.Provides.Executors = append(out.Provides.Executors, api.PackageExecutor{Name: m.Name + "." + x.Kind, Summary: x.Summary, Playbook: x.Playbook})
	}
	for _, pb := range m.Provides.Playbooks {
		out.Provides.Playbooks = append(out.Provides.Playbooks, pb.Name)
	}
	return out
}

func warningsOut(ws []packages.Warning) []api.Warning {
	out := make([]api.Warning, 0, len(ws))
	for _, w := range ws {
		out = append(out, api.Warning{Pointer: w.Pointer, Code: w.Code, Message: w.Message})
	}
	return out
}
