package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon"
)

func init() { commands = append(commands, newConfigCmd) }

// configSubcommands are the subcommands of `open-conduit config` besides
// check; a command file adds its own in an init function.
var configSubcommands []func(Streams) *cobra.Command

// newConfigCmd builds `open-conduit config` with check and every
// subcommand another file registered.
func newConfigCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check, show and change the configuration",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usagef("name a subcommand, such as 'open-conduit config check FILE' (see 'open-conduit config --help')")
		},
	}
	cmd.AddCommand(newConfigCheckCmd(s))
	for _, add := range configSubcommands {
		cmd.AddCommand(add(s))
	}
	return cmd
}

// checkOutput is the --json shape of config check.
type checkOutput struct {
	Valid       bool                `json:"valid"`
	Hash        string              `json:"hash,omitempty"`
	Diagnostics []config.Diagnostic `json:"diagnostics"`
	Warnings    []config.Warning    `json:"warnings"`
}

func newConfigCheckCmd(s Streams) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a configuration file offline, against what this release registers",
		Long: `Check a configuration file without a daemon: strict parsing, then every rule
against the executors, operations and toolsets this release registers and
the playbooks it ships, with the operator's own read from the playbooks/
directory beside FILE.
It prints one line per problem and exits 0 when the file is valid (warnings
allowed), 1 when it is not, and 2 when the command line is wrong.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("config check takes exactly one FILE (see 'open-conduit config check --help')")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			return runConfigCheck(s.Out, args[0], asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func runConfigCheck(out io.Writer, path string, asJSON bool) error {
	data, err := config.ReadFile(path)
	if err != nil {
		return failf("cannot read the configuration file: %v", err)
	}
	reg, err := daemon.ReleaseRegistry()
	if err != nil {
		return failf("%v", err)
	}
	// The operator's playbooks are the playbooks/ directory beside the
	// file, as the daemon reads them beside its own.
	pbs, _ := config.ReadPlaybooks(filepath.Join(filepath.Dir(path), config.PlaybooksDir))
	reg.SetOperatorPlaybooks(pbs)
	snap, res := config.Validate(data, reg)
	if asJSON {
		o := checkOutput{Valid: res.Valid(), Diagnostics: res.Diagnostics, Warnings: res.Warnings}
		if snap != nil {
			o.Hash = snap.Hash
		}
		b, err := json.Marshal(o)
		if err != nil {
			return failf("cannot encode the result: %v", err)
		}
		fmt.Fprintf(out, "%s\n", b)
	} else {
		for _, d := range res.Diagnostics {
			fmt.Fprintln(out, d)
		}
		for _, w := range res.Warnings {
			fmt.Fprintln(out, "warning:", w)
		}
		switch n := len(res.Diagnostics); {
		case n == 0:
			fmt.Fprintf(out, "valid: hash %s\n", snap.Hash)
		case n == 1:
			fmt.Fprintln(out, "invalid: 1 problem")
		default:
			fmt.Fprintf(out, "invalid: %d problems\n", n)
		}
	}
	if !res.Valid() {
		return silent(ExitFailed)
	}
	return nil
}
