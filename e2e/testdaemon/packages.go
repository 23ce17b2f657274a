package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// With E2E_PACKAGE_ECHO set, protocol packages run on echoRuntime, a
// test-only Runtime that starts no process: each call operation of the
// manifest answers with its package, operation, the calling Work and its
// input, in Go. It proves the host's side of installed packages
// (discovery, verification, registration, removal) before the protocol
// runtime exists. With E2E_PACKAGE_EVENTS naming a file, every start and
// stop is appended to it as "start NAME" or "stop NAME"; with
// E2E_PACKAGE_CRASHLOOP naming a package, that package's health reports a
// crash loop.
const (
	PackageEchoEnv      = "E2E_PACKAGE_ECHO"
	PackageEventsEnv    = "E2E_PACKAGE_EVENTS"
	PackageCrashLoopEnv = "E2E_PACKAGE_CRASHLOOP"
)

type echoRuntime struct {
	events    string
	crashLoop string
	mu        sync.Mutex
}

func (r *echoRuntime) note(what, name string) {
	if r.events == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %s\n", what, name)
	f.Close()
}

func (r *echoRuntime) Start(_ context.Context, pkg packages.Installed) (packages.Instance, error) {
	if pkg.Verify != nil {
		if err := pkg.Verify(); err != nil {
			return nil, err
		}
	}
	m := pkg.Manifest
	reg := extension.Registration{Name: m.Name, OptIn: true}
	for _, op := range m.Provides.Operations {
		if op.Kind != "" && op.Kind != packages.OperationCall {
			continue
		}
		name := op.Name
		reg.Operations = append(reg.Operations, extension.Operation{
			Name: name, Summary: op.Summary, InputSchema: op.InputSchema, Guidance: op.Guidance,
			Handler: func(_ context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
				return json.Marshal(map[string]any{"package": m.Name, "version": m.Version, "operation": name, "work": auth.Work, "input": input})
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
	r.note("start", m.Name)
	return &echoInstance{rt: r, reg: reg, crashLoop: m.Name == r.crashLoop}, nil
}

type echoInstance struct {
	rt        *echoRuntime
	reg       extension.Registration
	crashLoop bool
	once      sync.Once
}

func (i *echoInstance) Registration() extension.Registration { return i.reg }
func (i *echoInstance) Executors() []executor.Executor       { return nil }

func (i *echoInstance) Health() packages.Health {
	if i.crashLoop {
		return packages.Health{State: "restarting", Restarts: 7, CrashLoop: true, LastError: "the process exited with status 3"}
	}
	return packages.Health{State: "running"}
}

func (i *echoInstance) Stop(context.Context) error {
	i.once.Do(func() { i.rt.note("stop", i.reg.Name) })
	return nil
}
