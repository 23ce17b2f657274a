package codex

import (
	"encoding/json"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
)

// Name is the executor's name in a binding.
const Name = "codex"

// Spec is what this executor adds to the shared agent config: the codex
// program, and the model API key as the binding secret OPENAI_API_KEY
// unless the config names another.
var Spec = agent.Spec{
	Executor: Name,
	Binary:   "codex",
	Secrets:  map[string]string{"api_key": "OPENAI_API_KEY"},
	// Codex's own tools are turned on by name (see Driver.Prepare).
	CheckTool: checkTool,
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

// Namer names the playbook a binding's config starts the agent on, for
// validation; it runs nothing.
var Namer = agent.Namer{Spec: Spec}

// New returns the executor, which runs the agent under a supervisor (see
// the package doc).
func New(opts agentrun.Options) (*agentrun.Executor, error) {
	return agentrun.New(Spec, Info, Driver{}, opts)
}
