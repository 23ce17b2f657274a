package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extension/pkg"
)

// The no-op executor through the daemon: an installed package of kind
// protocol, written on the Go SDK (extension/pkg), whose one executor
// (noopPackage.run) ends every segment at once, succeeded. The package's
// program is this benchmark's own binary run with noopServeArg, copied into
// the package's directory, so no other build is needed.

const (
	noopServeArg    = "noop-package"
	noopPackageName = "pbnoop"
	noopExecutor    = noopPackageName + ".run"
)

type noopPackage struct{}

func (noopPackage) Name() string                                          { return noopPackageName }
func (noopPackage) Version() string                                       { return "1.0.0" }
func (noopPackage) Executors() []pkg.Executor                             { return []pkg.Executor{noopRun{}} }
func (noopRun) Kind() string                                              { return "run" }
func (noopRun) Stop(context.Context, pkg.RunRequest, time.Duration) error { return nil }

type noopRun struct{}

func (noopRun) Run(context.Context, pkg.RunRequest) (pkg.Result, error) {
	return pkg.Result{Outcome: pkg.Succeeded}, nil
}

func (noopRun) Recover(context.Context, pkg.RunRequest) (pkg.Result, error) {
	return pkg.Result{Outcome: pkg.Succeeded}, nil
}

func (noopRun) Resume(context.Context, pkg.RunRequest) (pkg.Result, error) {
	return pkg.Result{}, errors.New("the no-op executor cannot resume")
}

// noopServe is the package's process: the protocol on stdin and stdout.
func noopServe() error {
	return pkg.Serve(context.Background(), os.Stdin, os.Stdout, noopPackage{})
}

// noopManifest is the package's open-conduit-package.json.
func noopManifest() []byte {
	m := map[string]any{
		"name":    noopPackageName,
		"version": "1.0.0",
		"summary": "The peer benchmark's no-op executor",
		"run":     map[string]any{"command": []string{"./peerbench", noopServeArg}},
		"provides": map[string]any{
			"executors": []map[string]any{{"kind": "run", "summary": "Ends every segment at once, succeeded", "dir": false}},
		},
		"permissions": []string{"executor.run"},
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// installNoop lays out the package under the daemon's root (this binary
// and the manifest), installs it with its permission accepted, and applies
// the configuration with the scope whose binding runs it.
func (d *daemon) installNoop(ctx context.Context, running int) error {
	if err := d.layoutAndInstallNoop(ctx); err != nil {
		return err
	}
	cur, err := d.c.Config(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := d.c.ApplyConfig(ctx, daemonConfigWith(d.ctl, running, true), cur.Generation, "", nil); err != nil {
		return fmt.Errorf("applying the configuration with the no-op binding: %w", err)
	}
	return nil
}

// layoutAndInstallNoop lays out the package under the daemon's root and
// installs it with its permission accepted.
func (d *daemon) layoutAndInstallNoop(ctx context.Context) error {
	dir := filepath.Join(d.root, "noop-pkg")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := copyFile(self, filepath.Join(dir, "peerbench"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "open-conduit-package.json"), noopManifest(), 0o600); err != nil {
		return err
	}
	ins, err := d.c.InspectPackage(ctx, dir)
	if err != nil {
		return fmt.Errorf("inspecting the no-op package: %w", err)
	}
	if _, err := d.c.InstallPackage(ctx, client.InstallPackageRequest{Dir: dir, FilesHash: ins.Package.FilesHash, AcceptPermissions: ins.Package.Permissions}, nil); err != nil {
		return fmt.Errorf("installing the no-op package: %w", err)
	}
	return nil
}

func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
