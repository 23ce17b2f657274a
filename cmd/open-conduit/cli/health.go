package cli

import (
	"strconv"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newHealthCmd) }

func newHealthCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Ask the daemon whether it is serving, and which configuration generation is active",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			h, err := c.Health(cmd.Context())
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, h.Raw)
			}
			return printLines(s.Out, [][]string{
				{"status", h.Status},
				{"version", h.Version},
				{"generation", strconv.FormatInt(h.Generation, 10)},
				{"socket", c.Socket()},
			})
		},
	}
}
