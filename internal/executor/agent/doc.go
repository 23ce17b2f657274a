// Package agent holds what the coding-agent executors (claudecode, codex)
// share and that touches no process: the strict parse of an agent
// binding's executor config, and the bounded line reader their stream
// parsers are built on.
//
// It must never start a process, read the environment or the file system,
// or hold a secret: a config names the binding's secrets by their
// environment variable names, never their values, and nothing here ever
// sees the model API key or the execution token. Its problems never quote
// a configured value.
package agent
