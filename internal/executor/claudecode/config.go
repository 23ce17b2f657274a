package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

// Name is the executor's name in a binding.
const Name = "claude-code"

// Spec is what this executor adds to the shared agent config: the claude
// program, and the model API key as the binding secret ANTHROPIC_API_KEY
// unless the config names another.
var Spec = agent.Spec{
	Executor: Name,
	Binary:   "claude",
	Secrets:  map[string]string{"api_key": "ANTHROPIC_API_KEY"},
}

// Info describes the executor: transport os (the agent calls the toolbelt
// through os mcp), capabilities toolbelt and resume.
var Info = executor.Info{
	Name:         Name,
	Transport:    executor.TransportOS,
	Capabilities: []executor.Capability{executor.CapToolbelt, executor.CapResume},
}

// ParseConfig parses a binding's executor config strictly (see
// agent.ParseConfig); its problems are an *agent.ConfigError.
func ParseConfig(raw json.RawMessage) (agent.Config, error) {
	return agent.ParseConfig(Spec, raw)
}

// ValidateConfig checks a binding's executor config and reports every
// problem at once as an *agent.ConfigError.
func ValidateConfig(raw json.RawMessage) error {
	_, err := ParseConfig(raw)
	return err
}

// ErrNotImplemented is what Run and Resume answer in this release.
var ErrNotImplemented = errors.New("executor claude-code: running the agent is not yet implemented in this release")

// Executor is the claude-code executor. In this release it checks configs
// and names playbooks; it runs nothing.
type Executor struct{}

var (
	_ executor.Executor       = Executor{}
	_ extension.PlaybookNamer = Executor{}
)

// Info describes the executor.
func (Executor) Info() executor.Info { return Info }

// PlaybookName names the playbook a (checked) binding config starts the
// agent's turns on; "" for none or a config that does not parse.
func (Executor) PlaybookName(config json.RawMessage) string {
	cfg, err := ParseConfig(config)
	if err != nil {
		return ""
	}
	return cfg.Playbook
}

// Run refuses: this release does not run the agent.
func (Executor) Run(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, ErrNotImplemented
}

// Recover finds nothing: no segment of this executor was ever started.
func (Executor) Recover(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, executor.ErrGone
}

// Resume refuses: this release does not run the agent.
func (Executor) Resume(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, ErrNotImplemented
}

// Stop has nothing to stop.
func (Executor) Stop(context.Context, executor.RunRequest, time.Duration) error { return nil }
