package cli

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/daemon"
)

// EnvNotifySocket is the service manager's readiness socket (sd_notify).
const EnvNotifySocket = "NOTIFY_SOCKET"

// EnvStore and EnvStorePassword stand for --store and --store-password.
const (
	EnvStore         = "OPEN_CONDUIT_STORE"
	EnvStorePassword = "OPEN_CONDUIT_STORE_PASSWORD"
)

func init() {
	commands = append(commands, newDaemonCmd)
	// auth recover opens the credentials where the daemon keeps them.
	openCredentials = daemon.OpenCredentials
}

// runDaemon runs the daemon; tests replace it to check what the command
// passes.
var runDaemon = daemon.Run

// newDaemonCmd is `open-conduit daemon`: the daemon itself, in the
// foreground, until SIGINT or SIGTERM.
func newDaemonCmd(s Streams) *cobra.Command {
	var state, logFormat, logLevel, metricsAddr, store, storePassword, cpuProfile string
	var metricsRemote bool
	cmd := &cobra.Command{
		Use:   "daemon [--state DIR] [--log-level LEVEL] [--log-format text|json] [--metrics-address HOST:PORT]",
		Short: "Run the Open Conduit daemon in the foreground",
		Long: `Run the daemon on a state directory: --state DIR, else $OPEN_CONDUIT_STATE,
else $XDG_STATE_HOME/open-conduit, else ~/.local/state/open-conduit. It
creates the directory (0700) and refuses one other users can reach, takes
its lock (a second daemon on the same directory exits 1 naming the holder),
activates <state>/config.json or, with neither a file nor a committed
generation, the default configuration (a setup scope with a shell binding),
and serves the management API on <state>/management.sock. The owner's token
is in <state>/private/operator.token.

SIGINT or SIGTERM stops it gracefully: running processes keep running and
the next daemon adopts them. Logs go to standard error, as text or, with
--log-format json, one JSON object per line; --log-level (debug, info, warn,
error; default info) sets the least level logged.

Under a service manager that sets NOTIFY_SOCKET (systemd's Type=notify) it
sends READY=1 once it has adopted the attempts of an earlier daemon, run its
first round and sweep and serves its sockets, and STOPPING=1 when it stops.

Prometheus metrics are served at GET /metrics on the management socket (any
operator credential), and also, without authentication, on
--metrics-address HOST:PORT when given: a loopback address only, unless
--metrics-allow-remote.

Coordination storage is SQLite in the state directory, unless --store names
a PostgreSQL database (a postgres:// URL without a password; also
$OPEN_CONDUIT_STORE): its password is a secret reference, --store-password
keyring:…, file:…, env:… or cmd:… (also $OPEN_CONDUIT_STORE_PASSWORD),
resolved at start and never written or logged. Several daemons, each with a
state directory of its own, may share one store: they serve the same
configuration generations, and a daemon started on a store that already has
the owner's credential issues none (copy the owner's token file from a
daemon that has it). See docs/storage.md.

Examples:
  open-conduit daemon
  open-conduit daemon --state /srv/oc --log-format json --log-level debug
  open-conduit daemon --metrics-address 127.0.0.1:9464
  open-conduit daemon --store 'postgres://conduit@db.internal/conduit' --store-password keyring:conduit-db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if logFormat != daemon.LogText && logFormat != daemon.LogJSON {
				return usagef("--log-format must be text or json, not %q", logFormat)
			}
			if _, err := daemon.ParseLogLevel(logLevel); err != nil || logLevel == "" {
				return usagef("--log-level must be debug, info, warn or error, not %q", logLevel)
			}
			if state == "" {
				var err error
				if state, err = defaultStateDir(); err != nil {
					return failf("%v", err)
				}
			}
			// The notification socket is the daemon's alone: executions and
			// their children must not inherit it.
			notify := os.Getenv(EnvNotifySocket)
			os.Unsetenv(EnvNotifySocket)
			// Nor the store's address and password reference.
			if store == "" {
				store = os.Getenv(EnvStore)
			}
			if storePassword == "" {
				storePassword = os.Getenv(EnvStorePassword)
			}
			os.Unsetenv(EnvStore)
			os.Unsetenv(EnvStorePassword)
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return failf("%v", err)
				}
				defer stop()
			}
			err := runDaemon(cmd.Context(), daemon.Options{
				StateDir: state, LogFormat: logFormat, LogLevel: logLevel, Stderr: s.Err, NotifySocket: notify,
				MetricsAddress: metricsAddr, MetricsAllowRemote: metricsRemote,
				Store: store, StorePassword: storePassword,
			})
			if err != nil {
				return failf("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "the state directory (default: $"+EnvState+", else the XDG state directory)")
	f.StringVar(&logFormat, "log-format", daemon.LogText, "text or json")
	f.StringVar(&logLevel, "log-level", daemon.LogInfo, "the least level logged: debug, info, warn or error")
	f.StringVar(&metricsAddr, "metrics-address", "", "also serve GET /metrics, without authentication, on this loopback HOST:PORT (default: off)")
	f.BoolVar(&metricsRemote, "metrics-allow-remote", false, "allow a --metrics-address that is not a loopback address")
	f.StringVar(&store, "store", "", "keep coordination storage in this PostgreSQL database, a postgres:// URL without a password (default: $"+EnvStore+", else SQLite in the state directory)")
	f.StringVar(&storePassword, "store-password", "", "the store's password as a secret reference: keyring:, file:, env: or cmd: (default: $"+EnvStorePassword+")")
	// A developer's tool (docs/performance.md): the daemon's CPU profile,
	// from its start until it stops, for go tool pprof. Hidden: an operator
	// never needs it.
	f.StringVar(&cpuProfile, "cpu-profile", "", "write the daemon's CPU profile to this new file (development)")
	_ = f.MarkHidden("cpu-profile")
	return cmd
}

// startCPUProfile starts the process's CPU profile into a new owner-only
// file at path; stop ends it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// storeFlags adds --store and --store-password to a tool that opens the
// daemon's coordination storage on the host (auth recover, doctor).
func storeFlags(cmd *cobra.Command, store, storePassword *string) {
	f := cmd.Flags()
	f.StringVar(store, "store", "", "the daemon's PostgreSQL store, a postgres:// URL without a password (default: $"+EnvStore+", else SQLite in the state directory)")
	f.StringVar(storePassword, "store-password", "", "the store's password as a secret reference: keyring:, file:, env: or cmd: (default: $"+EnvStorePassword+")")
}

// storeOptions is the store a host tool opens: the flags, else their
// environment variables.
func storeOptions(state, store, storePassword string) daemon.StoreOptions {
	if store == "" {
		store = os.Getenv(EnvStore)
	}
	if storePassword == "" {
		storePassword = os.Getenv(EnvStorePassword)
	}
	return daemon.StoreOptions{StateDir: state, URL: store, Password: storePassword}
}
