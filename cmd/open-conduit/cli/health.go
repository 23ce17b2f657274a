package cli

import (
	"fmt"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
				body, err := withSocket(h.Raw, c.Socket())
				if err != nil {
					return err
				}
				return printRaw(s.Out, body)
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

// withSocket adds the socket the command asked, as "socket", to the API's
// health object, so --json says what the table says.
func withSocket(raw []byte, socket string) ([]byte, error) {
	var obj map[string]jsontext.Value
	if err := jsonv2.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("the daemon's health answer is not a JSON object: %w", err)
	}
	sock, err := jsonv2.Marshal(socket)
	if err != nil {
		return nil, err
	}
	obj["socket"] = sock
	return jsonv2.Marshal(obj, jsonv2.Deterministic(true))
}
