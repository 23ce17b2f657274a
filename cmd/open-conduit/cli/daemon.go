package cli

import (
	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/daemon"
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
	var state, logFormat string
	cmd := &cobra.Command{
		Use:   "daemon [--state DIR] [--log-format text|json]",
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
--log-format json, one JSON object per line.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if logFormat != daemon.LogText && logFormat != daemon.LogJSON {
				return usagef("--log-format must be text or json, not %q", logFormat)
			}
			if state == "" {
				var err error
				if state, err = defaultStateDir(); err != nil {
					return failf("%v", err)
				}
			}
			err := runDaemon(cmd.Context(), daemon.Options{StateDir: state, LogFormat: logFormat, Stderr: s.Err})
			if err != nil {
				return failf("%v", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "the state directory (default: $"+EnvState+", else the XDG state directory)")
	f.StringVar(&logFormat, "log-format", daemon.LogText, "text or json")
	return cmd
}
