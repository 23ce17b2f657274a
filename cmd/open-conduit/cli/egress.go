package cli

import (
	"context"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func newExecutionsEgressCmd(s Streams) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "egress EXECUTION",
		Short: "List the connections an execution opened through the egress proxy",
		Long: `List the connections an execution opened, or tried to open, through the
daemon's egress proxy, oldest first: where to, whether its binding's egress
allowed it (and the reason when not), the bytes each way, and when it
started and ended ("open" while it lasts).`,
		Args: oneArg("execution ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runList(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.EgressConnection], error) {
				return c.EgressConnections(ctx, args[0], lf.page())
			}, []string{"STARTED", "TARGET", "RESULT", "REASON", "UP", "DOWN", "ENDED"}, func(e client.EgressConnection) []string {
				target := "-"
				if e.Host != "" {
					target = net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
				}
				result, ended := "refused", "open"
				if e.Allowed {
					result = "allowed"
				}
				if e.EndedAt != nil {
					ended = when(*e.EndedAt)
				}
				return []string{when(e.StartedAt), target, result, or(e.Reason, "-"), itoa(e.BytesUp), itoa(e.BytesDown), ended}
			})
		},
	}
	lf.add(cmd)
	return cmd
}
