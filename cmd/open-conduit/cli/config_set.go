package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { configSubcommands = append(configSubcommands, newConfigSetCmd) }

func newConfigSetCmd(s Streams) *cobra.Command {
	var expected int64
	var key string
	cmd := &cobra.Command{
		Use:   "set POINTER JSON [--expected-generation N]",
		Short: "Change one member of the daemon's configuration and apply it (admin)",
		Long: `Change one member of the active configuration: POINTER is a JSON pointer
(RFC 6901) into the configuration document, as diagnostics and warnings name
members, and JSON is its new value (quote it for the shell, for example
'["emit", "@github.author"]'). An existing member or list element is
replaced; a member missing from an object that exists is added. The daemon
changes its own copy of the document (secret references are kept as written)
and applies the result as config apply does: it validates it, saves it to
<state>/config.json (keeping the one it replaces as config.json.last-good)
and makes it the next generation. Needs the admin role.

--expected-generation N refuses the change (stale_generation) if the active
generation is no longer N. Without it, the command reads the active
generation first and changes that.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("config set takes a POINTER and a JSON value (see 'open-conduit config set --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			pointer, value := args[0], []byte(args[1])
			if !json.Valid(value) {
				return usagef("the value is not JSON; quote a string, for example '\"text\"', and write a list as '[\"a\", \"b\"]'")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			if expected <= 0 {
				cur, err := c.Config(cmd.Context(), nil)
				if err != nil {
					return clientFailure(err, t)
				}
				expected = cur.Generation
			}
			res, err := c.SetConfig(cmd.Context(), pointer, value, expected, keyOpts(key))
			if err != nil {
				if diags := client.Diagnostics(err); len(diags) > 0 && !wantJSON(cmd) {
					printValidation(s, diags, nil)
					return failf("%s was not changed: the configuration it makes does not validate; fix the problems above", pointer)
				}
				if client.IsStaleGeneration(err) {
					return failf("the active configuration is no longer generation %d: someone applied another since; read it (open-conduit config get) and set again", expected)
				}
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			for _, w := range res.Warnings {
				fmt.Fprintln(s.Out, "warning:", w)
			}
			if res.Unchanged {
				fmt.Fprintf(s.Out, "Unchanged: %s already holds that value in generation %d; no generation was made.\n", pointer, res.Generation)
				return nil
			}
			fmt.Fprintf(s.Out, "Set %s: generation %d (was %d), hash %s.\n", pointer, res.Generation, res.PreviousGeneration, res.Hash)
			return nil
		},
	}
	cmd.Flags().Int64Var(&expected, "expected-generation", 0, "change it only if this is still the active generation (default: the active one, read first)")
	keyFlag(cmd, &key)
	return cmd
}
