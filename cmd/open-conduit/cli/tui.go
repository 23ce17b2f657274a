package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/tui"
)

func init() { commands = append(commands, newTUICmd) }

func newTUICmd(s Streams) *cobra.Command {
	var refresh time.Duration
	cmd := &cobra.Command{
		Use:   "tui [--refresh 2s]",
		Short: "Watch and steer the daemon in a terminal UI",
		Long: `A terminal UI over the management API: live views of Work (1), waits (2),
events (3) and pending approvals (4); enter opens a Work's executions, an
execution's log (followed while it runs) or an event's causal chain; l
follows a Work's log; c cancels, r retries, w wakes, a approves and d denies,
each after a confirmation. ? shows every key, q quits. The views are read
again every --refresh and after every action.`,
		Example: `  open-conduit tui
  open-conduit tui --refresh 5s --token-file ~/viewer.token`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if refresh < 100*time.Millisecond {
				return usagef("--refresh must be at least 100ms")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			// Say plainly why the daemon cannot be reached before taking
			// over the terminal.
			if _, err := c.Health(cmd.Context()); err != nil {
				return clientFailure(err, t)
			}
			return tui.Run(cmd.Context(), tui.Options{Client: c, Refresh: refresh}, s.In, s.Out)
		},
	}
	cmd.Flags().DurationVar(&refresh, "refresh", tui.DefaultRefresh, "how often the views are read again")
	return cmd
}
