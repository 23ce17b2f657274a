// Package sandbox runs an execution's command inside a bubblewrap (bwrap)
// sandbox: a read-only view of the system, a private /tmp, the workspace
// writable, the execution's own run directory (its toolbelt socket, its
// token/ directory, its egress socket) and the os binary read-only at fixed
// paths, new PID, IPC, UTS and network namespaces and no capabilities. It
// holds the `sandbox` member of the executors' configs (Parse), the check
// that bwrap is installed and can create its namespaces (Runtime), the
// bwrap command line for one launch (Wrap), and the body of the hidden
// `open-conduit sandbox-init` that runs first inside the sandbox (Init): a
// bridge from 127.0.0.1:3128 of the sandbox's own network namespace to the
// mounted egress socket, and the command as its child.
//
// The supervisor (package proc) stays outside the sandbox: the argv it
// starts is bwrap's, so adoption, stop and status work as for any command.
//
// It must never mount the state directory, the management socket, the
// operator token or another execution's directory into a sandbox, never
// put a secret on bwrap's command line (the environment carries it), never
// run a command unsandboxed when a sandbox was asked for (a missing or
// broken bwrap is an *executor.UnavailableError), and never decide anything
// about Work.
package sandbox
