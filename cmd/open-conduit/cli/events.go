package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newEventsCmd) }

func newEventsCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List and show Events, and the causal chain of one",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("list, get ID, chain ID"),
	}
	cmd.AddCommand(newEventsListCmd(s), newEventsGetCmd(s), newEventsChainCmd(s))
	return cmd
}

func eventRows(items []client.Event, indent bool) [][]string {
	rows := [][]string{{"SEQ", "ID", "TYPE", "SOURCE", "SCOPE", "KEY", "ACCEPTED"}}
	for _, e := range items {
		typ := e.Type
		if indent {
			typ = strings.Repeat("  ", e.Depth) + typ
		}
		rows = append(rows, []string{itoa(e.Seq), e.ID, typ, e.Source, e.Scope, or(e.CorrelationKey, "-"), when(e.AcceptedAt)})
	}
	return rows
}

func newEventsListCmd(s Streams) *cobra.Command {
	var f client.EventFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list [--scope S] [--work W] [--execution E] [--type T] [--root EVT] [--correlation-key K]",
		Short: "List Events in the order they were accepted",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			f.Page = lf.page()
			list, err := c.ListEvents(cmd.Context(), f)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, list.Raw)
			}
			if err := printLines(s.Out, eventRows(list.Items, false)); err != nil {
				return err
			}
			printNext(s, cmd, list.NextCursor)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Scope, "scope", "", "only Events of this scope")
	fl.StringVar(&f.Work, "work", "", "only Events about this Work")
	fl.StringVar(&f.Execution, "execution", "", "only Events this execution emitted")
	fl.StringVar(&f.Type, "type", "", "only Events of this type")
	fl.StringVar(&f.Root, "root", "", "only Events of the causal chain with this root")
	fl.StringVar(&f.CorrelationKey, "correlation-key", "", "only Events with this correlation key")
	lf.add(cmd)
	return cmd
}

func newEventsGetCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one Event, with its data",
		Args:  oneArg("Event ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			e, err := c.GetEvent(cmd.Context(), args[0], nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, e.Raw)
			}
			rows := [][]string{
				{"event", e.ID}, {"seq", itoa(e.Seq)}, {"type", e.Type}, {"source", e.Source}, {"scope", e.Scope},
				{"work", or(e.Work, "-")}, {"execution", or(e.Execution, "-")}, {"correlation key", or(e.CorrelationKey, "-")},
				{"parent", or(e.Parent, "-")}, {"root", e.Root}, {"depth", itoa(int64(e.Depth))}, {"actor", or(e.Actor, "-")},
				{"accepted", when(e.AcceptedAt)}, {"data", string(e.Data)},
			}
			return printLines(s.Out, rows)
		},
	}
}

func newEventsChainCmd(s Streams) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "chain ID",
		Short: "Show the causal chain an Event belongs to: its root and everything derived from it",
		Long: `Show the causal tree an Event belongs to: the root of its chain and every
Event derived from that root, in the order they were accepted, each
indented by its depth (its parent is the nearest less indented Event above).`,
		Args: oneArg("Event ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			list, err := c.EventChain(cmd.Context(), args[0], lf.page())
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, list.Raw)
			}
			if err := printLines(s.Out, eventRows(list.Items, true)); err != nil {
				return err
			}
			printNext(s, cmd, list.NextCursor)
			return nil
		},
	}
	lf.add(cmd)
	return cmd
}
