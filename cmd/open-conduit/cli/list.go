package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// Shared body of the list commands (work, events, executions, waits,
// artifacts, toolbelt calls, scopes, auth operators).

// runList runs a list command: fetch reads one page through the client;
// --json (-o json) prints the API's response as it came, -o name one id per
// line, otherwise a table of header and one row per item, and, when there
// is a next page, how to read it (on the error stream). A failure of the
// client is reported by clientFailure.
func runList[T any](cmd *cobra.Command, s Streams, fetch func(*client.Client, context.Context) (*client.List[T], error), header []string, row func(T) []string) error {
	return runListWide(cmd, s, fetch, header, row, nil, nil)
}

// runListWide is runList with the extra columns -o wide adds.
func runListWide[T any](cmd *cobra.Command, s Streams, fetch func(*client.Client, context.Context) (*client.List[T], error), header []string, row func(T) []string,
	wideHeader []string, wideRow func(T) []string) error {
	out, _ := outputFormat(cmd)
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
	if out == "name" {
		var page struct{ Items []json.RawMessage }
		if err := json.Unmarshal(list.Raw, &page); err != nil {
			return failf("the daemon's list is not JSON: %v", err)
		}
		for i, raw := range page.Items {
			fmt.Fprintln(s.Out, itemName(raw, row(list.Items[i])))
		}
		printNext(s, cmd, list.NextCursor)
		return nil
	}
	wide := out == "wide" && wideRow != nil
	rows := make([][]string, 0, len(list.Items)+1)
	if wide {
		header = append(append([]string(nil), header...), wideHeader...)
	}
	rows = append(rows, header)
	for _, item := range list.Items {
		r := row(item)
		if wide {
			r = append(r, wideRow(item)...)
		}
		rows = append(rows, r)
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
	addOutputFlag(cmd)
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

// addOutputFlag adds -o/--output to a list or get command.
// A value it does not print is a usage error before anything is asked.
func addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringP("output", "o", "", "json (as --json), wide (more columns), or name (one id per line)")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		_, err := outputFormat(cmd)
		return err
	}
}

// outputFormat returns -o's value, refusing one the command does not
// print. yaml is refused with what to use instead: no YAML library is a
// dependency, and JSON is already YAML (1.2).
func outputFormat(cmd *cobra.Command) (string, error) {
	o, err := cmd.Flags().GetString("output")
	if err != nil {
		return "", nil
	}
	switch o {
	case "", "json", "wide", "name":
		return o, nil
	case "yaml":
		return "", usagef("-o yaml is not supported: use -o json (JSON is valid YAML 1.2), or pipe it through yq")
	}
	return "", usagef("-o must be json, wide or name, not %q", o)
}

// itemName is an item's id for -o name: its "id" member, else its
// "execution" (a run), else its "name", else the table row's first cell.
func itemName(raw json.RawMessage, row []string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"id", "execution", "name"} {
			var v string
			if json.Unmarshal(m[k], &v) == nil && v != "" {
				return v
			}
		}
	}
	if len(row) > 0 {
		return row[0]
	}
	return ""
}

// printAs prints a get command's record when -o or --json asks for it:
// the API's JSON as it came for --json (-o json), its id for -o name. It
// reports whether it printed; otherwise the command prints its text.
func printAs(cmd *cobra.Command, w io.Writer, raw []byte, id string) (bool, error) {
	out, _ := outputFormat(cmd)
	switch {
	case wantJSON(cmd):
		return true, printRaw(w, raw)
	case out == "name":
		_, err := fmt.Fprintln(w, id)
		return true, err
	}
	return false, nil
}

// withOutput adds -o to a get command.
func withOutput(cmd *cobra.Command) *cobra.Command {
	addOutputFlag(cmd)
	return cmd
}
