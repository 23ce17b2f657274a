// Package management is the daemon's local management API: the owner-only
// state directory and its lock, the management socket, the HTTP server with
// its one route table, operator authentication and roles, request
// discipline (strict JSON, Idempotency-Key, cursors, ETags) and the one
// function that turns errors into the API's envelope.
//
// Its backends are narrow interfaces (Credentials, ExecutionTokens,
// IdempotencyStore, Health) that coordination storage implements; handlers
// never hold SQL.
//
// It must never put a token's plaintext, a token digest, a secret or a
// backend's error text into a response, a log line or an error message, and
// it must never serve an execution token on the management socket.
package management
