// Package shell is the shell executor: it runs a binding's command as a real
// process, detached from the daemon so that a restarted daemon can adopt it,
// and reports how it ended.
//
// The executor never runs the command itself. Run starts a small supervisor
// (`open-conduit supervise <execution dir>`, the Supervise function of this
// package) in a session and process group of its own; the supervisor starts
// the command as its child in that same group, copies its output into a
// bounded log, reaps everything in the group, and writes the command's real
// exit status to a status file before it exits. Everything a later daemon
// needs is in the execution directory:
//
//	<dir>/supervisor.json  the supervisor's pid, start time and boot id
//	<dir>/launch.json      the command line and environment, 0600; the
//	                       supervisor deletes it as soon as it has read it
//	<dir>/status.json      how the command ended, written by temp + rename
//	<dir>/stop             why the executor stopped the group (cancel, deadline)
//	<dir>/output.log       stdout and stderr interleaved, bounded
//	<dir>/supervisor.log   the supervisor's own diagnostics
//	<dir>/work/            the command's default working directory
//
// Run waits for its own supervisor with Wait; Recover and Stop wait for an
// adopted one through a pidfd, and adopt it only when its pid, start time and
// boot id all match the record, so a reused pid is never signalled.
//
// It must never put the execution's token in an environment or a file (the
// process gets the host's token file instead), never pass a secret on a
// command line (argv is world-readable in /proc), never hand the command the
// daemon's environment wholesale, never keep a pipe between the daemon and
// the supervisor (the supervisor outlives the daemon), and never decide what
// happens to Work: it reports what the process did.
package shell
