package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/open-conduit/open-conduit/client"
)

// What a view shows comes from the daemon through the public client only:
// each refresh reads the current view's list again (every page, up to
// maxItems, since the API lists oldest first and the views show the newest
// first) and the daemon's health.

// maxItems bounds what one list view reads.
const maxItems = 1000

// pageSize is the page a view reads at a time.
const pageSize = 200

// requestTimeout bounds one refresh's or action's requests, so a daemon
// that stops answering is reported rather than waited on.
const requestTimeout = 10 * time.Second

// row is one line of a list view: the record's id and its cells.
type row struct {
	id    string
	cells []string
	// work is the Work the row is about ("" for none); scope its scope.
	work, scope string
	// extra holds what actions on the row need (the approval's id).
	state string
}

// table is what a list view shows.
type table struct {
	title   string
	header  []string
	rows    []row
	caption string
}

// dataMsg delivers a view's refreshed table; key says which view and
// parameter it was read for, so an answer for a view left since is
// dropped.
type dataMsg struct {
	key   string
	table table
	err   error
}

// healthMsg delivers the daemon's health.
type healthMsg struct {
	health *client.Health
	err    error
}

// collect reads every page of a list, up to maxItems.
func collect[T any](ctx context.Context, list func(client.Page) (*client.List[T], error)) ([]T, error) {
	var out []T
	p := client.Page{Limit: pageSize}
	for {
		l, err := list(p)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.NextCursor == "" || len(out) >= maxItems {
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.Cursor = l.NextCursor
	}
}

// newestFirst reverses a list the API gave oldest first.
func newestFirst[T any](items []T) []T {
	slices.Reverse(items)
	return items
}

func healthCmd(c *client.Client) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		h, err := c.Health(ctx)
		return healthMsg{health: h, err: err}
	}
}

// fetchCmd reads the table of the frame f.
func fetchCmd(c *client.Client, f frame) tea.Cmd {
	key := f.key()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		t, err := fetch(ctx, c, f)
		return dataMsg{key: key, table: t, err: err}
	}
}

func fetch(ctx context.Context, c *client.Client, f frame) (table, error) {
	switch f.view {
	case viewWork:
		items, err := collect(ctx, func(p client.Page) (*client.List[client.Work], error) {
			return c.ListWork(ctx, client.WorkFilter{Page: p})
		})
		if err != nil {
			return table{}, err
		}
		t := table{title: "Work", header: []string{"WORK", "STATE", "SCOPE", "BINDING", "ATTEMPTS", "HELD OR WAITING", "CREATED"}}
		for _, w := range newestFirst(items) {
			t.rows = append(t.rows, row{id: w.ID, work: w.ID, scope: w.Scope, state: w.State,
				cells: []string{w.ID, w.State, w.Scope, w.Binding, strconv.Itoa(w.Attempts), held(w), when(w.CreatedAt)}})
		}
		return t, nil
	case viewExecutions:
		w, err := c.GetWork(ctx, f.work, nil)
		if err != nil {
			return table{}, err
		}
		items, err := collect(ctx, func(p client.Page) (*client.List[client.Execution], error) {
			return c.ListExecutions(ctx, client.ExecutionFilter{Work: f.work, Page: p})
		})
		if err != nil {
			return table{}, err
		}
		t := table{title: "Executions of Work " + f.work, header: []string{"EXECUTION", "STATE", "RESULT", "EXIT", "BINDING", "EPOCH", "CREATED"},
			caption: fmt.Sprintf("Work %s is %s in scope %s, binding %s%s", w.ID, w.State, w.Scope, w.Binding, heldSuffix(w.Work.BlockedReason, w.BlockedDetail))}
		for _, e := range newestFirst(items) {
			exit := "-"
			if e.ExitCode != nil {
				exit = strconv.Itoa(*e.ExitCode)
			}
			t.rows = append(t.rows, row{id: e.ID, work: e.Work, scope: e.Scope, state: e.State,
				cells: []string{e.ID, e.State, dash(e.Result), exit, e.Binding, strconv.FormatInt(e.Epoch, 10), when(e.CreatedAt)}})
		}
		return t, nil
	case viewWaits:
		items, err := collect(ctx, func(p client.Page) (*client.List[client.Wait], error) {
			return c.ListWaits(ctx, client.WaitFilter{Page: p})
		})
		if err != nil {
			return table{}, err
		}
		t := table{title: "Waits", header: []string{"WAIT", "STATE", "WORK", "TYPES", "KEYS", "GATE", "TIMEOUT"}}
		for _, w := range newestFirst(items) {
			timeout := "-"
			if !w.TimeoutAt.IsZero() {
				timeout = when(w.TimeoutAt)
			}
			keys := strings.Join(w.Keys, ",")
			if w.OnWorkKeys {
				keys = strings.Join(append([]string{"(Work's keys)"}, w.Keys...), ",")
			}
			t.rows = append(t.rows, row{id: w.ID, work: w.Work, scope: w.Scope, state: w.State,
				cells: []string{w.ID, w.State, w.Work, dash(strings.Join(w.Types, ",")), dash(keys), dash(w.Registration), timeout}})
		}
		return t, nil
	case viewEvents:
		items, err := collect(ctx, func(p client.Page) (*client.List[client.Event], error) {
			return c.ListEvents(ctx, client.EventFilter{Page: p})
		})
		if err != nil {
			return table{}, err
		}
		t := table{title: "Events", header: []string{"SEQ", "EVENT", "TYPE", "SOURCE", "SCOPE", "WORK", "DEPTH", "ACCEPTED"}}
		for _, e := range newestFirst(items) {
			t.rows = append(t.rows, eventRow(e, e.Type))
		}
		return t, nil
	case viewChain:
		ev, err := c.GetEvent(ctx, f.event, nil)
		if err != nil {
			return table{}, err
		}
		items, err := collect(ctx, func(p client.Page) (*client.List[client.Event], error) {
			return c.EventChain(ctx, f.event, p)
		})
		if err != nil {
			return table{}, err
		}
		t := table{title: "Causal chain of " + f.event, header: []string{"SEQ", "EVENT", "TYPE", "SOURCE", "SCOPE", "WORK", "DEPTH", "ACCEPTED"},
			caption: fmt.Sprintf("Event %s (%s): root %s, parent %s, depth %d", ev.ID, ev.Type, ev.Root, dash(ev.Parent), ev.Depth)}
		for _, e := range items {
			mark := "  "
			if e.ID == f.event {
				mark = "▶ "
			}
			t.rows = append(t.rows, eventRow(e, mark+strings.Repeat("  ", e.Depth)+e.Type))
		}
		return t, nil
	case viewApprovals:
		list, err := pendingApprovals(ctx, c)
		if err != nil {
			return table{}, err
		}
		t := table{title: "Pending approvals", header: []string{"APPROVAL", "SCOPE", "WORK", "KIND", "OPERATION", "BINDING", "EXPIRES"}}
		for _, a := range list {
			t.rows = append(t.rows, row{id: a.ID, work: a.Work, scope: a.Scope, state: a.State,
				cells: []string{a.ID, a.Scope, a.Work, a.Kind, dash(a.Operation), dash(a.Binding), dash(a.ExpiresAt)}})
		}
		return t, nil
	}
	return table{}, nil
}

func eventRow(e client.Event, typ string) row {
	return row{id: e.ID, work: e.Work, scope: e.Scope,
		cells: []string{strconv.FormatInt(e.Seq, 10), e.ID, typ, e.Source, e.Scope, dash(e.Work), strconv.Itoa(e.Depth), when(e.AcceptedAt)}}
}

func held(w client.Work) string {
	switch {
	case w.BlockedReason != "":
		return w.BlockedReason + ": " + w.BlockedDetail
	case w.WaitReason != "":
		return "waiting on " + w.WaitReason
	}
	return "-"
}

func heldSuffix(reason, detail string) string {
	if reason == "" {
		return ""
	}
	return "; held (" + reason + "): " + detail
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// approval is an approval as the human extension's actions answer it.
type approval struct {
	ID        string `json:"id"`
	Scope     string `json:"scope"`
	Work      string `json:"work"`
	Binding   string `json:"binding,omitempty"`
	Kind      string `json:"kind"`
	Operation string `json:"operation,omitempty"`
	State     string `json:"state"`
	Actor     string `json:"actor,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

// pendingApprovals asks every active scope for its pending approvals
// (human.list); a scope the human extension does not serve is skipped.
func pendingApprovals(ctx context.Context, c *client.Client) ([]approval, error) {
	scopes, err := collect(ctx, func(p client.Page) (*client.List[client.Scope], error) { return c.Scopes(ctx, p) })
	if err != nil {
		return nil, err
	}
	input, _ := json.Marshal(map[string]string{"state": "pending"})
	out := []approval{}
	for _, sc := range scopes {
		if !sc.Active {
			continue
		}
		res, err := c.Act(ctx, "human.list", client.ActRequest{Scope: sc.ID, Input: input}, nil)
		if notServed(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var body struct {
			Approvals []approval `json:"approvals"`
		}
		if err := json.Unmarshal(res.Result, &body); err != nil {
			return nil, errors.New("the human extension answered a list that does not decode")
		}
		out = append(out, body.Approvals...)
	}
	return out, nil
}

// notServed reports an action the human extension does not serve in a
// scope.
func notServed(err error) bool {
	c := client.ErrorCode(err)
	return c == "action_not_found" || c == "not_found"
}
