// Package introspection is the first-party introspection extension: the
// read-only toolbelt operations (introspection.*) with which an execution
// reads its own history, within its scope's read ceiling: its Work and the
// Work it created (transitively), their Events and causal chains, their
// executions and waits.
//
// It reads only through Port, which the daemon adapts to storage and to
// the configuration, so that it never knows the store. It must never
// write anything, never read outside the caller's own Work tree (a Work
// outside it is refused with not_in_tree, never told apart from one that
// does not exist), and never answer a read the scope's read ceiling does
// not allow. It imports only the public packages api, extension and
// extension/inproc, on which it is written. It is opt-in: only a
// configuration entry enables it, and whether one does is the host's to
// check, never its own.
package introspection
