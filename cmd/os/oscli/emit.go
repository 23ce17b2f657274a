package oscli

import (
	"encoding/json"
	"fmt"

	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

func newEmitCmd(s Streams) *cobra.Command {
	var data, key, requestID string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "emit TYPE [--data JSON|@FILE|-] [--correlation-key K] [--request-id ID]",
		Short: "Emit an Event and print its ID",
		Long: `Emit an Event of TYPE (a declared, namespaced type such as build.done) with
optional JSON data. The host assigns its source, Work, execution and cause.
Prints the new Event's ID; --json prints the whole result.`,
		Args: args(1, "one Event TYPE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := osclient.EmitInput{Type: args[0], CorrelationKey: key}
			var err error
			if in.Data, err = readJSON("data", data, s.In, false); err != nil {
				return err
			}
			resp, err := callBuiltin(cmd, s, osclient.OpEmit, in, requestID)
			if err != nil {
				return err
			}
			var res osclient.EmitResult
			if asJSON || json.Unmarshal(resp.Result, &res) != nil || res.EventID == "" {
				return printJSON(s.Out, resp.Result)
			}
			_, err = fmt.Fprintln(s.Out, res.EventID)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "the Event's data: JSON, @FILE, or - to read standard input")
	f.StringVar(&key, "correlation-key", "", "a correlation key this execution's Work owns")
	f.StringVar(&requestID, "request-id", "", "make the emission idempotent under this ID")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// callBuiltin marshals a builtin's input and calls it.
func callBuiltin(cmd *cobra.Command, s Streams, op string, input any, requestID string) (*osclient.CallResponse, error) {
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, usagef("%s: %v", op, err)
	}
	c, err := client(s)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	resp, err := c.Call(cmd.Context(), osclient.CallRequest{Operation: op, Input: raw, RequestID: requestID})
	if err != nil {
		return nil, err
	}
	noteReplayed(s.Err, resp.Replayed)
	return resp, nil
}
