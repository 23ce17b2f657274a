// Package proc is the supervised-process machinery the executors share: a
// command started from a launch description under a small supervisor
// (`open-conduit supervise <dir>`, Supervise) in a session and process
// group of its own, so that it survives the daemon and a later daemon can
// adopt it; attaching to a running supervisor by its record; stopping its
// group politely, then by force after a grace, recording why; and reading
// how the command ended.
//
// Everything a later daemon needs is in the supervised directory:
//
//	<dir>/supervisor.json  the supervisor's pid, start time and boot id
//	<dir>/launch.json      the command line and environment, 0600; the
//	                       supervisor deletes it as soon as it has read it
//	<dir>/status.json      how the command ended, written by temp + rename
//	<dir>/stop             why the executor stopped the group (its reason)
//	<dir>/output.log       stdout and stderr interleaved, bounded; stderr
//	                       only when the launch names a stream file
//	<dir>/<stream>         stdout alone, bounded, when the launch names it
//	<dir>/supervisor.log   the supervisor's own diagnostics
//
// A running supervisor is adopted only when its pid, start time and boot id
// all match the record, so a reused pid is never signalled. The launch,
// record and status files are written whole but not synced: a crash of the
// machine ends the supervisor anyway (docs/executor-shell.md says what a
// crash keeps); the stop file is synced.
//
// It must never put a secret on a command line (argv is world-readable in
// /proc), never keep the launch file after the supervisor has read it,
// never keep a pipe between the daemon and the supervisor (the supervisor
// outlives the daemon), never signal a process outside the group it
// recorded, and never decide anything about Work: it reports what the
// process did.
package proc
