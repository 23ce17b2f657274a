package oscli

import (
	"fmt"

	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

func newOutcomeCmd(s Streams) *cobra.Command {
	var message, data, requestID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "outcome succeeded|failed [--message M] [--data JSON] [--request-id ID]",
		Short: "Declare this run's outcome, then exit",
		Long: `Declare the outcome of this run: succeeded or failed, with an optional short
message and JSON data. It replaces the outcome the executor would infer from
the exit status, and releases this run's toolbelt authority at once: exit
after it.`,
		Args: args(1, "the outcome, succeeded or failed"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := osclient.OutcomeInput{Outcome: args[0], Message: message}
			if in.Outcome != "succeeded" && in.Outcome != "failed" {
				return usagef("the outcome is succeeded or failed, not %q", in.Outcome)
			}
			var err error
			if in.Data, err = readJSON("data", data, s.In, false); err != nil {
				return err
			}
			resp, err := callBuiltin(cmd, s, osclient.OpDeclareOutcome, in, requestID)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(s.Out, resp.Result)
			}
			_, err = fmt.Fprintf(s.Out, "Outcome %s declared. Exit now: the host records it when this run ends.\n", in.Outcome)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&message, "message", "", "a short explanation for the operator")
	f.StringVar(&data, "data", "", "data for the outcome: JSON, @FILE, or - to read standard input")
	f.StringVar(&requestID, "request-id", "", "make the declaration idempotent under this ID")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
