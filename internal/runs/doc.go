// Package runs keeps the host-owned run directories of executions that use
// the toolbelt, and serves each execution's own toolbelt socket (the spec's
// "Execution endpoints"). For an execution it lays out
//
//	<state>/runs/<key>/            0700, key = Key(executionID)
//	<state>/runs/<key>/execution   the execution ID, so a later daemon can tell whose it is
//	<state>/runs/<key>/token/      0700
//	<state>/runs/<key>/token/token 0600, the current token, replaced by rename
//	<state>/runs/<key>/toolbelt.sock  0600, or, when that path would pass 100
//	                               bytes, <tmp>/open-conduit-<uid>/<key>/toolbelt.sock
//	<state>/runs/<key>/egress.sock 0600, the egress proxy's socket, beside toolbelt.sock
//
// and serves an http.Handler on each socket until the host closes it. A
// handler learns which execution's socket a request came in on through
// ExecutionFromContext.
//
// It must never interpret a token (it only writes the plaintext it is handed
// into token/token and never logs, returns or echoes it), never decide which
// executions are live (Sweep asks its caller), and never follow a symlink or
// accept a directory another user owns or can reach.
package runs
