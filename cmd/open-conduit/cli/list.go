package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// Shared body of the list commands (work, events, executions, waits,
// artifacts, toolbelt calls, scopes, auth operators).

// runList runs a list command: fetch reads one page through the client;
// --json prints the API's response as it came, otherwise a table of header
// and one row per item, and, when there is a next page, how to read it (on
// the error stream). A failure of the client is reported by clientFailure.
func runList[T any](cmd *cobra.Command, s Streams, fetch func(*client.Client, context.Context) (*client.List[T], error), header []string, row func(T) []string) error {
	c, t, err := newClient(cmd)
	if err != nil {
		return err
	}
	list, err := fetch(c, cmd.Context())
	if err != nil {
		return clientFailure(err, t)
	}
	if wantJSON(cmd) {
		return printRaw(s.Out, list.Raw)
	}
	rows := make([][]string, 0, len(list.Items)+1)
	rows = append(rows, header)
	for _, item := range list.Items {
		rows = append(rows, row(item))
	}
	if err := printLines(s.Out, rows); err != nil {
		return err
	}
	printNext(s, cmd, list.NextCursor)
	return nil
}

// listFlags are the paging flags of every list command.
type listFlags struct {
	limit  int
	cursor string
}

func (f *listFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.limit, "limit", 0, "how many to list, 1 to 500 (default 50)")
	cmd.Flags().StringVar(&f.cursor, "cursor", "", "continue a listing where the previous page ended (its next cursor)")
}

func (f *listFlags) page() client.Page { return client.Page{Limit: f.limit, Cursor: f.cursor} }

// printNext tells people how to see the next page, on the error stream so
// that the table stays clean.
func printNext(s Streams, cmd *cobra.Command, next string) {
	if next != "" {
		fmt.Fprintf(s.Err, "more: %s --cursor %s (with the same filters)\n", cmd.CommandPath(), next)
	}
}
