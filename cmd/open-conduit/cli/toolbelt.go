package cli

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newToolbeltCmd) }

func newToolbeltCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "toolbelt",
		Short: "Inspect what executions asked of the toolbelt",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("calls"),
	}
	cmd.AddCommand(newToolbeltCallsCmd(s))
	return cmd
}

func newToolbeltCallsCmd(s Streams) *cobra.Command {
	var f client.ToolbeltCallFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "calls [--execution E] [--kind toolbelt.called|toolbelt.rejected] [--result R]",
		Short: "List the toolbelt's call records: each call and refusal, with its result",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			f.Page = lf.page()
			list, err := c.ToolbeltCalls(cmd.Context(), f)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, list.Raw)
			}
			rows := [][]string{{"AT", "KIND", "OPERATION", "EXECUTION", "EPOCH", "RESULT", "GATE"}}
			for _, call := range list.Items {
				result := call.Result
				if call.Replayed {
					result += " (replayed)"
				}
				rows = append(rows, []string{when(call.At), call.Kind, or(call.Operation, "-"), or(call.Execution, "-"),
					strconv.FormatInt(call.Epoch, 10), result, or(call.Gate, "-")})
			}
			if err := printLines(s.Out, rows); err != nil {
				return err
			}
			printNext(s, cmd, list.NextCursor)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.Execution, "execution", "", "only the calls of this execution")
	cmd.Flags().StringVar(&f.Kind, "kind", "", "toolbelt.called or toolbelt.rejected")
	cmd.Flags().StringVar(&f.Result, "result", "", "only calls with this result (ok, forbidden, authority_released, …)")
	lf.add(cmd)
	return cmd
}
