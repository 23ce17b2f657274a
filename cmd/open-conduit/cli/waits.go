package cli

import (
	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newWaitsCmd) }

func newWaitsCmd(s Streams) *cobra.Command {
	var f client.WaitFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "waits [--work W] [--scope S] [--state STATE]",
		Short: "List waits: what a Work is waiting for",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			f.Page = lf.page()
			list, err := c.ListWaits(cmd.Context(), f)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, list.Raw)
			}
			rows := [][]string{{"ID", "WORK", "STATE", "TYPES", "KEYS", "TIMEOUT", "CREATED"}}
			for _, w := range list.Items {
				keys := joinOr(w.Keys, "-")
				if w.OnWorkKeys {
					keys = "(the Work's keys)"
				}
				timeout := "-"
				if !w.TimeoutAt.IsZero() {
					timeout = when(w.TimeoutAt)
				}
				rows = append(rows, []string{w.ID, w.Work, w.State, joinOr(w.Types, "any"), keys, timeout, when(w.CreatedAt)})
			}
			if err := printLines(s.Out, rows); err != nil {
				return err
			}
			printNext(s, cmd, list.NextCursor)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.Work, "work", "", "only the waits of this Work")
	cmd.Flags().StringVar(&f.Scope, "scope", "", "only waits of this scope")
	cmd.Flags().StringVar(&f.State, "state", "", "only waits in this state: active, satisfied, timed_out or cancelled")
	lf.add(cmd)
	return cmd
}
