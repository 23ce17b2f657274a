package cli

import (
	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/executor/shell"
)

func init() { commands = append(commands, newSuperviseCmd) }

// newSuperviseCmd is the shell executor's supervisor: the daemon starts
// `open-conduit supervise <execution dir>` for every shell segment. It is
// hidden because nobody else should run it.
func newSuperviseCmd(Streams) *cobra.Command {
	return &cobra.Command{
		Use:    "supervise EXECUTION_DIR",
		Short:  "Supervise one shell execution (started by the daemon)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := shell.Supervise(args[0]); err != nil {
				return failf("supervise: %v", err)
			}
			return nil
		},
	}
}
