// Package toolbelt is the host's authority over what a running execution
// may do: it issues execution tokens (only their digests are stored), runs
// every call on an execution's socket through the check chain (token,
// narrowing, allowlist, the scope's current ceiling, the lease guard in the
// call's transaction, gates), serves the builtins, replays requests, and
// hosts the extensions: Host registers each one once (operations, gate,
// operator actions and configuration's view of its operations and
// toolsets), and Actions runs the operator actions.
//
// It must never store, log or answer a token's plaintext or a sensitive
// operation's result, never trust what an execution says about identity,
// never read the configuration itself (the daemon adapts it into the
// functions of Options) and never read the system clock or random source
// (both are injected).
package toolbelt
