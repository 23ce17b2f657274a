package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newEmitCmd) }

func newEmitCmd(s Streams) *cobra.Command {
	var req client.EmitRequest
	var data, key string
	cmd := &cobra.Command{
		Use:   "emit TYPE --scope S [--data JSON|@FILE|-] [--correlation-key K] [--parent EVT]",
		Short: "Send an Event as an operator; the scope's routes handle it at once",
		Long: `Send an Event from core.manual, with you as its actor: a root, or, with
--parent, an Event derived from an accepted one (in its scope, under the
causal limits). The scope's routes handle it at once; the command prints
what they did. TYPE is namespaced and lower case, such as deploy.requested;
core.* types are the host's.`,
		Args: oneArg("event TYPE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Scope == "" && req.Parent == "" {
				return usagef("emit needs --scope (or --parent, whose scope the event takes)")
			}
			obj, err := jsonObject(s, "--data", data)
			if err != nil {
				return err
			}
			req.Type, req.Data = args[0], obj
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.Emit(cmd.Context(), req, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			fmt.Fprintf(s.Out, "Accepted event %s (%s in scope %s).\n", res.Event.ID, res.Event.Type, res.Event.Scope)
			fmt.Fprintf(s.Out, "Routing: %s: %s\n", res.Decision.Effect, res.Decision.Detail)
			if res.Decision.Started != "" {
				fmt.Fprintf(s.Out, "Started Work %s; follow it with: open-conduit work get %s\n", res.Decision.Started, res.Decision.Started)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Scope, "scope", "", "the scope of the event")
	f.StringVar(&data, "data", "", "the event's data: a JSON object, @FILE or - for standard input")
	f.StringVar(&req.CorrelationKey, "correlation-key", "", "the event's correlation key")
	f.StringVar(&req.Parent, "parent", "", "the accepted event this one is derived from")
	keyFlag(cmd, &key)
	return cmd
}
