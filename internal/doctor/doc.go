// Package doctor examines an Open Conduit installation as an operator would
// before asking for help, and reports what it finds: `open-conduit doctor`.
// It reads the state directory as the daemon lays it out (its owner and
// modes, the token files, the socket paths, the `os` binary executions are
// handed, the free disk space), checks the configuration the daemon runs or
// a file it is given (diagnostics, warnings and the spec's grants check),
// resolves each secret with the daemon's resolver (by name, never by value),
// probes the keyring and looks for bubblewrap. When the daemon answers on
// its management socket it adds what only the daemon knows: its health and
// the Work it holds, with the commands that release it. Without a daemon it
// reports the offline checks alone.
//
// Each finding has a severity, a stable code (docs/cli.md lists them all),
// a message and the command that fixes it.
//
// It must never change anything it examines (no chmod, no write, no lock
// taken, no socket removed: it says which command to run instead), never
// put a secret, a token, a secret reference or any other configured value
// into a finding (a secret is named, its value is dropped as soon as it
// resolved), and never sleep or read the clock itself: its timers are
// injected.
package doctor
