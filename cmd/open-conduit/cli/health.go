package cli

import (
	"fmt"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newHealthCmd) }

// readyPoll is how often health --wait-ready asks again.
const readyPoll = 100 * time.Millisecond

// healthReady is the health state of a ready daemon (the API's
// HealthReady; the CLI reaches the API through client only).
const healthReady = "ready"

func newHealthCmd(s Streams) *cobra.Command {
	var waitReady time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Ask the daemon whether it is serving and ready, and which configuration generation is active",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			h, err := c.Health(cmd.Context())
			// --wait-ready: ask again while the daemon cannot be reached
			// yet or is still starting, until it is ready or the time is up.
			for deadline := time.Now().Add(waitReady); waitReady > 0 && (client.IsUnreachable(err) || err == nil && h.State != healthReady); {
				if !time.Now().Before(deadline) {
					if err == nil {
						return failf("the daemon is still %s after %s; see its log", h.State, waitReady)
					}
					break
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(readyPoll):
				}
				h, err = c.Health(cmd.Context())
			}
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
				{"state", h.State},
				{"version", h.Version},
				{"generation", strconv.FormatInt(h.Generation, 10)},
				{"socket", c.Socket()},
			})
		},
	}
	cmd.Flags().DurationVar(&waitReady, "wait-ready", 0, "wait up to this long for the daemon to answer and be ready (0: ask once)")
	return cmd
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
