package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// ErrNotImplemented is what an agent executor's Run and Resume answer in
// this release.
var ErrNotImplemented = errors.New("running the agent is not yet implemented in this release")

// Executor is an agent executor as this release has it: it describes
// itself, checks configs and names playbooks, and runs nothing. The
// claude-code and codex executors are this type over their own Spec.
type Executor struct {
	Spec Spec
	// Desc describes the executor to the registry and the scheduler.
	Desc executor.Info
}

var (
	_ executor.Executor       = Executor{}
	_ extension.PlaybookNamer = Executor{}
)

// Info describes the executor.
func (e Executor) Info() executor.Info { return e.Desc }

// PlaybookName names the playbook a (checked) binding config starts the
// agent's turns on; "" for none or a config that does not parse.
func (e Executor) PlaybookName(config json.RawMessage) string {
	cfg, err := ParseConfig(e.Spec, config)
	if err != nil {
		return ""
	}
	return cfg.Playbook
}

// Run refuses: this release does not run the agent.
func (e Executor) Run(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, e.notImplemented()
}

// Recover finds nothing: no segment of this executor was ever started.
func (Executor) Recover(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, executor.ErrGone
}

// Resume refuses: this release does not run the agent.
func (e Executor) Resume(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, e.notImplemented()
}

// Stop has nothing to stop.
func (Executor) Stop(context.Context, executor.RunRequest, time.Duration) error { return nil }

func (e Executor) notImplemented() error {
	return &namedError{name: e.Spec.Executor, err: ErrNotImplemented}
}

// namedError prefixes err with the executor's name, keeping it matchable
// with errors.Is.
type namedError struct {
	name string
	err  error
}

func (n *namedError) Error() string { return "executor " + n.name + ": " + n.err.Error() }
func (n *namedError) Unwrap() error { return n.err }
