package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/doctor"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

func init() { commands = append(commands, newDoctorCmd) }

// doctorKeyring is the keyring doctor asks; tests replace it.
var doctorKeyring config.Keyring = config.SystemKeyring{}

func newDoctorCmd(s Streams) *cobra.Command {
	var state, configFile, store, storePassword string
	var offline bool
	cmd := &cobra.Command{
		Use:   "doctor [--state DIR] [--config FILE] [--store URL --store-password REF] [--offline] [--json]",
		Short: "Check the state directory, the configuration and the daemon, and say how to fix what is wrong",
		Long: `Doctor examines an installation and prints one finding per check, each with a
severity (error, warning, info, ok), a stable code, a message and the command
that fixes it. It works without a daemon, reading the state directory
(--state DIR, else $OPEN_CONDUIT_STATE, else the XDG state directory) and the
configuration; when the daemon answers on <state>/management.sock it adds
the daemon's health and the Work it holds, with the commands that release it.
--offline does not ask the daemon.

It checks: the state directory (owner, mode), the token files (not readable
by others), the management and run directories' socket path lengths, the os
binary executions are handed (<state>/bin/os), free disk space, the
configuration's diagnostics and warnings with the grants check, every secret
(resolved by name, its value dropped at once), the keyring and bubblewrap.
The configuration is --config FILE, else the daemon's active generation,
else <state>/config.json, else the default configuration.

With --store (and --store-password, or $OPEN_CONDUIT_STORE and
$OPEN_CONDUIT_STORE_PASSWORD), as the daemon is given them, it also
connects to the PostgreSQL store and checks its schema version against
this release's (too new, migrations pending), without migrating anything
and without ever printing the URL, its user, the password or its
reference.

It changes nothing. It exits 1 when any finding is an error, 0 otherwise
(warnings do not fail), 2 when the command line is wrong.

Examples:
  open-conduit doctor
  open-conduit doctor --state /srv/oc --offline
  open-conduit doctor --config ./config.json --json`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usagef("doctor takes no arguments (see 'open-conduit doctor --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state == "" {
				var err error
				if state, err = defaultStateDir(); err != nil {
					return failf("%v", err)
				}
			}
			reg, err := daemon.ReleaseRegistry()
			if err != nil {
				return failf("%v", err)
			}
			opts := doctor.Options{
				StateDir: state, ConfigFile: configFile, Registry: reg, Default: bootstrap.DefaultConfig(),
				Keyring: doctorKeyring, Store: storeOptions(state, store, storePassword),
			}
			if exe, err := os.Executable(); err == nil {
				opts.Reaper = []string{exe, "reap", "--"}
			}
			if !offline {
				c, sock := doctorClient(cmd, state)
				opts.Daemon, opts.Socket = c, sock
			}
			rep, err := doctor.Run(cmd.Context(), opts)
			if err != nil {
				return failf("%v", err)
			}
			if wantJSON(cmd) {
				b, err := json.Marshal(rep)
				if err != nil {
					return failf("cannot encode the report: %v", err)
				}
				fmt.Fprintf(s.Out, "%s\n", b)
			} else {
				printReport(s.Out, rep)
			}
			if !rep.OK {
				return silent(ExitFailed)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "the daemon's state directory (default: $"+EnvState+", else the XDG state directory)")
	f.StringVar(&configFile, "config", "", "check this configuration file instead of the one the daemon runs")
	f.BoolVar(&offline, "offline", false, "do not ask the daemon: check the state directory and the configuration only")
	storeFlags(cmd, &store, &storePassword)
	return cmd
}

// doctorClient is the client doctor asks the daemon with: the management
// socket and owner's token of the state directory, unless --endpoint,
// --token-file or their environment variables say otherwise.
func doctorClient(cmd *cobra.Command, state string) (*client.Client, string) {
	sock := filepath.Join(state, statedir.SocketName)
	tokenFile := statedir.OwnerTokenPath(state)
	if v, _ := cmd.Flags().GetString("endpoint"); v != "" {
		sock = v
	} else if v := os.Getenv(EnvEndpoint); v != "" {
		sock = v
	}
	if v, _ := cmd.Flags().GetString("token-file"); v != "" {
		tokenFile = v
	} else if v := os.Getenv(EnvTokenFile); v != "" {
		tokenFile = v
	}
	sock = strings.TrimPrefix(sock, "unix://")
	return client.New(sock, client.TokenFile(tokenFile)), sock
}

// printReport writes the findings for people, then a summary.
func printReport(w io.Writer, rep doctor.Report) {
	counts := map[doctor.Severity]int{}
	for _, f := range rep.Findings {
		counts[f.Severity]++
		fmt.Fprintf(w, "%-7s  %s: %s\n", f.Severity, f.Code, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(w, "         fix: %s\n", f.Fix)
		}
	}
	verdict := "ok"
	if !rep.OK {
		verdict = "failed"
	}
	fmt.Fprintf(w, "doctor: %s: %d %s, %d %s, %d info, %d ok\n", verdict,
		counts[doctor.SeverityError], plural(counts[doctor.SeverityError], "error"),
		counts[doctor.SeverityWarning], plural(counts[doctor.SeverityWarning], "warning"),
		counts[doctor.SeverityInfo], counts[doctor.SeverityOK])
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
