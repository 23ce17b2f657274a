package cli

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newRouteCmd) }

func newRouteCmd(s Streams) *cobra.Command {
	var scope, data string
	var samples bool
	var ev client.TraceRequest
	cmd := &cobra.Command{
		Use:   "route --scope S (--trace TYPE|SAMPLE [--source SRC] [--correlation-key K] [--work-id W] [--data JSON|@FILE|-] | --samples)",
		Short: "Show how a scope's routes would handle an Event, without sending it",
		Long: `--trace TYPE asks the daemon how the scope's routes would handle an Event
of that type now, against the active configuration and the current Work:
each route's verdict and why, the Work the Event resolves to, and the
effect (start, queue, inject, interrupt, wake, drop or unmatched). Nothing
is sent or recorded.
The source defaults to core.manual. --samples lists the named sample Events
the scope's routes (a route's "samples" in the configuration) and ingresses
offer; --trace SAMPLE, a name without a dot, traces that sample's Event
(--source, --correlation-key and --data replace its own).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if scope == "" || (ev.Type == "") == !samples {
				return usagef("route needs --scope and exactly one of --trace TYPE or --samples (see 'open-conduit route --help')")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			if samples {
				list, err := c.RouteSamples(cmd.Context(), scope)
				if err != nil {
					return clientFailure(err, t)
				}
				if wantJSON(cmd) {
					return printRaw(s.Out, list.Raw)
				}
				if len(list.Items) == 0 {
					fmt.Fprintf(s.Out, "The route handlers of scope %s offer no sample events.\n", scope)
				}
				for _, sm := range list.Items {
					fmt.Fprintf(s.Out, "%s\t%s\t%s\n", sm.Name, cmp.Or(sm.Route, "-"), sm.Event)
				}
				return nil
			}
			if ev.Data, err = jsonObject(s, "--data", data); err != nil {
				return err
			}
			if !strings.Contains(ev.Type, ".") {
				// An event type has a dot; a sample's name never does.
				ev.Sample, ev.Type = ev.Type, ""
			}
			tr, err := c.TraceRoute(cmd.Context(), scope, ev)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, tr.Raw)
			}
			d := tr.Decision
			rows := [][]string{{"ROUTE", "VERDICT", "REASON"}}
			for _, r := range d.Routes {
				rows = append(rows, []string{r.Route, r.Verdict, r.Reason})
			}
			if len(d.Routes) > 0 {
				if err := printLines(s.Out, rows); err != nil {
					return err
				}
				fmt.Fprintln(s.Out)
			}
			if d.Work != "" {
				fmt.Fprintf(s.Out, "resolves to Work %s (%s)\n", d.Work, d.WorkState)
			}
			fmt.Fprintf(s.Out, "effect: %s: %s\n", d.Effect, d.Detail)
			for _, w := range d.OtherWakes {
				fmt.Fprintf(s.Out, "also wakes Work %s (wait %s): %s\n", w.Work, w.Wait, w.Reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scope, "scope", "", "the scope whose routes to ask")
	f.StringVar(&ev.Type, "trace", "", "the type of the hypothetical event, or the name of a sample")
	f.StringVar(&ev.Source, "source", "", "its source (default core.manual)")
	f.StringVar(&ev.CorrelationKey, "correlation-key", "", "its correlation key")
	f.StringVar(&ev.WorkID, "work-id", "", "the Work it is about (resolves it to that Work)")
	f.StringVar(&data, "data", "", "its data: a JSON object, @FILE or - for standard input")
	f.BoolVar(&samples, "samples", false, "list the sample events the scope's route handlers offer")
	return cmd
}
