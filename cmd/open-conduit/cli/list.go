package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

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
	return runListWide(cmd, s, fetch, header, row, listExtra[T]{})
}

// listExtra is what a main list (work, events, executions, waits, runs)
// adds: the columns of -o wide, when an item was made, for --since and
// --all, and, for --watch, an item's version.
type listExtra[T any] struct {
	wideHeader []string
	wideRow    func(T) []string
	created    func(T) time.Time
	// version is what --watch compares to see that an item changed (its
	// JSON when nil); a value the daemon recomputes at each read (a
	// running attempt's duration) is left out of it.
	version func(T) string
}

// runListWide is runList with a main list's extras. With --all it follows
// the cursors to the end of the listing; with --since it reads newest
// first until an item older than that (and prints them in the order asked,
// --reverse oldest first). Either prints one table, or with --json one
// {"items"} object, and no cursor. With --watch it then goes on printing
// each item that appears or changes (watchList).
func runListWide[T any](cmd *cobra.Command, s Streams, fetch func(*client.Client, context.Context) (*client.List[T], error), header []string, row func(T) []string,
	extra listExtra[T]) error {
	out, _ := outputFormat(cmd)
	all, _ := cmd.Flags().GetBool("all")
	watch, _ := cmd.Flags().GetBool("watch")
	since, err := sinceFlag(cmd, time.Now())
	if err != nil {
		return err
	}
	c, t, err := newClient(cmd)
	if err != nil {
		return err
	}
	list, err := fetch(c, cmd.Context())
	if err != nil {
		return clientFailure(err, t)
	}
	if extra.created != nil && (all || !since.IsZero()) {
		list, err = followList(cmd, c, list, fetch, extra.created, since)
		if err != nil {
			return clientFailure(err, t)
		}
	}
	raws, err := listItems(list)
	if err != nil {
		return err
	}
	p := listPrinter[T]{s: s, out: out, json: wantJSON(cmd), header: header, row: row}
	if out == "wide" && extra.wideRow != nil {
		p.header = append(append([]string(nil), header...), extra.wideHeader...)
		p.wideRow = extra.wideRow
	}
	if watch {
		if err := p.print(list.Items, raws, true); err != nil {
			return err
		}
		reverse, _ := cmd.Flags().GetBool("reverse")
		return watchList(cmd, c, t, fetch, p, list.Items, raws, extra, since, reverse && !all && since.IsZero())
	}
	if p.json {
		return printRaw(s.Out, list.Raw)
	}
	if err := p.print(list.Items, raws, true); err != nil {
		return err
	}
	printNext(s, cmd, list.NextCursor)
	return nil
}

// listItems is each item of a list as the API sent it.
func listItems[T any](list *client.List[T]) ([]json.RawMessage, error) {
	var page struct{ Items []json.RawMessage }
	if err := json.Unmarshal(list.Raw, &page); err != nil || len(page.Items) != len(list.Items) {
		return nil, failf("the daemon's list is not the JSON it should be")
	}
	return page.Items, nil
}

// listPrinter prints a list's items as the command's output asks: a table
// (with the wide columns for -o wide), one id per line for -o name, or,
// for --watch --json, one item's JSON per line.
type listPrinter[T any] struct {
	s       Streams
	out     string
	json    bool
	header  []string
	row     func(T) []string
	wideRow func(T) []string
}

func (p listPrinter[T]) print(items []T, raws []json.RawMessage, withHeader bool) error {
	switch {
	case p.json:
		for _, raw := range raws {
			if err := printRaw(p.s.Out, compactJSON(raw)); err != nil {
				return err
			}
		}
		return nil
	case p.out == "name":
		for i, raw := range raws {
			fmt.Fprintln(p.s.Out, itemName(raw, p.row(items[i])))
		}
		return nil
	}
	rows := make([][]string, 0, len(items)+1)
	if withHeader {
		rows = append(rows, p.header)
	}
	for _, item := range items {
		r := p.row(item)
		if p.wideRow != nil {
			r = append(r, p.wideRow(item)...)
		}
		rows = append(rows, r)
	}
	return printLines(p.s.Out, rows)
}

// followList reads the pages after first to the end of the listing (or,
// with since, until an item made before it, the listing running newest
// first), and returns them as one list whose Raw is {"items":[…]}. With
// since and --reverse the items are turned oldest first.
func followList[T any](cmd *cobra.Command, c *client.Client, first *client.List[T], fetch func(*client.Client, context.Context) (*client.List[T], error),
	created func(T) time.Time, since time.Time) (*client.List[T], error) {
	var items []T
	var raws []json.RawMessage
	list := first
	for {
		var page struct{ Items []json.RawMessage }
		if err := json.Unmarshal(list.Raw, &page); err != nil || len(page.Items) != len(list.Items) {
			return nil, fmt.Errorf("the daemon's list is not the JSON it should be")
		}
		older := false
		for i, it := range list.Items {
			if !since.IsZero() && created(it).Before(since) {
				older = true
				break
			}
			items, raws = append(items, it), append(raws, page.Items[i])
		}
		if older || list.NextCursor == "" {
			break
		}
		if err := cmd.Flags().Set("cursor", list.NextCursor); err != nil {
			return nil, err
		}
		next, err := fetch(c, cmd.Context())
		if err != nil {
			return nil, err
		}
		list = next
	}
	if reverse, _ := cmd.Flags().GetBool("reverse"); reverse && !since.IsZero() {
		slices.Reverse(items)
		slices.Reverse(raws)
	}
	if raws == nil {
		raws = []json.RawMessage{}
	}
	raw, err := json.Marshal(struct {
		Items []json.RawMessage `json:"items"`
	}{raws})
	if err != nil {
		return nil, err
	}
	out := &client.List[T]{Raw: raw}
	out.Items = items
	return out, nil
}

// sinceFlag reads --since against now: a duration back from now (90m,
// 24h) or an RFC 3339 time; zero without the flag.
func sinceFlag(cmd *cobra.Command, now time.Time) (time.Time, error) {
	v, err := cmd.Flags().GetString("since")
	if err != nil || v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--since must be a duration back from now (90m, 24h) or a time in RFC 3339 form (2026-01-02T15:04:05Z)")
}

// listFlags are the paging flags of every list command; a main list's
// (addMain) also choose its order and how far to read.
type listFlags struct {
	limit  int
	cursor string
	// main lists run newest first unless reverse (or since is given,
	// which reads newest first whatever the order printed).
	main, reverse, all bool
	since              string
}

func (f *listFlags) add(cmd *cobra.Command) {
	addOutputFlag(cmd)
	cmd.Flags().IntVar(&f.limit, "limit", 0, "how many to list, 1 to 500 (default 50)")
	cmd.Flags().StringVar(&f.cursor, "cursor", "", "continue a listing where the previous page ended (its next cursor)")
}

// addMain adds the flags of a main list: --reverse, --all, --since.
func (f *listFlags) addMain(cmd *cobra.Command) {
	f.add(cmd)
	f.main = true
	cmd.Flags().BoolVar(&f.reverse, "reverse", false, "oldest first (the default is newest first)")
	cmd.Flags().BoolVar(&f.all, "all", false, "follow the cursors to the end of the listing and print it whole")
	cmd.Flags().StringVar(&f.since, "since", "", "only those made since then: a duration back from now (90m, 24h) or a time (2026-01-02T15:04:05Z); reads every page back to then")
	addWatchFlag(cmd)
}

func (f *listFlags) page() client.Page {
	return client.Page{Limit: f.limit, Cursor: f.cursor, Desc: f.main && (!f.reverse || f.since != "")}
}

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
