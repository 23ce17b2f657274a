package cli

import (
	"context"
	"strings"
	"time"

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

// eventHeader and eventRow are the table of events list and chain; chain
// indents each type by the Event's depth.
var eventHeader = []string{"SEQ", "ID", "TYPE", "SOURCE", "SCOPE", "KEY", "ACCEPTED"}

// eventWideHeader and eventWideRow are the columns -o wide adds to events
// list and chain.
var eventWideHeader = []string{"WORK", "EXECUTION", "ACTOR", "PARENT", "DEPTH"}

func eventWideRow(e client.Event) []string {
	return []string{or(e.Work, "-"), or(e.Execution, "-"), or(e.Actor, "-"), or(e.Parent, "-"), itoa(int64(e.Depth))}
}

func eventRow(indent bool) func(client.Event) []string {
	return func(e client.Event) []string {
		typ := e.Type
		if indent {
			typ = strings.Repeat("  ", e.Depth) + typ
		}
		return []string{itoa(e.Seq), e.ID, typ, e.Source, e.Scope, or(e.CorrelationKey, "-"), when(e.AcceptedAt)}
	}
}

func newEventsListCmd(s Streams) *cobra.Command {
	var f client.EventFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list [--scope S] [--work W] [--execution E] [--type T] [--root EVT] [--correlation-key K]",
		Short: "List Events, the newest accepted first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Event], error) {
				f.Page = lf.page()
				return c.ListEvents(ctx, f)
			}, eventHeader, eventRow(false), listExtra[client.Event]{eventWideHeader, eventWideRow, func(e client.Event) time.Time { return e.AcceptedAt }, nil})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Scope, "scope", "", "only Events of this scope")
	fl.StringVar(&f.Work, "work", "", "only Events about this Work")
	fl.StringVar(&f.Execution, "execution", "", "only Events this execution emitted")
	fl.StringVar(&f.Type, "type", "", "only Events of this type")
	fl.StringVar(&f.Root, "root", "", "only Events of the causal chain with this root")
	fl.StringVar(&f.CorrelationKey, "correlation-key", "", "only Events with this correlation key")
	lf.addMain(cmd)
	return cmd
}

func newEventsGetCmd(s Streams) *cobra.Command {
	return withOutput(&cobra.Command{
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
			if done, err := printAs(cmd, s.Out, e.Raw, e.ID); done {
				return err
			}
			rows := [][]string{
				{"event", e.ID}, {"seq", itoa(e.Seq)}, {"type", e.Type}, {"source", e.Source}, {"scope", e.Scope},
				{"work", or(e.Work, "-")}, {"execution", or(e.Execution, "-")}, {"correlation key", or(e.CorrelationKey, "-")},
				{"parent", or(e.Parent, "-")}, {"root", e.Root}, {"depth", itoa(int64(e.Depth))}, {"actor", or(e.Actor, "-")},
				{"accepted", when(e.AcceptedAt)}, {"data", string(e.Data)},
			}
			return printLines(s.Out, rows)
		},
	})
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
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Event], error) {
				return c.EventChain(ctx, args[0], lf.page())
			}, eventHeader, eventRow(true), listExtra[client.Event]{wideHeader: eventWideHeader, wideRow: eventWideRow})
		},
	}
	lf.add(cmd)
	return cmd
}
