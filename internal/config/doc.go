// Package config reads, checks and interprets Open Conduit's configuration
// file (version 1, JSON): the scopes that say what may happen where, their
// bindings and routes, the limits, and the names of the secrets bindings may
// select. It also resolves secret references (keyring:, file:, env:, cmd:)
// for the moment an attempt starts.
//
// The work is split in three steps. Parsing is strict and reports every
// independent problem of the document itself (syntax, duplicate keys,
// unknown fields, nulls, wrong types, size). Validation checks the meaning
// against a Registry the caller supplies (executors, operations, toolsets,
// extensions), resolves operation lists and ceilings, and returns every
// diagnostic together in a deterministic order. A valid config becomes a
// Snapshot: a canonical hash, the redacted normalized document and the
// effective, resolved authority of each scope, which the host checks.
//
// It must never let a typo grant authority: an unknown name is refused, an
// explicit operation outside its ceiling is refused, and a toolset is only
// ever narrowed. It must never put a configured value, a secret reference's
// text, a secret, or a file's content into a diagnostic, a warning, an error
// or the normalized document, and it never caches a resolved secret. It
// never imports an executor: the caller composes the Registry (the
// release's is internal/bootstrap's ReleaseRegistry).
package config
