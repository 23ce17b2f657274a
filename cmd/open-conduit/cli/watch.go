package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// --watch of the main lists, as kubectl get -w: after the listing, each
// item that appears or changes is printed again, until Ctrl-C or the
// daemon stops answering. The management API has no push channel for
// lists, so the command reads the newest page again at each tick.

// watchInterval is how often --watch reads the list again.
var watchInterval = time.Second

// watchTicks starts the ticker --watch reads on; tests replace it with a
// channel they drive.
var watchTicks = func() (<-chan time.Time, func()) {
	t := time.NewTicker(watchInterval)
	return t.C, t.Stop
}

// addWatchFlag adds --watch (-w) to a main list.
func addWatchFlag(cmd *cobra.Command) {
	cmd.Flags().BoolP("watch", "w", false, "after the listing, print each item again as it appears or changes, until Ctrl-C (with --json, one item per line)")
}

// watchList follows a listing already printed (items, raws): at each tick
// it reads the newest page (the filters and --limit as given, newest
// first, from the start) and prints, oldest first, each item it has not
// printed yet or whose version changed since. It returns when the context
// ends (Ctrl-C: exit 130) or a read fails (the daemon went away: that
// failure).
func watchList[T any](cmd *cobra.Command, c *client.Client, t target, fetch func(*client.Client, context.Context) (*client.List[T], error),
	p listPrinter[T], items []T, raws []json.RawMessage, extra listExtra[T], since time.Time, partial bool) error {
	ctx := cmd.Context()
	version := extra.version
	key := func(item T, raw json.RawMessage) (string, string) {
		id := itemName(raw, p.row(item))
		if version != nil {
			return id, version(item)
		}
		return id, string(compactJSON(raw))
	}
	seen := map[string]string{}
	for i, item := range items {
		id, v := key(item, raws[i])
		seen[id] = v
	}
	// Each read starts from the newest item: no cursor, and newest first
	// whatever the listing's order (a flag the list lacks is left alone).
	_ = cmd.Flags().Set("reverse", "false")
	read := func() (*client.List[T], []json.RawMessage, error) {
		_ = cmd.Flags().Set("cursor", "")
		list, err := fetch(c, ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, failf("stopped watching")
			}
			return nil, nil, clientFailure(err, t)
		}
		page, err := listItems(list)
		return list, page, err
	}
	if partial {
		// The listing printed was not the newest page (--reverse): what the
		// newest page holds now is where the watch starts, not news.
		list, page, err := read()
		if err != nil {
			return err
		}
		for i, item := range list.Items {
			if id, v := key(item, page[i]); !has(seen, id) {
				seen[id] = v
			}
		}
	}
	ticks, stop := watchTicks()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return failf("stopped watching")
		case <-ticks:
		}
		list, page, err := read()
		if err != nil {
			return err
		}
		var newItems []T
		var newRaws []json.RawMessage
		for i, item := range list.Items {
			if !since.IsZero() && extra.created != nil && extra.created(item).Before(since) {
				continue
			}
			id, v := key(item, page[i])
			if old, ok := seen[id]; ok && old == v {
				continue
			}
			seen[id] = v
			newItems, newRaws = append(newItems, item), append(newRaws, page[i])
		}
		// The page runs newest first; the stream runs in time.
		slices.Reverse(newItems)
		slices.Reverse(newRaws)
		if len(newItems) > 0 {
			if err := p.print(newItems, newRaws, false); err != nil {
				return err
			}
		}
	}
}

// compactJSON is raw on one line (as it came when it does not parse).
func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

func has(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
