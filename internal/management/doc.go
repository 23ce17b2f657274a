// Package management is the daemon's operator API on the management
// socket: the one route table with each route's role, credential class and
// idempotency, operator authentication and roles, operator credentials
// (issue, rotate, revoke, the owner's bootstrap and recovery),
// Idempotency-Key replay, list cursors, and the resource, configuration
// and action routes. NewServers composes it, with the toolbelt socket's
// handler (package toolbeltapi), from the daemon's parts; the daemon and
// the test stack both build their servers with it.
//
// Its backends are narrow interfaces (Credentials, ExecutionTokens,
// IdempotencyStore, Health, Controls, ActionControls) that coordination
// storage, the kernel and the toolbelt implement; handlers never hold SQL.
// Request discipline and the mapping of errors to the envelope are package
// httpapi's.
//
// It must never put a token's plaintext, a token digest, a secret or a
// backend's error text into a response, a log line or an error message, and
// it must never serve an execution token on the management socket.
package management
