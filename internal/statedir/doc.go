// Package statedir is the daemon's state directory on disk: creating it
// owner-only and refusing an unsafe one, its exclusive lock (whoever holds
// it owns the directory's sockets and the owner's token file), opening the
// management socket under that lock, and reading and writing token files
// (<state>/private/operator.token), and the node id the directory keeps
// (<state>/node-id).
//
// It knows nothing of HTTP, storage or credentials' meaning. It must never
// loosen a mode (every directory it makes is 0700, every file and socket
// 0600), remove anything at a socket's path that is not the effective
// user's socket, or put a token's text into an error or a log.
package statedir
