package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newWaitsCmd) }

// newWaitsCmd is `waits`, which lists as `waits list` does.
func newWaitsCmd(s Streams) *cobra.Command {
	cmd := newWaitsListCmd(s, "waits [--work W] [--scope S] [--state STATE]")
	cmd.AddCommand(newWaitsListCmd(s, "list [--work W] [--scope S] [--state STATE]"))
	return cmd
}

func newWaitsListCmd(s Streams, use string) *cobra.Command {
	var f client.WaitFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: "List waits: what a Work is waiting for",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Wait], error) {
				f.Page = lf.page()
				return c.ListWaits(ctx, f)
			}, []string{"ID", "WORK", "STATE", "TYPES", "KEYS", "TIMEOUT", "CREATED"}, func(w client.Wait) []string {
				keys := joinOr(w.Keys, "-")
				if w.OnWorkKeys {
					keys = "(the Work's keys)"
				}
				return []string{w.ID, w.Work, w.State, joinOr(w.Types, "any"), keys, when(w.TimeoutAt), when(w.CreatedAt)}
			}, listExtra[client.Wait]{[]string{"SCOPE", "EXECUTION", "SATISFIED BY"}, func(w client.Wait) []string {
				return []string{w.Scope, or(w.Execution, "-"), or(w.SatisfiedBy, "-")}
			}, func(w client.Wait) time.Time { return w.CreatedAt }, nil})
		},
	}
	cmd.Flags().StringVar(&f.Work, "work", "", "only the waits of this Work")
	cmd.Flags().StringVar(&f.Scope, "scope", "", "only waits of this scope")
	cmd.Flags().StringVar(&f.State, "state", "", "only waits in this state: active, satisfied, timed_out or cancelled")
	lf.addMain(cmd)
	return cmd
}
