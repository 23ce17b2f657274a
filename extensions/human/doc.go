// Package human is the first-party human extension: approvals. Its gate
// parks a call to any operation its configuration lists until an operator
// approves it, binding the approval to the Work, the operation and the
// hash of the call's canonical input (RFC 8785, SHA-256); its start gate
// holds a listed binding's Work before its first attempt the same way.
// Operators list and decide approvals with its actions (human.list,
// human.approve, human.deny; `open-conduit approvals`).
//
// It keeps its approvals through Port, which the daemon adapts to
// coordination storage, so that it never knows the store. It must never
// let a call through that no operator approved, never let one approval
// through twice, never decide an approval itself (only its timeout
// expires it), and never quote a configured value in a refusal. It
// imports only the public package extension (and extension/inproc).
package human
