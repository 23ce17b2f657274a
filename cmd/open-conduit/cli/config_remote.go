package cli

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() {
	configSubcommands = append(configSubcommands, newConfigGetCmd, newConfigValidateCmd, newConfigApplyCmd)
}

func newConfigGetCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "get",
		Short: "Show the daemon's active configuration (secret references redacted)",
		Long: `Print the active configuration document on standard output, indented, in
which every secret reference reads <scheme>:<redacted>; its generation,
hash, who published it and when go to standard error. The document applies
back as it is: 'config get > f && config apply f' makes no generation, and
an edited copy keeps each <scheme>:<redacted> secret's active reference.
--json prints the API's answer instead: the document with that metadata.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			cfg, err := c.Config(cmd.Context(), nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, cfg.Raw)
			}
			fmt.Fprintf(s.Err, "generation %d, hash %s, published by %s at %s\n", cfg.Generation, cfg.Hash, cfg.Actor, when(cfg.CreatedAt))
			return printRaw(s.Out, prettyJSON(cfg.Config))
		},
	}
}

// prettyJSON indents a JSON document with two spaces (as it came when it
// does not parse).
func prettyJSON(doc []byte) []byte {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, doc, "", "  "); err != nil {
		return doc
	}
	return pretty.Bytes()
}

func newConfigValidateCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file against what the running daemon registers",
		Long: `Send a configuration file to the daemon, which checks it against what it
registers (its executors, operations and toolsets) without applying it. The
output is config check's: one line per problem and per warning, then
'valid: hash <hash>' or 'invalid: N problems'. Exit 0 when valid, 1 when not.`,
		Args: oneArg("configuration FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readDocument(args[0])
			if err != nil {
				return err
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.ValidateConfig(cmd.Context(), doc)
			if err != nil {
				return documentFailure(err, args[0], t)
			}
			if wantJSON(cmd) {
				if err := printRaw(s.Out, res.Raw); err != nil {
					return err
				}
			} else {
				printValidation(s, res.Diagnostics, res.Warnings)
				if res.Valid {
					fmt.Fprintf(s.Out, "valid: hash %s\n", res.Hash)
				}
			}
			if !res.Valid {
				return silent(ExitFailed)
			}
			return nil
		},
	}
}

// documentFailure reports a failed validate or apply of the configuration
// file at path: an error that is neither the daemon's answer, nor a failure
// to reach it, nor an unreadable token file is the client's refusal of the
// document itself.
func documentFailure(err error, path string, t target) error {
	if client.ErrorCode(err) == "" && !client.IsUnreachable(err) && !client.IsTokenError(err) {
		return failf("%s is not a configuration document: %v", path, err)
	}
	return clientFailure(err, t)
}

// printValidation prints diagnostics and warnings as config check does.
func printValidation(s Streams, diags []client.Diagnostic, warns []client.Warning) {
	for _, d := range diags {
		fmt.Fprintln(s.Out, d)
	}
	for _, w := range warns {
		fmt.Fprintln(s.Out, "warning:", w)
	}
	switch n := len(diags); {
	case n == 1:
		fmt.Fprintln(s.Out, "invalid: 1 problem")
	case n > 1:
		fmt.Fprintf(s.Out, "invalid: %d problems\n", n)
	}
}

func newConfigApplyCmd(s Streams) *cobra.Command {
	var expected int64
	var key string
	cmd := &cobra.Command{
		Use:   "apply FILE [--expected-generation N]",
		Short: "Publish a configuration file as the daemon's next generation (admin)",
		Long: `Publish a configuration file: the daemon validates it, saves it to
<state>/config.json (keeping the configuration it replaces as
config.json.last-good) and makes it the next generation, which new attempts
use at once. Needs the admin role.

--expected-generation N refuses the apply (stale_generation) if the active
generation is no longer N, so a change made by someone else since you read
it (open-conduit config get) is never overwritten. Without it, the command
reads the active generation first and applies against that.`,
		Args: oneArg("configuration FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := readDocument(args[0])
			if err != nil {
				return err
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
			res, err := c.ApplyConfig(cmd.Context(), doc, expected, "", keyOpts(key))
			if err != nil {
				if diags := client.Diagnostics(err); len(diags) > 0 && !wantJSON(cmd) {
					printValidation(s, diags, nil)
					return failf("%s was not applied; fix the problems above (check it with: open-conduit config validate %s)", args[0], args[0])
				}
				if client.IsStaleGeneration(err) {
					return failf("the active configuration is no longer generation %d: someone applied another since; read it (open-conduit config get) and apply again", expected)
				}
				return documentFailure(err, args[0], t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			for _, w := range res.Warnings {
				fmt.Fprintln(s.Out, "warning:", w)
			}
			if res.Unchanged {
				fmt.Fprintf(s.Out, "Unchanged: generation %d is already this configuration (hash %s); no generation was made.\n", res.Generation, res.Hash)
				return nil
			}
			fmt.Fprintf(s.Out, "Applied: generation %d (was %d), hash %s.\n", res.Generation, res.PreviousGeneration, res.Hash)
			return nil
		},
	}
	cmd.Flags().Int64Var(&expected, "expected-generation", 0, "apply only if this is still the active generation (default: the active one, read first)")
	keyFlag(cmd, &key)
	return cmd
}
