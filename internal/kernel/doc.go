// Package kernel is the coordination kernel's decision layer: it accepts
// Events (validation, idempotency by delivery identity, causation and causal
// bounds), routes them (the scope's routes in order, the correlation key's
// owner, waits), changes Work (creation with its core.work.created, inputs,
// keys, cancel, retry, holds and release, rebind, attach,
// core.work.finished) and fences executions (the
// lease guard and per-epoch declarations the toolbelt relies on). Control is
// the operator's entry point to all of it.
//
// Every change happens inside a storage transaction the caller opened, so
// that what belongs together commits together: a Work and its
// core.work.created, a cancel and the fencing of the live attempt, a
// declaration and the lease check that allowed it.
//
// It must never trust what an execution says about identity (source, Work,
// execution and causation are assigned by the host), never run an executor
// or wait for one (that is the scheduler's job), never read the system clock
// or random source (both are injected), and never import the configuration
// package: the daemon adapts the configuration into the small types defined
// here (Route, CausalLimits).
package kernel
