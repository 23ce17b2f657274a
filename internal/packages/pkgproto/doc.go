// Package pkgproto is the host's side of the extension protocol
// (docs/extension-protocol.md): the packages.Runtime of protocol packages.
// It starts an installed package's process from its directory in a
// process group of its own (with a parent-death signal on Linux), shakes
// hands with it, supervises it (a crashed process is restarted after an
// exponential backoff on the injected clock, a crash loop is reported in
// its health and the log), bounds every call with a timeout, and stops it
// politely then by force. It turns the manifest's operations, gate, start
// gate and executors into an extension.Registration and executor.Executors
// that call the process, concurrently, each response matched to its
// request by id.
//
// It must never send a package a token (only the token file's path), never
// register a gate, a start gate, an emission or an executor whose
// permission the operator did not accept, never let a gate that timed out,
// crashed or answered without a verdict let a call through (it fails
// closed), never log or answer the text a package writes (its stderr goes
// to a bounded log only; its errors are reported by kind and code), and
// never leave a package process running after Stop.
package pkgproto
