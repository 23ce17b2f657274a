// Package configsvc is the configuration's lifecycle in the daemon: it
// restores the committed generation at start (adopting the config file when
// the committed one no longer validates), validates, applies (an atomic
// save of <state>/config.json keeping config.json.last-good, then the
// generation, its redacted snapshot and the scope records published in one
// storage transaction) and hands out the snapshots that attempts are
// pinned to. It answers the kernel's ports onto the configuration: the
// routes (kernel.RouteProvider) and the scopes (kernel.Scopes).
//
// Its refusals are its own (*Refusal with ErrStaleGeneration,
// ErrScopeInUse, ErrHashMismatch, ErrInvalidConfig); it knows nothing of
// HTTP. It must never put a configured value or a secret reference's text
// into coordination storage, an error or a log line, and a disk edit alone
// must never change what runs.
package configsvc
