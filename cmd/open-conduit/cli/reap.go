package cli

import (
	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/cliexit"
	"github.com/open-conduit/open-conduit/internal/reaper"
)

func init() { commands = append(commands, newReapCmd) }

// newReapCmd runs a command as a child subreaper (see package reaper): the
// daemon runs each cmd: secret under `open-conduit reap -- sh -c …`, so
// that nothing the command starts outlives its resolution. It is hidden
// because nobody else should run it, and it exits with the command's own
// status.
func newReapCmd(Streams) *cobra.Command {
	return &cobra.Command{
		Use:                "reap -- COMMAND [ARG]...",
		Short:              "Run a command and kill what it leaves behind (started by the daemon)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] == "--" {
				args = args[1:]
			}
			code, err := reaper.Run(args)
			if err != nil {
				return failf("reap: %v", err)
			}
			if code != 0 {
				return cliexit.Silent(code)
			}
			return nil
		},
	}
}
