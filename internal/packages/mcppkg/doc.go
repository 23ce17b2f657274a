// Package mcppkg is the runtime of MCP packages (packages.KindMCP): it runs
// an existing MCP server over stdio as a child of the daemon, in a process
// group of its own that dies with the daemon, lists its tools once, and
// registers each as an operation <name>.<tool> with the toolsets
// <name>.read (the tools the server annotates read-only) and <name>.all.
// The toolbelt then grants, gates, records and replays those calls like
// any other operation's. It supervises the server: a crash is followed by a
// restart after a backoff on the injected clock, and a crash loop shows in
// the Instance's Health (docs/packages-mcp.md).
//
// It must never pass the server a token, a secret or the daemon's own
// environment beyond the few variables it names, never echo the server's
// stderr or the text of a transport failure in an error, never rename a
// tool into another's operation name, and never leave a server process
// behind when its Instance is stopped.
package mcppkg
