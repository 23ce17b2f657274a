package management_test

import (
	"context"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func runIDs(t *testing.T, c *client.Client, f client.RunFilter) (string, string) {
	t.Helper()
	l, err := c.ListRuns(context.Background(), f)
	if err != nil {
		t.Fatalf("runs %+v: %v", f, err)
	}
	var ids []string
	for _, r := range l.Items {
		ids = append(ids, r.Execution.ID)
	}
	return strings.Join(ids, " "), l.NextCursor
}

// The run history lists attempts across Work newest first, with each
// one's Work, trigger, result, exit code and duration, by its filters and
// cursor.
func TestRunHistory(t *testing.T) {
	s, _ := logStack(t)
	c := s.Client
	w1 := createWork(t, s, "k1")
	insertAttempt(t, s, w1.Work.ID, "exe_1", "shell")
	finishAttempt(t, s, "exe_1", storage.ResultSucceeded, 0, "")
	w2 := createWork(t, s, "k2")
	insertAttempt(t, s, w2.Work.ID, "exe_2", "shell")
	finishAttempt(t, s, "exe_2", storage.ResultFailed, 3, "")
	since := s.Clock.Now()
	w3 := createWork(t, s, "k3")
	insertAttempt(t, s, w3.Work.ID, "exe_3", "nightly")

	cases := []struct {
		f    client.RunFilter
		want string
	}{
		{client.RunFilter{}, "exe_3 exe_2 exe_1"},
		{client.RunFilter{State: "failed"}, "exe_2"},
		{client.RunFilter{State: "succeeded"}, "exe_1"},
		{client.RunFilter{State: "running"}, "exe_3"},
		{client.RunFilter{State: "finished"}, "exe_2 exe_1"},
		{client.RunFilter{Binding: "nightly"}, "exe_3"},
		{client.RunFilter{Scope: "setup", Binding: "shell"}, "exe_2 exe_1"},
		{client.RunFilter{Scope: "other"}, ""},
		{client.RunFilter{Since: since}, "exe_3"},
		{client.RunFilter{Work: w2.Work.ID}, "exe_2"},
	}
	for _, tc := range cases {
		if got, _ := runIDs(t, c, tc.f); got != tc.want {
			t.Errorf("runs %+v = %q, want %q", tc.f, got, tc.want)
		}
	}

	// Paging: one at a time, newest first, each page after the last.
	var all []string
	cursor := ""
	for i := 0; i < 4; i++ {
		ids, next := runIDs(t, c, client.RunFilter{Page: client.Page{Limit: 1, Cursor: cursor}})
		all = append(all, ids)
		if next == "" {
			break
		}
		cursor = next
	}
	if got := strings.Join(all, " "); got != "exe_3 exe_2 exe_1" {
		t.Errorf("paged = %q", got)
	}
	// A cursor is bound to its filters.
	_, next := runIDs(t, c, client.RunFilter{Page: client.Page{Limit: 1}})
	if _, err := c.ListRuns(context.Background(), client.RunFilter{State: "failed", Page: client.Page{Limit: 1, Cursor: next}}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("cursor under other filters: %v", err)
	}

	r, err := c.GetRun(context.Background(), "exe_2", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := r.Execution
	if e.Work != w2.Work.ID || e.Result != "failed" || e.ExitCode == nil || *e.ExitCode != 3 || r.DurationMS != 1500 ||
		r.TriggerEvent != w2.CreatedEvent.ID || r.TriggerType != "core.work.created" || r.WorkState != "ready" {
		t.Errorf("run = %+v (execution %+v)", r.Run, e)
	}
	live, err := c.GetRun(context.Background(), "exe_3", nil)
	if err != nil || live.Execution.State != "running" || live.DurationMS < 0 {
		t.Errorf("live run = %+v, %v", live, err)
	}

	tok := s.OwnerToken(t)
	for _, q := range []string{"state=done", "since=yesterday", "order=asc", "limit=501"} {
		expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/runs?" + q, token: tok}), 422, "invalid_request")
	}
	expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/runs/exe_none", token: tok}), 404, "not_found")
}
