package cli

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newActionsCmd, newActCmd) }

// newActionsCmd is `actions`, which lists as `actions list` does.
func newActionsCmd(s Streams) *cobra.Command {
	cmd := newActionsListCmd(s, "actions")
	cmd.AddCommand(newActionsListCmd(s, "list"))
	return cmd
}

func newActionsListCmd(s Streams, use string) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   use,
		Short: "List the actions extensions offer operators",
		Long: `List every action the daemon's extensions register, by name, with what it
does. Run one with 'open-conduit act NAME --scope S'; --json shows each
action's input schema too.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd, s, (*client.Client).Actions, []string{"NAME", "SUMMARY"}, func(a client.Action) []string {
				return []string{a.Name, a.Summary}
			})
		},
	})
}

func newActCmd(s Streams) *cobra.Command {
	var req client.ActRequest
	var input, key string
	cmd := &cobra.Command{
		Use:   "act NAME --scope S [--work W] [--input JSON|@FILE|-]",
		Short: "Run an extension's action as yourself",
		Long: `Run the action NAME (see 'open-conduit actions') in a scope, optionally about
one of its Work, with an input object. The daemon records the request as a
core.action Event with you as its actor before the action runs, and the
action is told it is you who asked. The command prints the Event and the
action's result. The input is recorded on the Event: never pass a secret.`,
		Args: oneArg("action NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Scope == "" {
				return usagef("act needs --scope: the scope the action is taken in (open-conduit scopes lists them)")
			}
			obj, err := jsonObject(s, "--input", input)
			if err != nil {
				return err
			}
			req.Input = obj
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.Act(cmd.Context(), args[0], req, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			about := ""
			if res.Event.Work != "" {
				about = ", about Work " + res.Event.Work
			}
			fmt.Fprintf(s.Out, "Ran action %s in scope %s%s, recorded as event %s by %s.\n", args[0], res.Event.Scope, about, res.Event.ID, res.Event.Actor)
			switch {
			case res.Replayed:
				fmt.Fprintln(s.Out, "(an earlier request with the same idempotency key ran it; this is its answer, nothing ran again)")
			case res.Existing:
				fmt.Fprintln(s.Out, "(an earlier request with the same idempotency key recorded it; the action ran again for that request)")
			}
			var result bytes.Buffer
			if err := json.Indent(&result, res.Result, "", "  "); err != nil {
				result.Reset()
				result.Write(res.Result)
			}
			fmt.Fprintf(s.Out, "Result:\n%s\n", result.Bytes())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Scope, "scope", "", "the scope the action is taken in")
	f.StringVar(&req.Work, "work", "", "a Work of the scope the action is about")
	f.StringVar(&input, "input", "", "the action's input: a JSON object, @FILE or - for standard input")
	keyFlag(cmd, &key)
	return cmd
}
