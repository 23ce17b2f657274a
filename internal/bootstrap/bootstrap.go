// Package bootstrap holds what a fresh Open Conduit install starts from:
// the default configuration a daemon activates when its state directory has
// no configuration file and no committed generation (and what an init setup
// writes into an empty file). It also composes the release's registry
// (ReleaseRegistry): the executors this release ships, against which a
// configuration is validated, so that internal/config never imports an
// executor, and lists the extensions the release bundles (Extensions), the
// one list the daemon registers and the operations reference is generated
// from.
//
// It must never hold anything specific to one machine or person (a path, a
// user name, a secret or a secret reference), and the default configuration
// must never run a command taken from event data: its one binding runs a
// fixed command line whose only inputs are the host's own environment
// variables.
package bootstrap

import "slices"

// DefaultScope is the id of the default configuration's one scope.
const DefaultScope = "setup"

// DefaultBinding is the id of its shell binding.
const DefaultBinding = "shell"

// defaultConfig is a setup scope with one shell binding. The command says
// which Work it ran and reads its own context through the toolbelt with
// the os CLI, which the daemon puts first on the process's PATH. Every
// builtin operation is granted, so the Work can report its outcome, emit,
// wait and create child Work. A manual Event of a setup.* type from an
// operator starts Work on the binding; `open-conduit work create --scope
// setup` creates Work directly.
var defaultConfig = []byte(`{
  "version": 1,
  "scopes": {
    "setup": {
      "authorization": {
        "operations": ["emit", "create_work", "wait", "declare_outcome", "read_context"],
        "reads": ["work", "events", "executions", "artifacts", "waits"]
      },
      "bindings": {
        "shell": {
          "executor": "shell",
          "config": {
            "command": ["sh", "-c", "echo \"Open Conduit ran Work $OPEN_CONDUIT_WORK_ID in scope $OPEN_CONDUIT_SCOPE_ID\"; os call read_context"]
          },
          "operations": ["emit", "create_work", "wait", "declare_outcome", "read_context"]
        }
      },
      "routes": [
        {"id": "manual", "match": {"type": "setup.*", "source": "core.manual"}, "binding": "shell", "effect": "start"}
      ]
    }
  }
}
`)

// DefaultConfig returns the default configuration (version 1 JSON). The
// caller owns the returned slice.
func DefaultConfig() []byte { return slices.Clone(defaultConfig) }
