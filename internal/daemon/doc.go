// Package daemon composes Open Conduit's long-running daemon: it takes the
// state directory and its lock, opens coordination storage, restores the
// active configuration, builds the runtime, the toolbelt, the shell
// executor and the scheduler on top of it, serves the management API on
// <state>/management.sock and each execution's toolbelt on its own socket,
// and runs the loops (scheduler ticks, lease heartbeats, sweeps) until it is
// told to stop.
//
// The state directory it owns:
//
//	<state>/                   0700, refused when another user can reach it
//	<state>/daemon.lock        the exclusive flock; holds the daemon's pid
//	<state>/management.sock    0600, the management API
//	<state>/private/operator.token  0600, the owner's operator token
//	<state>/coordination.db    SQLite (with -wal and -shm beside it)
//	<state>/config.json        the configuration file, when there is one
//	<state>/artifacts/         the bytes of artifacts (logs), by artifact id (PostgreSQL: in the database)
//	<state>/executions/<id>/   each execution's executor directory
//	<state>/runs/<key>/        each live execution's toolbelt socket and token
//	<state>/bin/os             a copy of the daemon's own binary (0755), so
//	                           that `os` is on every execution's PATH and
//	                           outlasts a `go run` build directory
//
// It must never log, return or store a token, a secret or a secret
// reference; never stop an execution's process on shutdown (the next daemon
// adopts it); never remove the run directory of an execution that is still
// running or parked; and never run an executor or a secret resolution
// inside a storage transaction.
package daemon
