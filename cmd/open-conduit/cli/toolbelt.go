package cli

import (
	"context"

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
		Long: `List the toolbelt's call records, oldest first: each call and refusal with its
operation, execution, epoch, result, the gate that parked or refused it, and
the refusal's classification: config_drift when the refused operation is one
the binding's playbook declares in the generation the execution is pinned to
(the configuration changed under the playbook since).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.ToolbeltCall], error) {
				f.Page = lf.page()
				return c.ToolbeltCalls(ctx, f)
			}, []string{"AT", "KIND", "OPERATION", "EXECUTION", "EPOCH", "RESULT", "GATE", "REFUSAL"}, func(call client.ToolbeltCall) []string {
				result := call.Result
				if call.Replayed {
					result += " (replayed)"
				}
				return []string{when(call.At), call.Kind, or(call.Operation, "-"), or(call.Execution, "-"), itoa(call.Epoch), result, or(call.Gate, "-"), or(call.Refusal, "-")}
			}, listExtra[client.ToolbeltCall]{wideHeader: []string{"ID", "TOKEN ID"}, wideRow: func(call client.ToolbeltCall) []string {
				return []string{call.ID, or(call.TokenID, "-")}
			}})
		},
	}
	cmd.Flags().StringVar(&f.Execution, "execution", "", "only the calls of this execution")
	cmd.Flags().StringVar(&f.Kind, "kind", "", "toolbelt.called or toolbelt.rejected")
	cmd.Flags().StringVar(&f.Result, "result", "", "only calls with this result (ok, forbidden, authority_released, …)")
	lf.add(cmd)
	return cmd
}
