package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/storage"
)

const testManifest = `{"name": "deploy", "version": "1.0.0", "run": {"command": ["./server"]},
  "provides": {
    "operations": [{"name": "deploy.run", "summary": "Deploy one service"}],
    "executors": [{"kind": "runner", "summary": "Runs a deploy"}]
  },
  "permissions": ["executor.run"]}`

// writeTestPackage writes a package directory.
func writeTestPackage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, packages.ManifestFile), []byte(testManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// stubRuntime is a tests-only Runtime: it starts no process; its
// registration is the manifest's call operations with a Go handler, and
// its executors succeed at once.
type stubRuntime struct{ stopped chan string }

func (s stubRuntime) Start(_ context.Context, pkg packages.Installed) (packages.Instance, error) {
	if err := pkg.Verify(); err != nil {
		return nil, err
	}
	m := pkg.Manifest
	reg := extension.Registration{Name: m.Name}
	for _, op := range m.Provides.Operations {
		reg.Operations = append(reg.Operations, extension.Operation{Name: op.Name, Summary: op.Summary,
			Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"ok":true}`), nil
			}})
	}
	var execs []executor.Executor
	for _, x := range m.Provides.Executors {
		execs = append(execs, stubExecutor{name: m.Name + "." + x.Kind})
	}
	return &stubInstance{reg: reg, execs: execs, stopped: s.stopped}, nil
}

type stubInstance struct {
	reg     extension.Registration
	execs   []executor.Executor
	stopped chan string
}

func (i *stubInstance) Registration() extension.Registration { return i.reg }
func (i *stubInstance) Executors() []executor.Executor       { return i.execs }
func (i *stubInstance) Health() packages.Health              { return packages.Health{State: "running"} }
func (i *stubInstance) Stop(context.Context) error {
	if i.stopped != nil {
		i.stopped <- i.reg.Name
	}
	return nil
}

type stubExecutor struct{ name string }

func (s stubExecutor) Info() executor.Info {
	return executor.Info{Name: s.name, Transport: executor.TransportNone}
}
func (s stubExecutor) Run(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{Outcome: executor.Succeeded}, nil
}
func (s stubExecutor) Recover(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, executor.ErrGone
}
func (s stubExecutor) Resume(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, errors.New("no resume")
}
func (s stubExecutor) Stop(context.Context, executor.RunRequest, time.Duration) error { return nil }

func install(t *testing.T, r *running, dir string) api.InstalledPackage {
	t.Helper()
	ctx := context.Background()
	ins, err := r.d.pkgs.Inspect(ctx, api.InspectPackageRequest{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.d.pkgs.Install(ctx, api.InstallPackageRequest{Dir: dir, FilesHash: ins.Package.FilesHash, AcceptPermissions: ins.Package.Permissions})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bindingOnRunner grants deploy.run to a binding on deploy.runner.
const bindingOnRunner = `{"version": 1, "extensions": {"deploy": {"enabled": true}}, "scopes": {"t": {
  "authorization": {"operations": ["deploy.run"]},
  "bindings": {"b": {"executor": "deploy.runner", "operations": ["deploy.run"]}}}}}`

// A package installed while the daemon runs registers its operations on
// the toolbelt and its executor with the registry and the scheduler, at
// once; removing it (once the configuration no longer names it) takes
// both away and stops its instance.
func TestPackageRegistersLiveAndUnregistersOnRemove(t *testing.T) {
	stopped := make(chan string, 4)
	r := start(t, shortDir(t), func(o *Options) {
		o.PackageRuntimes = map[string]packages.Runtime{packages.KindProtocol: stubRuntime{stopped: stopped}}
	})
	got := install(t, r, writeTestPackage(t))
	if got.Package.State != "running" || got.Package.Problem != nil {
		t.Fatalf("installed %+v", got.Package)
	}
	if !r.d.tb.Declared("deploy.run") {
		t.Fatal("the toolbelt does not declare deploy.run")
	}
	if _, ok := r.d.opts.Registry.Executor("deploy.runner"); !ok || r.d.pkgs.executor("deploy.runner") == nil {
		t.Fatal("the executor is not registered")
	}
	// A binding on its executor runs a Work, live.
	gen := r.d.cfg.Active().Generation
	r.apply([]byte(bindingOnRunner), gen)
	w := r.create("t", "b")
	if done := r.terminal(w.ID); done.State != storage.WorkSucceeded {
		t.Fatalf("the Work on the package's executor ended %s", done.State)
	}
	if _, err := r.d.pkgs.Remove(context.Background(), "deploy"); !errors.Is(err, extension.ErrConflict) || !strings.Contains(err.Error(), "/scopes/t/bindings/b") {
		t.Fatalf("remove while a binding names its executor: %v", err)
	}
	r.apply([]byte(`{"version": 1, "scopes": {"t": {"bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}}}}}}`), gen+1)
	if _, err := r.d.pkgs.Remove(context.Background(), "nobody"); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("removing an unknown package: %v", err)
	}
	if _, err := r.d.pkgs.Remove(context.Background(), "deploy"); err != nil {
		t.Fatal(err)
	}
	if name := <-stopped; name != "deploy" {
		t.Fatalf("stopped %s", name)
	}
	if r.d.tb.Declared("deploy.run") || r.d.pkgs.executor("deploy.runner") != nil {
		t.Fatal("still registered after remove")
	}
	if _, ok := r.d.opts.Registry.Executor("deploy.runner"); ok {
		t.Fatal("the registry still has the executor")
	}
}

// With the release's runtimes, an installed package whose process exits
// at once (no handshake) is registered from its manifest without running:
// a configuration naming it validates, so the daemon starts with it, and
// its entry says it could not be started.
func TestPackageThatDoesNotStartStillLetsTheDaemonStart(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	src := writeTestPackage(t)
	c := packages.Check(src, packages.CheckOptions{})
	digest, err := packages.Digest(src)
	if err != nil || !c.Valid() {
		t.Fatal(err, c.Diagnostics)
	}
	if _, _, err := packages.NewStore(state, time.Now).Install(src, c.Manifest, digest, c.Manifest.Permissions); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "config.json"), []byte(bindingOnRunner), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	p, err := r.d.pkgs.Get(context.Background(), "deploy")
	if err != nil {
		t.Fatal(err)
	}
	if p.State != "unavailable" || p.Problem == nil || p.Problem.Code != "package_unavailable" || !strings.Contains(p.Problem.Message, "ended before the handshake") {
		t.Fatalf("package %+v", p)
	}
	if r.d.pkgs.executor("deploy.runner") != nil {
		t.Fatal("a package that does not run has a runnable executor")
	}
	// The configuration that names it is the active one; removing the
	// package is refused while it does.
	if _, err := r.d.pkgs.Remove(context.Background(), "deploy"); !errors.Is(err, extension.ErrConflict) || !strings.Contains(err.Error(), "/extensions/deploy") {
		t.Fatalf("remove: %v", err)
	}
}
