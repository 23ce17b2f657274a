package management_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func keyed(k string) *client.RequestOptions { return &client.RequestOptions{IdempotencyKey: k} }

func input(data string) *client.Input { return &client.Input{Data: []byte(data)} }

// createWork creates a manual Work in setup, moving the clock first so
// that creation times differ.
func createWork(t *testing.T, s *mgmttest.Stack, key string) *client.CreatedWork {
	t.Helper()
	s.Clock.Advance(time.Second)
	out, err := s.Client.CreateWork(context.Background(), client.CreateWorkRequest{Scope: "setup", Input: input(`{"n":1}`)}, keyed(key))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWorkCreate(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client

	req := client.CreateWorkRequest{Scope: "setup", Input: &client.Input{Type: "deploy.requested", Data: []byte(`{"ref":"main"}`)}, CorrelationKey: "deploy/main", Grants: []string{"extra"}}
	first, err := c.CreateWork(ctx, req, keyed("k1"))
	if err != nil {
		t.Fatal(err)
	}
	w := first.Work
	if first.Status != http.StatusCreated || first.Existing || w.State != "ready" || w.Binding != "shell" || !slices.Equal(w.Grants, []string{"extra"}) {
		t.Fatalf("created = %+v", first)
	}
	if first.CreatedEvent.Type != "core.work.created" || first.CreatedEvent.Actor != "operator:local" || first.CreatedEvent.Source != "core.manual" {
		t.Errorf("created event = %+v", first.CreatedEvent)
	}
	if in := first.InputEvent; in.Type != "deploy.requested" || in.Parent != first.CreatedEvent.ID || string(in.Data) != `{"ref":"main"}` || in.Actor != "operator:local" {
		t.Errorf("input event = %+v", in)
	}
	if owner, err := s.Store.GetKeyOwner(ctx, "setup", "deploy/main"); err != nil || owner.ID != w.ID {
		t.Errorf("correlation key owner = %v, %v", owner.ID, err)
	}

	// The same request under the same key is replayed.
	again, err := c.CreateWork(ctx, req, keyed("k1"))
	if err != nil || !again.Replayed || again.Work.ID != w.ID || !bytes.Equal(again.Raw, first.Raw) {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	// A different request under it is a conflict.
	other := req
	other.CorrelationKey = "deploy/other"
	if _, err := c.CreateWork(ctx, other, keyed("k1")); !client.IsIdempotencyConflict(err) {
		t.Fatalf("changed body under a used key: %v", err)
	}
	// A crash after the Work was created but before the response was
	// recorded: the retry derives the same Work instead of a second one.
	err = s.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.DeleteIdempotencyBefore(ctx, s.Clock.Now().Add(time.Hour))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	retry, err := c.CreateWork(ctx, req, keyed("k1"))
	if err != nil || retry.Replayed || !retry.Existing || retry.Work.ID != w.ID || retry.Status != http.StatusOK {
		t.Fatalf("retry after a lost record = %+v, %v", retry, err)
	}
	if list, _ := c.ListWork(ctx, client.WorkFilter{}); len(list.Items) != 1 {
		t.Fatalf("%d Work after retries, want 1", len(list.Items))
	}
	// Two operators using the same key never meet.
	tokFile, _ := s.AddOperator(t, "alice", management.RoleOperate)
	alice, err := s.ClientFor(tokFile).CreateWork(ctx, client.CreateWorkRequest{Scope: "setup"}, keyed("k1"))
	if err != nil || alice.Work.ID == w.ID || alice.CreatedEvent.Actor != "operator:alice" {
		t.Fatalf("alice's Work under the same key = %+v, %v", alice, err)
	}
	if alice.InputEvent.ID != alice.CreatedEvent.ID {
		t.Errorf("without an input, the Work's input is its core.work.created: %+v", alice.InputEvent)
	}

	refusals := []struct {
		name string
		req  client.CreateWorkRequest
		code string
	}{
		{"no scope", client.CreateWorkRequest{}, "invalid_request"},
		{"unknown scope", client.CreateWorkRequest{Scope: "nope"}, "invalid_request"},
		{"two bindings", client.CreateWorkRequest{Scope: "team"}, "invalid_request"},
		{"unknown binding", client.CreateWorkRequest{Scope: "setup", Binding: "nope"}, "invalid_request"},
		{"unknown grant", client.CreateWorkRequest{Scope: "setup", Grants: []string{"nope"}}, "invalid_request"},
		{"core input type", client.CreateWorkRequest{Scope: "setup", Input: &client.Input{Type: "core.manual"}}, "invalid_request"},
		{"data not an object", client.CreateWorkRequest{Scope: "setup", Input: input(`[1]`)}, "invalid_request"},
		{"taken key", client.CreateWorkRequest{Scope: "setup", CorrelationKey: "deploy/main"}, "conflict"},
	}
	for _, tc := range refusals {
		if _, err := c.CreateWork(ctx, tc.req, nil); client.ErrorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	if got, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "team", Binding: "b"}, nil); err != nil || got.Work.Binding != "b" {
		t.Errorf("naming one of two bindings: %+v, %v", got, err)
	}
}

func TestStrictResourceRequests(t *testing.T) {
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	tok := s.OwnerToken(t)
	key := map[string]string{"Idempotency-Key": "strict-1"}
	cases := []struct {
		name   string
		q      req
		status int
		code   string
	}{
		{"no key", req{method: "POST", path: "/v1/work", body: `{"scope":"setup"}`}, 400, "idempotency_key_required"},
		{"unknown field", req{method: "POST", path: "/v1/work", body: `{"scope":"setup","bogus":1}`, header: key}, 422, "invalid_request"},
		{"null", req{method: "POST", path: "/v1/work", body: `{"scope":null}`, header: key}, 422, "invalid_request"},
		{"duplicate", req{method: "POST", path: "/v1/events", body: `{"type":"a.b","type":"a.c","scope":"setup"}`, header: key}, 422, "invalid_request"},
		{"query on a post", req{method: "POST", path: "/v1/work?x=1", body: `{}`, header: key}, 422, "invalid_request"},
		{"not json", req{method: "POST", path: "/v1/config/validate", body: `{}`, noContentType: true}, 415, "unsupported_media_type"},
		{"unknown list filter", req{method: "GET", path: "/v1/work?colour=red"}, 422, "invalid_request"},
		{"repeated filter", req{method: "GET", path: "/v1/events?type=a.b&type=a.c"}, 422, "invalid_request"},
		{"bad state", req{method: "GET", path: "/v1/work?state=sleeping"}, 422, "invalid_request"},
		{"bad limit", req{method: "GET", path: "/v1/executions?limit=501"}, 422, "invalid_request"},
		{"query on a get", req{method: "GET", path: "/v1/config?x=1"}, 422, "invalid_request"},
		{"unknown work", req{method: "GET", path: "/v1/work/wrk_nope"}, 404, "not_found"},
		{"unknown execution", req{method: "POST", path: "/v1/executions/exe_nope/cancel", body: `{}`, header: key}, 404, "not_found"},
		{"unknown scope", req{method: "GET", path: "/v1/scopes/nope"}, 404, "not_found"},
		{"apply without generation", req{method: "POST", path: "/v1/config/apply", body: `{"config":{"version":1}}`, header: key}, 422, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.token = tok
			expect(t, do(t, s.Harness, tc.q), tc.status, tc.code)
		})
	}
}

func TestWorkETagAndControls(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	id := createWork(t, s, "w1").Work.ID

	got, err := c.GetWork(ctx, id, nil)
	if err != nil || got.ETag == "" || got.ID != id {
		t.Fatalf("get = %+v, %v", got, err)
	}
	same, err := c.GetWork(ctx, id, &client.RequestOptions{IfNoneMatch: got.ETag})
	if err != nil || !same.NotModified || same.ID != "" {
		t.Fatalf("unchanged read with its ETag = %+v, %v; want 304", same, err)
	}
	res, err := c.CancelWork(ctx, id, "not needed", keyed("cancel-1"))
	if err != nil || res.Work.State != "cancelled" || res.Event.Type != "core.work.cancelled" || res.Event.Actor != "operator:local" {
		t.Fatalf("cancel = %+v, %v", res, err)
	}
	changed, err := c.GetWork(ctx, id, &client.RequestOptions{IfNoneMatch: got.ETag})
	if err != nil || changed.NotModified || changed.ETag == got.ETag || changed.State != "cancelled" {
		t.Fatalf("changed read with the old ETag = %+v, %v", changed, err)
	}
	// A replayed cancel answers as the first did.
	if again, err := c.CancelWork(ctx, id, "not needed", keyed("cancel-1")); err != nil || !again.Replayed || again.Event.ID != res.Event.ID {
		t.Fatalf("replayed cancel = %+v, %v", again, err)
	}
	retried, err := c.RetryWork(ctx, id, "", keyed("retry-1"))
	if err != nil || retried.Work.State != "ready" || retried.Event.Type != "core.manual.retry" {
		t.Fatalf("retry = %+v, %v", retried, err)
	}
	// Retrying a ready, unheld Work has nothing to do.
	if _, err := c.RetryWork(ctx, id, "", nil); !client.IsConflict(err) {
		t.Errorf("retry of a ready Work: %v", err)
	}

	// Wake: a waiting Work with an active Wait on its own key.
	err = s.Store.WithTx(ctx, func(tx storage.Tx) error {
		waiting := storage.WorkWaiting
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: id, State: &waiting, Now: s.Clock.Now()}); err != nil {
			return err
		}
		last, err := tx.LastSeq(ctx)
		if err != nil {
			return err
		}
		_, err = tx.InsertWait(ctx, &storage.InsertWaitParams{ID: "wat_1", Work: id, Scope: "setup", Keys: []string{id}, Watermark: last, CreatedAt: s.Clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	woke, err := c.WakeWork(ctx, id, client.WakeRequest{Data: []byte(`{"why":"go"}`)}, keyed("wake-1"))
	if err != nil || !woke.Matched || woke.Decision.Effect != "wake" || woke.Event.Type != "core.manual.wake" || woke.Event.CorrelationKey != id {
		t.Fatalf("wake = %+v, %v", woke, err)
	}
	waits, err := c.ListWaits(ctx, client.WaitFilter{Work: id, State: "satisfied"})
	if err != nil || len(waits.Items) != 1 || waits.Items[0].SatisfiedBy != woke.Event.ID {
		t.Fatalf("satisfied waits = %+v, %v", waits, err)
	}
	if active, _ := c.ListWaits(ctx, client.WaitFilter{State: "active"}); len(active.Items) != 0 {
		t.Errorf("active waits after the wake: %+v", active.Items)
	}
	if _, err := c.WakeWork(ctx, "wrk_nope", client.WakeRequest{}, nil); !client.IsNotFound(err) {
		t.Errorf("wake of an unknown Work: %v", err)
	}
}

func TestExecutionCancel(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	id := createWork(t, s, "w1").Work.ID
	exe := insertExecution(t, s, id, "exe_1")

	got, err := c.GetExecution(ctx, exe, nil)
	if err != nil || got.State != "running" || got.ETag == "" {
		t.Fatalf("get execution = %+v, %v", got, err)
	}
	res, err := c.CancelExecution(ctx, exe, "stop it", keyed("xc-1"))
	if err != nil || res.Execution == nil || res.Execution.State != "stopping" || res.Work.BlockedReason != "operator_cancelled" {
		t.Fatalf("execution cancel = %+v, %v", res, err)
	}
	// The response was lost: the retry replays it.
	again, err := c.CancelExecution(ctx, exe, "stop it", keyed("xc-1"))
	if err != nil || !again.Replayed || again.Event.ID != res.Event.ID {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	// A second cancel under a new key finds it stopping.
	if _, err := c.CancelExecution(ctx, exe, "", keyed("xc-2")); !client.IsConflict(err) {
		t.Errorf("cancel of a stopping execution: %v", err)
	}
	if after, _ := c.GetExecution(ctx, exe, &client.RequestOptions{IfNoneMatch: got.ETag}); after.NotModified {
		t.Error("the execution's ETag did not change")
	}
	list, err := c.ListExecutions(ctx, client.ExecutionFilter{Work: id, State: "stopping"})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != exe {
		t.Errorf("stopping executions = %+v, %v", list, err)
	}
	if list, _ := c.ListExecutions(ctx, client.ExecutionFilter{State: "running"}); len(list.Items) != 0 {
		t.Errorf("running executions = %+v", list.Items)
	}
}

// insertExecution records a running attempt of a Work, as the scheduler
// would.
func insertExecution(t *testing.T, s *mgmttest.Stack, work, id string) string {
	t.Helper()
	ctx := context.Background()
	now := s.Clock.Now()
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		running := storage.WorkRunning
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: work, State: &running, AddAttempts: 1, Now: now}); err != nil {
			return err
		}
		_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: id, Work: work, Scope: "setup", Binding: "shell", Executor: "shell",
			Generation: 1, Owner: "daemon-1", LeaseExpiresAt: now.Add(time.Minute), Deadline: now.Add(time.Hour), CreatedAt: now})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestListPagination(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	var made []string
	for i := range 7 {
		made = append(made, createWork(t, s, "p"+string(rune('a'+i))).Work.ID)
	}
	var seen []string
	page, err := c.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Limit: 3}})
	if err != nil {
		t.Fatal(err)
	}
	first := page.NextCursor
	// Work created while the listing is paged never joins it.
	createWork(t, s, "late")
	for pages := 1; ; pages++ {
		for _, w := range page.Items {
			seen = append(seen, w.ID)
		}
		if page.NextCursor == "" {
			if pages != 3 {
				t.Errorf("%d pages, want 3", pages)
			}
			break
		}
		page, err = c.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Limit: 3, Cursor: page.NextCursor}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(seen, made) {
		t.Fatalf("paged %v, want %v in creation order", seen, made)
	}

	tampered := []byte(first)
	tampered[3] ^= 1
	if _, err := c.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Cursor: string(tampered)}}); client.ErrorCode(err) != "invalid_cursor" {
		t.Errorf("tampered cursor: %v", err)
	}
	if _, err := c.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Cursor: "garbage"}}); client.ErrorCode(err) != "invalid_cursor" {
		t.Errorf("not a cursor: %v", err)
	}
	if _, err := c.ListWork(ctx, client.WorkFilter{Scope: "team", Page: client.Page{Cursor: first}}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("cursor with another filter: %v", err)
	}
	if _, err := c.ListExecutions(ctx, client.ExecutionFilter{Page: client.Page{Cursor: first}}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("cursor on another endpoint: %v", err)
	}
	// A cursor survives a restart within its lifetime: the key is kept in
	// the store.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s = mgmttest.StartStack(t, mgmttest.StackOptions{StateDir: s.StateDir, Clock: s.Clock, IDs: s.IDs})
	if page, err := s.Client.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Limit: 3, Cursor: first}}); err != nil || len(page.Items) != 3 || page.Items[0].ID != made[3] {
		t.Fatalf("cursor after a restart = %+v, %v", page, err)
	}
	s.Clock.Advance(management.CursorLifetime)
	if _, err := s.Client.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Limit: 3, Cursor: first}}); client.ErrorCode(err) != "cursor_expired" {
		t.Errorf("cursor after 15 minutes: %v", err)
	}
	// Without a cursor the new Work shows up.
	if all, _ := s.Client.ListWork(ctx, client.WorkFilter{Scope: "setup", Page: client.Page{Limit: 500}}); len(all.Items) != 8 {
		t.Errorf("%d Work in a fresh listing, want 8", len(all.Items))
	}
	if none, err := s.Client.ListWork(ctx, client.WorkFilter{Scope: "team"}); err != nil || none.Items == nil || len(none.Items) != 0 || none.NextCursor != "" {
		t.Errorf("empty listing = %+v, %v", none, err)
	}
}

func TestEvents(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	root, err := c.Emit(ctx, client.EmitRequest{Scope: "setup", Type: "note.added", Data: []byte(`{"text":"hi"}`), CorrelationKey: "notes"}, keyed("e1"))
	if err != nil {
		t.Fatal(err)
	}
	ev := root.Event
	if root.Status != http.StatusCreated || ev.Source != "core.manual" || ev.Actor != "operator:local" || ev.Root != ev.ID || ev.Depth != 0 || root.Decision.Effect != "unmatched" {
		t.Fatalf("root = %+v", root)
	}
	// Derived from a readable parent: its scope and root, one deeper.
	child, err := c.Emit(ctx, client.EmitRequest{Type: "deploy.requested", Parent: ev.ID}, keyed("e2"))
	if err != nil {
		t.Fatal(err)
	}
	if ce := child.Event; ce.Parent != ev.ID || ce.Root != ev.ID || ce.Depth != 1 || ce.Scope != "setup" {
		t.Fatalf("derived = %+v", ce)
	}
	// The route starts a Work from it.
	if child.Decision.Effect != "start" || child.Decision.Started == "" {
		t.Fatalf("derived decision = %+v", child.Decision)
	}
	if again, err := c.Emit(ctx, client.EmitRequest{Type: "deploy.requested", Parent: ev.ID}, keyed("e2")); err != nil || !again.Replayed || again.Event.ID != child.Event.ID {
		t.Fatalf("replayed emit = %+v, %v", again, err)
	}
	for name, r := range map[string]client.EmitRequest{
		"unknown parent":      {Type: "a.b", Parent: "evt_nope"},
		"other scope":         {Scope: "team", Type: "a.b", Parent: ev.ID},
		"core type":           {Scope: "setup", Type: "core.manual"},
		"not namespaced":      {Scope: "setup", Type: "single"},
		"no type":             {Scope: "setup"},
		"no scope":            {Type: "a.b"},
		"inactive scope":      {Scope: "nope", Type: "a.b"},
		"data not an object":  {Scope: "setup", Type: "a.b", Data: []byte(`"x"`)},
		"upper case in types": {Scope: "setup", Type: "A.b"},
	} {
		if _, err := c.Emit(ctx, r, nil); !client.IsInvalidRequest(err) {
			t.Errorf("%s: %v, want invalid_request", name, err)
		}
	}

	got, err := c.GetEvent(ctx, ev.ID, nil)
	if err != nil || got.Type != "note.added" || string(got.Data) != `{"text":"hi"}` {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if same, _ := c.GetEvent(ctx, ev.ID, &client.RequestOptions{IfNoneMatch: got.ETag}); !same.NotModified {
		t.Error("an unchanged event was sent again")
	}
	// The chain from either end: the root, the derived event and what the
	// route derived from it (the started Work's core.work.created), by seq.
	for _, from := range []string{ev.ID, child.Event.ID} {
		chain, err := c.EventChain(ctx, from, client.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range chain.Items {
			types = append(types, e.Type)
			if e.Root != ev.ID {
				t.Errorf("chain holds an event of another root: %+v", e)
			}
		}
		if !slices.Equal(types, []string{"note.added", "deploy.requested", "core.work.created"}) {
			t.Errorf("chain from %s = %v", from, types)
		}
	}
	chain, err := c.EventChain(ctx, ev.ID, client.Page{Limit: 2})
	if err != nil || len(chain.Items) != 2 || chain.NextCursor == "" {
		t.Fatalf("chain page = %+v, %v", chain, err)
	}
	rest, err := c.EventChain(ctx, ev.ID, client.Page{Limit: 2, Cursor: chain.NextCursor})
	if err != nil || len(rest.Items) != 1 || rest.NextCursor != "" {
		t.Fatalf("chain second page = %+v, %v", rest, err)
	}
	if _, err := c.ListEvents(ctx, client.EventFilter{Page: client.Page{Cursor: chain.NextCursor}}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("a chain cursor on the list: %v", err)
	}

	list, err := c.ListEvents(ctx, client.EventFilter{Type: "deploy.requested"})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != child.Event.ID {
		t.Fatalf("by type = %+v, %v", list, err)
	}
	all, err := c.ListEvents(ctx, client.EventFilter{Scope: "setup", Page: client.Page{Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	next := all.NextCursor
	if _, err := c.Emit(ctx, client.EmitRequest{Scope: "setup", Type: "note.added"}, nil); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range all.Items {
		seqs = append(seqs, e.Seq)
	}
	for next != "" {
		page, err := c.ListEvents(ctx, client.EventFilter{Scope: "setup", Page: client.Page{Limit: 1, Cursor: next}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			seqs = append(seqs, e.Seq)
		}
		next = page.NextCursor
	}
	if !slices.Equal(seqs, []int64{1, 2, 3}) {
		t.Errorf("paged seqs %v, want 1 2 3 (the event accepted while paging left out)", seqs)
	}
	if _, err := c.GetEvent(ctx, "evt/with/slashes", nil); !client.IsNotFound(err) {
		t.Errorf("an id with slashes: %v", err)
	}
}

func TestArtifacts(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	work := createWork(t, s, "w1").Work.ID
	exe := insertExecution(t, s, work, "exe_1")
	a, err := s.Artifacts.Put(ctx, storage.Artifact{ID: "art_log", Execution: exe, Work: work, Name: "log", MediaType: "text/plain", CreatedAt: s.Clock.Now()}, strings.NewReader("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.ListArtifacts(ctx, client.ArtifactFilter{Work: work})
	if err != nil || len(list.Items) != 1 || list.Items[0].Size != 10 {
		t.Fatalf("artifacts = %+v, %v", list, err)
	}
	if none, _ := c.ListArtifacts(ctx, client.ArtifactFilter{Execution: "exe_other"}); len(none.Items) != 0 {
		t.Errorf("artifacts of another execution: %+v", none.Items)
	}
	meta, err := c.GetArtifact(ctx, a.ID, nil)
	if err != nil || meta.SHA256 != a.SHA256 || meta.ETag == "" {
		t.Fatalf("artifact = %+v, %v", meta, err)
	}
	for _, tc := range []struct {
		rng, want, contentRange string
		status                  int
	}{
		{"", "0123456789", "", 200},
		{"2-5", "2345", "bytes 2-5/10", 206},
		{"7-", "789", "bytes 7-9/10", 206},
		{"-3", "789", "bytes 7-9/10", 206},
		{"8-100", "89", "bytes 8-9/10", 206},
		{"-100", "0123456789", "bytes 0-9/10", 206},
	} {
		var buf bytes.Buffer
		got, err := c.ArtifactContent(ctx, a.ID, tc.rng, &buf)
		if err != nil || buf.String() != tc.want || got.Status != tc.status || got.ContentRange != tc.contentRange {
			t.Errorf("range %q = %q %+v, %v; want %q %d %q", tc.rng, buf.String(), got, err, tc.want, tc.status, tc.contentRange)
		}
	}
	for _, rng := range []string{"10-", "5-2", "x-y", "-0"} {
		if _, err := c.ArtifactContent(ctx, a.ID, rng, &bytes.Buffer{}); !client.IsRangeNotSatisfiable(err) {
			t.Errorf("range %q: %v, want range_not_satisfiable", rng, err)
		}
	}
	tok := s.OwnerToken(t)
	path := "/v1/artifacts/" + a.ID + "/content"
	multi := do(t, s.Harness, req{method: "GET", path: path, token: tok, header: map[string]string{"Range": "bytes=0-1,4-5"}})
	expect(t, multi, http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable")
	if multi.header.Get("Content-Range") != "bytes */10" {
		t.Errorf("416 Content-Range = %q", multi.header.Get("Content-Range"))
	}
	whole := do(t, s.Harness, req{method: "GET", path: path, token: tok})
	if whole.status != 200 || whole.header.Get("Accept-Ranges") != "bytes" || whole.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("whole = %d %v", whole.status, whole.header)
	}
	cached := do(t, s.Harness, req{method: "GET", path: path, token: tok, header: map[string]string{"If-None-Match": whole.header.Get("ETag")}})
	if cached.status != http.StatusNotModified || len(cached.body) != 0 {
		t.Errorf("content with its ETag = %d %q", cached.status, cached.body)
	}
	stale := do(t, s.Harness, req{method: "GET", path: path, token: tok, header: map[string]string{"Range": "bytes=0-1", "If-Range": `"other"`}})
	if stale.status != 200 || string(stale.body) != "0123456789" {
		t.Errorf("range with a stale If-Range = %d %q, want the whole body", stale.status, stale.body)
	}
	if _, err := c.ArtifactContent(ctx, "art_nope", "", &bytes.Buffer{}); !client.IsNotFound(err) {
		t.Errorf("unknown artifact: %v", err)
	}
}

func TestScopesAndTrace(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	list, err := c.Scopes(ctx, client.Page{})
	if err != nil || len(list.Items) != 2 || list.Items[0].ID != "setup" || list.Items[1].Parent != "setup" {
		t.Fatalf("scopes = %+v, %v", list, err)
	}
	setup, err := c.Scope(ctx, "setup", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !setup.Active || setup.Generation != 1 || len(setup.Bindings) != 1 || setup.Bindings[0].Secrets["TOKEN"] != "canary" ||
		!slices.Equal(setup.Bindings[0].Grants["extra"], []string{"wait"}) || len(setup.Routes) != 1 || setup.Routes[0].Effect != "start" ||
		!slices.Contains(setup.Authorization.Operations, "create_work") {
		t.Fatalf("setup = %+v", setup)
	}
	tr, err := c.TraceRoute(ctx, "setup", client.TraceRequest{Type: "deploy.requested"})
	if err != nil || tr.Decision.Effect != "start" || tr.Decision.Binding != "shell" || tr.Decision.Routes[0].Verdict != "match" {
		t.Fatalf("trace = %+v, %v", tr, err)
	}
	if n, _ := c.ListEvents(ctx, client.EventFilter{}); len(n.Items) != 0 {
		t.Errorf("a trace recorded events: %+v", n.Items)
	}
	if tr, err := c.TraceRoute(ctx, "setup", client.TraceRequest{Type: "deploy.requested", Source: "core.action"}); err != nil || len(tr.Decision.Routes) == 0 {
		t.Fatalf("trace of an action's event = %+v, %v", tr, err)
	}
	tr, err = c.TraceRoute(ctx, "setup", client.TraceRequest{Type: "note.added", Source: "core.manual"})
	if err != nil || tr.Decision.Effect != "unmatched" || tr.Decision.Routes[0].Verdict != "skip" {
		t.Fatalf("unmatched trace = %+v, %v", tr, err)
	}
	for name, ev := range map[string]client.TraceRequest{
		"core type":   {Type: "core.work.created"},
		"host source": {Type: "a.b", Source: "core.host"},
		// No ingress registers it and no package owns the type.
		"unknown source": {Type: "a.b", Source: "github.webhook"},
		"bad data":       {Type: "a.b", Data: []byte(`[1]`)},
	} {
		if _, err := c.TraceRoute(ctx, "setup", ev); !client.IsInvalidRequest(err) {
			t.Errorf("trace of %s: %v", name, err)
		}
	}
	if _, err := c.TraceRoute(ctx, "nope", client.TraceRequest{Type: "a.b"}); !client.IsNotFound(err) {
		t.Errorf("trace in an unknown scope: %v", err)
	}
	samples := do(t, s.Harness, req{method: "GET", path: "/v1/scopes/setup/route/samples", token: s.OwnerToken(t)})
	if samples.status != 200 || strings.TrimSpace(string(samples.body)) != `{"items":[]}` {
		t.Errorf("samples = %d %s", samples.status, samples.body)
	}
}

func TestToolbeltCalls(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		for i, exe := range []string{"exe_1", "exe_2", "exe_1"} {
			kind := storage.ToolbeltCalled
			if i == 1 {
				kind = storage.ToolbeltRejected
			}
			if err := tx.InsertToolbeltCall(ctx, &storage.ToolbeltCall{ID: "tbc_" + string(rune('a'+i)), Kind: kind, Operation: "emit", Execution: exe, Epoch: 1, Result: "ok", At: s.Clock.Now().Add(time.Duration(i) * time.Second)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.ToolbeltCalls(ctx, client.ToolbeltCallFilter{Execution: "exe_1"})
	if err != nil || len(got.Items) != 2 || got.Items[0].ID != "tbc_a" || got.Items[1].ID != "tbc_c" {
		t.Fatalf("calls of exe_1 = %+v, %v", got, err)
	}
	if got, _ := s.Client.ToolbeltCalls(ctx, client.ToolbeltCallFilter{Kind: "toolbelt.rejected"}); len(got.Items) != 1 || got.Items[0].Execution != "exe_2" {
		t.Errorf("rejected calls = %+v", got.Items)
	}
	if _, err := s.Client.ToolbeltCalls(ctx, client.ToolbeltCallFilter{Kind: "other"}); !client.IsInvalidRequest(err) {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestConfigRoutes(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	var responses [][]byte

	cur, err := c.Config(ctx, nil)
	if err != nil || cur.Generation != 1 || cur.Hash != hashOf(t, mgmttest.StackConfig) || cur.Actor != configsvc.ActorFirstStart {
		t.Fatalf("config = %+v, %v", cur, err)
	}
	responses = append(responses, cur.Raw)
	if !strings.Contains(string(cur.Config), `"env:<redacted>"`) {
		t.Errorf("the config does not show the redacted reference: %s", cur.Config)
	}
	if same, _ := c.Config(ctx, &client.RequestOptions{IfNoneMatch: cur.ETag}); !same.NotModified {
		t.Error("an unchanged config was sent again")
	}

	bad, err := c.ValidateConfig(ctx, []byte(`{"version": 1, "scopes": {"x": {"parent": "nowhere"}}}`))
	if err != nil || bad.Valid || len(bad.Diagnostics) == 0 || bad.Hash != "" {
		t.Fatalf("validate invalid = %+v, %v", bad, err)
	}
	good, err := c.ValidateConfig(ctx, otherConfig)
	if err != nil || !good.Valid || good.Hash != hashOf(t, otherConfig) || len(good.Diagnostics) != 0 {
		t.Fatalf("validate valid = %+v, %v", good, err)
	}
	responses = append(responses, good.Raw)

	if _, err := c.ApplyConfig(ctx, otherConfig, 5, "", nil); !client.IsStaleGeneration(err) {
		t.Fatalf("apply with a stale generation: %v", err)
	}
	_, err = c.ApplyConfig(ctx, []byte(`{"version": 1, "extra": true}`), 1, "", nil)
	if !client.IsInvalidConfig(err) || len(client.Diagnostics(err)) == 0 || client.Diagnostics(err)[0].Code != "unknown_field" {
		t.Fatalf("apply of an invalid config: %v (%+v)", err, client.Diagnostics(err))
	}
	applied, err := c.ApplyConfig(ctx, otherConfig, 1, good.Hash, keyed("apply-1"))
	if err != nil || applied.Generation != 2 || applied.PreviousGeneration != 1 || applied.Hash != good.Hash {
		t.Fatalf("apply = %+v, %v", applied, err)
	}
	responses = append(responses, applied.Raw)
	if again, err := c.ApplyConfig(ctx, otherConfig, 1, good.Hash, keyed("apply-1")); err != nil || !again.Replayed || again.Generation != 2 {
		t.Fatalf("replayed apply = %+v, %v", again, err)
	}
	if h, _ := c.Health(ctx); h.Generation != 2 {
		t.Errorf("health generation %d after apply", h.Generation)
	}
	if sc, _ := c.Scope(ctx, "team", nil); sc.Generation != 2 || !slices.Equal(sc.Authorization.Reads, []string{"work", "events"}) {
		t.Errorf("team after apply = %+v", sc.Authorization)
	}
	saved, err := os.ReadFile(filepath.Join(s.StateDir, configsvc.ConfigFileName))
	if err != nil || hashOf(t, saved) != good.Hash {
		t.Errorf("saved config: %v", err)
	}

	// scope_in_use through the API.
	if _, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "team", Binding: "a"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ApplyConfig(ctx, noTeam, 2, "", nil); !client.IsScopeInUse(err) {
		t.Fatalf("removing a busy scope: %v", err)
	}

	// Roles: a view credential may validate but not apply.
	viewFile, _ := s.AddOperator(t, "viewer", management.RoleView)
	viewer := s.ClientFor(viewFile)
	if _, err := viewer.ValidateConfig(ctx, otherConfig); err != nil {
		t.Errorf("view validate: %v", err)
	}
	if _, err := viewer.ApplyConfig(ctx, otherConfig, 2, "", nil); !client.IsForbiddenRole(err) {
		t.Errorf("view apply: %v", err)
	}

	// No secret reference in any response, nor in the SQLite files.
	list, _ := c.Scopes(ctx, client.Page{})
	responses = append(responses, list.Raw)
	for i, r := range responses {
		if bytes.Contains(r, []byte(mgmttest.CanaryReference)) {
			t.Errorf("response %d holds the secret reference: %s", i, r)
		}
	}
	// Restart on the same state directory after a disk edit: the
	// committed generation wins.
	if err := os.WriteFile(filepath.Join(s.StateDir, configsvc.ConfigFileName), mgmttest.StackConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coordination.db", "coordination.db-wal"} {
		b, err := os.ReadFile(filepath.Join(s.StateDir, name))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(mgmttest.CanaryReference)) {
			t.Errorf("%s holds the secret reference", name)
		}
	}
	s = mgmttest.StartStack(t, mgmttest.StackOptions{StateDir: s.StateDir, Clock: s.Clock, IDs: s.IDs})
	if cur, err := s.Client.Config(ctx, nil); err != nil || cur.Generation != 2 || cur.Hash != good.Hash {
		t.Fatalf("config after a disk edit and a restart = %+v, %v", cur, err)
	}
}

// TestOpaqueIDsWithSlashes reads records whose ids contain "/", sent as
// one escaped path segment.
func TestOpaqueIDsWithSlashes(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "github/pr/12", Scope: "setup", Binding: "shell", State: storage.WorkReady, CreatedAt: s.Clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Client.GetWork(ctx, "github/pr/12", nil)
	if err != nil || w.ID != "github/pr/12" {
		t.Fatalf("get = %+v, %v", w, err)
	}
	res, err := s.Client.CancelWork(ctx, "github/pr/12", "", nil)
	if err != nil || res.Work.State != "cancelled" {
		t.Fatalf("cancel = %+v, %v", res, err)
	}
	// Unescaped, the id is three segments: no such route.
	got := do(t, s.Harness, req{method: "GET", path: "/v1/work/github/pr/12", token: s.OwnerToken(t)})
	expect(t, got, http.StatusNotFound, "not_found")
}

// TestWorkCreateAnswersTheReadETag: a Work creation's ETag is the entity
// tag GET /v1/work/{id} sends for the same revision (a quoted tag, never
// the revision itself), so a client can follow the Work with it at once.
func TestWorkCreateAnswersTheReadETag(t *testing.T) {
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	tok := s.OwnerToken(t)
	created := do(t, s.Harness, req{method: "POST", path: "/v1/work", token: tok, body: `{"scope":"setup"}`,
		header: map[string]string{"Idempotency-Key": "etag-1"}})
	if created.status != http.StatusCreated {
		t.Fatalf("create = %d %s", created.status, created.body)
	}
	var body struct {
		Work struct {
			ID string `json:"id"`
		} `json:"work"`
	}
	if err := json.Unmarshal(created.body, &body); err != nil || body.Work.ID == "" {
		t.Fatalf("create body %s: %v", created.body, err)
	}
	etag := created.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || strings.Contains(etag, body.Work.ID) {
		t.Errorf("creation ETag %q is not an opaque quoted entity tag", etag)
	}
	read := do(t, s.Harness, req{method: "GET", path: "/v1/work/" + body.Work.ID, token: tok})
	if read.status != http.StatusOK || read.header.Get("ETag") != etag {
		t.Fatalf("read ETag %q after creation ETag %q", read.header.Get("ETag"), etag)
	}
	same := do(t, s.Harness, req{method: "GET", path: "/v1/work/" + body.Work.ID, token: tok, header: map[string]string{"If-None-Match": etag}})
	if same.status != http.StatusNotModified {
		t.Errorf("read with the creation's ETag = %d, want 304", same.status)
	}
}

// TestEveryIDRouteTakesAnEscapedSlash sends, on every route with a path
// wildcard, an id holding "/" escaped as %2F, and checks that the route's
// own handler got the whole id back unescaped (its not_found names it),
// instead of the path falling apart into segments no route has.
func TestEveryIDRouteTakesAnEscapedSlash(t *testing.T) {
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	tok := s.OwnerToken(t)
	n := 0
	for _, rt := range s.Server.Routes() {
		open := strings.Index(rt.Pattern, "{")
		if open < 0 || rt.Class == management.ClassExecution {
			continue
		}
		n++
		closing := strings.Index(rt.Pattern, "}")
		path := rt.Pattern[:open] + "no%2Fsuch%2Fid" + rt.Pattern[closing+1:]
		body := "{}"
		switch {
		case strings.HasSuffix(rt.Pattern, "/route/trace"):
			body = `{"type":"a.b"}`
		case strings.HasPrefix(rt.Pattern, "/v1/actions/"):
			body = `{"scope":"setup"}`
		}
		got := do(t, s.Harness, req{method: rt.Method, path: path, token: tok, body: body, header: map[string]string{"Idempotency-Key": "slash-" + strconv.Itoa(n)}})
		if got.status != http.StatusNotFound || got.code() != "not_found" || !strings.Contains(got.message(), "no/such/id") ||
			strings.Contains(got.message(), "no route") {
			t.Errorf("%s %s: %d %s; want the handler's not_found naming no/such/id", rt.Method, path, got.status, bytes.TrimSpace(got.body))
		}
	}
	if n < 12 {
		t.Fatalf("only %d routes with an id; the route table lost some", n)
	}
}
