package oscli

import (
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

func newCallCmd(s Streams) *cobra.Command {
	var input, requestID, scopeID, workID, executionID string
	cmd := &cobra.Command{
		Use:   "call OPERATION [--input JSON|@FILE|-] [--request-id ID]",
		Short: "Call an operation and print its result as JSON",
		Long: `Call an operation of this execution's toolbelt (a builtin such as emit, or a
granted extension operation such as github.pr.create) with a JSON object as
input, and print the result. 'os guidance' lists the operations and their
inputs. With --request-id, repeating the call replays its result instead of
acting twice.`,
		Args: args(1, "one OPERATION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := args[0]
			if err := extension.OperationName(op); err != nil {
				return usagef("%q is not an operation name: %v (see 'os guidance')", op, err)
			}
			in, err := readJSON("input", input, s.In, true)
			if err != nil {
				return err
			}
			c, err := client(s)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.Call(cmd.Context(), osclient.CallRequest{
				Operation: op, Input: in, RequestID: requestID,
				ScopeID: scopeID, WorkID: workID, ExecutionID: executionID,
			})
			if err != nil {
				return err
			}
			noteReplayed(s.Err, resp.Replayed)
			return printJSON(s.Out, resp.Result)
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "", "the operation's input: a JSON object, @FILE, or - to read standard input (default {})")
	f.StringVar(&requestID, "request-id", "", "make the call idempotent: a repeat with the same ID and input replays the result")
	f.StringVar(&scopeID, "scope-id", "", "refuse the call unless this execution runs in scope ID")
	f.StringVar(&workID, "work-id", "", "refuse the call unless this execution works on Work ID")
	f.StringVar(&executionID, "execution-id", "", "refuse the call unless this is execution ID")
	return cmd
}
