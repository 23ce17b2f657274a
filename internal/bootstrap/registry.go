package bootstrap

import (
	"encoding/json"
	"errors"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/claudecode"
	"github.com/open-conduit/open-conduit/internal/executor/codex"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
)

// ShellExecutorInfo describes the shell executor as this release registers
// it: transport os, capability toolbelt, no resume.
var ShellExecutorInfo = executor.Info{
	Name:         shell.Name,
	Transport:    executor.TransportOS,
	Capabilities: []executor.Capability{executor.CapToolbelt},
}

// ReleaseRegistry returns what this release registers: the builtin
// operations and the shell executor, whose binding configs are checked by
// shell.ValidateConfig. Work that adds executors to the release extends it
// here; extensions are added by the host that registers them
// (toolbelt.Host).
//
// The claude-code and codex executors are registered with their config
// checks and the playbook their config names; the daemon runs them
// (claudecode.New, codex.New).
func ReleaseRegistry() *config.Registry {
	r := config.NewRegistry()
	if err := r.AddExecutor(ShellExecutorInfo, checkExecutorConfig(shell.ValidateConfig)); err != nil {
		panic(err)
	}
	agents := []struct {
		info  executor.Info
		check func(json.RawMessage) error
		namer extension.PlaybookNamer
	}{
		{claudecode.Info, claudecode.ValidateConfig, claudecode.Namer},
		{codex.Info, codex.ValidateConfig, codex.Namer},
	}
	for _, a := range agents {
		if err := r.AddExecutor(a.info, checkExecutorConfig(a.check)); err != nil {
			panic(err)
		}
		if err := r.SetPlaybookNamer(a.info.Name, a.namer); err != nil {
			panic(err)
		}
	}
	return r
}

// checkExecutorConfig runs an executor's own strict config parse and hands
// its problems (an *executor.ConfigError) on with their places.
func checkExecutorConfig(check func(json.RawMessage) error) config.ConfigCheck {
	return func(raw json.RawMessage) error {
		err := check(raw)
		var ce *executor.ConfigError
		if !errors.As(err, &ce) {
			return err
		}
		out := &config.ExecutorConfigError{}
		for _, p := range ce.Problems {
			out.Problems = append(out.Problems, config.Diagnostic{Pointer: p.Pointer, Code: config.Code(p.Code), Remedy: p.Remedy})
		}
		return out
	}
}
