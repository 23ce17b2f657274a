package bootstrap

import (
	"encoding/json"
	"errors"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/executor"
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
func ReleaseRegistry() *config.Registry {
	r := config.NewRegistry()
	if err := r.AddExecutor(ShellExecutorInfo, checkShellConfig); err != nil {
		panic(err)
	}
	return r
}

// checkShellConfig runs the shell executor's own strict config parse and
// hands its problems on with their places.
func checkShellConfig(raw json.RawMessage) error {
	err := shell.ValidateConfig(raw)
	var ce *shell.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	out := &config.ExecutorConfigError{}
	for _, p := range ce.Problems {
		out.Problems = append(out.Problems, config.Diagnostic{Pointer: p.Pointer, Code: config.Code(p.Code), Remedy: p.Remedy})
	}
	return out
}
