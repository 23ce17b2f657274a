package oscli

import (
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

func newWaitCmd(s Streams) *cobra.Command {
	var in osclient.WaitInput
	var requestID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "wait [--type T]... [--key K]... [--timeout D] [--request-id ID]",
		Short: "Declare a wait, then exit so the host can park this run",
		Long: `Declare that this run waits for an Event of one of the --type types (or on the
--key correlation keys; with only types, on the Work's own keys), for at most
--timeout. The declaration releases this run's toolbelt authority at once:
exit after it, and the host resumes the Work when a matching Event arrives or
the timeout passes.`,
		Args: args(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in.Timeout != "" {
				if d, err := time.ParseDuration(in.Timeout); err != nil || d <= 0 {
					return usagef("--timeout %q is not a positive duration such as 90s, 10m or 2h", in.Timeout)
				}
			}
			resp, err := callBuiltin(cmd, s, osclient.OpWait, in, requestID)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(s.Out, resp.Result)
			}
			_, err = fmt.Fprintln(s.Out, "Wait declared. Exit now: the host parks this run and resumes the Work when a matching Event arrives or the timeout passes.")
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&in.Types, "type", nil, "an Event type to wait for (repeatable)")
	f.StringArrayVar(&in.Keys, "key", nil, "a correlation key to wait on (repeatable)")
	f.StringVar(&in.Timeout, "timeout", "", "the longest wait, such as 10m (at most 720h); unset, the wait has no timeout and lasts until a matching Event arrives or an operator wakes or cancels the Work")
	f.StringVar(&requestID, "request-id", "", "make the declaration idempotent under this ID")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
