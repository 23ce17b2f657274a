package management_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// whoami is the test extension's action: it answers with what the host
// handed it, and refuses when the input asks it to.
type whoami struct {
	mu   sync.Mutex
	seen []extension.ActionRequest
}

func (w *whoami) handle(_ context.Context, req extension.ActionRequest) (json.RawMessage, error) {
	w.mu.Lock()
	w.seen = append(w.seen, req)
	w.mu.Unlock()
	var in struct {
		Refuse bool `json:"refuse"`
	}
	if err := json.Unmarshal(req.Input, &in); err != nil {
		return nil, err
	}
	if in.Refuse {
		return nil, &extension.OperationError{Code: "asked_to_refuse", Message: "the input asked for a refusal; leave refuse out"}
	}
	return json.Marshal(map[string]string{"caller": req.Caller, "scope": req.Scope, "work": req.Work, "event": req.Event, "request_id": req.RequestID})
}

func (w *whoami) calls() []extension.ActionRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]extension.ActionRequest(nil), w.seen...)
}

// actionStack is the real stack (SQLite store, runtime, config service)
// served by a server that adds the action routes to the resource routes.
type actionStack struct {
	*mgmttest.Stack
	h      *mgmttest.Harness
	routes []management.Route
	who    *whoami
}

func startActionStack(t *testing.T) *actionStack {
	t.Helper()
	who := &whoami{}
	s := mgmttest.StartStack(t, mgmttest.StackOptions{Extensions: []extension.Registration{{Name: "ext", Actions: []extension.Action{
		{Name: "ext.whoami", Summary: "Say who asked.", Handler: who.handle,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"refuse":{"type":"boolean"}}}`)},
		{Name: "ext.quiet", Summary: "Do nothing.", Handler: func(context.Context, extension.ActionRequest) (json.RawMessage, error) { return nil, nil }},
	}}}})
	as, err := management.NewActions(management.ActionsOptions{Control: s.Actions, Config: s.Config})
	if err != nil {
		t.Fatal(err)
	}
	h := mgmttest.Start(t, mgmttest.Options{
		Idempotency: management.StoreIdempotency(s.Store), Health: s.Config, Clock: s.Clock,
		Routes: append(s.Resources.Routes(), as.Routes()...),
		Authenticated: func(ctx context.Context, p management.Principal) context.Context {
			return kernel.WithActor(ctx, p.Actor())
		},
	})
	return &actionStack{Stack: s, h: h, routes: as.Routes(), who: who}
}

func TestListActions(t *testing.T) {
	s := startActionStack(t)
	viewer, _ := s.h.AddOperator(t, "vera", management.RoleView)
	list, err := s.h.ClientFor(viewer).Actions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []client.Action{
		{Name: "ext.quiet", Registration: "ext", Summary: "Do nothing.", InputSchema: []byte(`{"type":"object"}`)},
		{Name: "ext.whoami", Registration: "ext", Summary: "Say who asked.", InputSchema: []byte(`{"type":"object","properties":{"refuse":{"type":"boolean"}}}`)},
	}
	if len(list.Items) != len(want) || list.NextCursor != "" {
		t.Fatalf("actions = %s", list.Raw)
	}
	for i, a := range want {
		if got := list.Items[i]; got.Name != a.Name || got.Registration != a.Registration || got.Summary != a.Summary || string(got.InputSchema) != string(a.InputSchema) {
			t.Errorf("actions[%d] = %+v, want %+v", i, got, a)
		}
	}
	got := do(t, s.h, req{method: "GET", path: "/v1/actions?limit=5", token: s.h.OwnerToken(t)})
	expect(t, got, http.StatusUnprocessableEntity, "invalid_request")
}

// A named operator's action is recorded as a core.action Event with that
// operator as its actor, and the handler is handed the same operator as
// its caller. A replay under the same key runs nothing; a retry whose
// answer was never recorded accepts no second Event.
func TestActIsStampedWithTheOperator(t *testing.T) {
	ctx := context.Background()
	s := startActionStack(t)
	aliceFile, _ := s.h.AddOperator(t, "alice", management.RoleOperate)
	alice := s.h.ClientFor(aliceFile)
	key := keyed("act-key-1")

	res, err := alice.Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup", Input: []byte(`{"note":"hi"}`)}, key)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusOK || res.Existing || res.Replayed {
		t.Fatalf("act = %d existing=%v replayed=%v", res.Status, res.Existing, res.Replayed)
	}
	var result map[string]string
	if err := json.Unmarshal(res.Result, &result); err != nil {
		t.Fatalf("result %s: %v", res.Result, err)
	}
	if result["caller"] != "operator:alice" || result["event"] != res.Event.ID || result["scope"] != "setup" || result["request_id"] == "" {
		t.Errorf("the handler saw %v, want caller operator:alice and event %s", result, res.Event.ID)
	}
	ev, err := s.h.Client.GetEvent(ctx, res.Event.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "core.action" || ev.Source != "core.action" || ev.Actor != "operator:alice" || ev.Scope != "setup" ||
		string(ev.Data) != `{"action":"ext.whoami","input":{"note":"hi"}}` {
		t.Errorf("the stored event is %+v (data %s)", ev, ev.Data)
	}

	// The same request under the same key is replayed: the handler does
	// not run again.
	again, err := alice.Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup", Input: []byte(`{ "note" : "hi" }`)}, key)
	if err != nil || !again.Replayed || again.Event.ID != res.Event.ID || string(again.Result) != string(res.Result) {
		t.Fatalf("replay = %+v, %v", again, err)
	}
	if n := len(s.who.calls()); n != 1 {
		t.Fatalf("the handler ran %d times, want once", n)
	}
	// Another request under the key is refused.
	if _, err := alice.Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup"}, key); !client.IsIdempotencyConflict(err) {
		t.Errorf("another body under the key: %v, want idempotency_conflict", err)
	}
	// Another operator's same key never meets alice's.
	bobFile, _ := s.h.AddOperator(t, "bob", management.RoleOperate)
	bobs, err := s.h.ClientFor(bobFile).Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup", Input: []byte(`{"note":"hi"}`)}, key)
	if err != nil || bobs.Replayed || bobs.Event.ID == res.Event.ID || bobs.Event.Actor != "operator:bob" {
		t.Fatalf("bob under alice's key = %+v, %v", bobs, err)
	}

	// A daemon that crashed before it recorded the answer: the record is
	// gone, the retry accepts no second Event and hands the handler the
	// same request id and Event.
	if _, err := s.h.Idempotency.DeleteBefore(ctx, s.Clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	retry, err := alice.Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup", Input: []byte(`{"note":"hi"}`)}, key)
	if err != nil || retry.Replayed || !retry.Existing || retry.Event.ID != res.Event.ID {
		t.Fatalf("retry after a lost record = %+v, %v", retry, err)
	}
	calls := s.who.calls()
	if len(calls) != 3 || calls[2].Event != calls[0].Event || calls[2].RequestID != calls[0].RequestID || calls[1].RequestID == calls[0].RequestID {
		t.Errorf("handler requests %+v: the retry must repeat alice's first request id and event, bob's differ", calls)
	}
	evs, err := s.h.Client.ListEvents(ctx, client.EventFilter{Type: "core.action"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 2 {
		t.Errorf("%d core.action events, want 2 (alice's and bob's)", len(evs.Items))
	}
}

func TestActAboutAWork(t *testing.T) {
	ctx := context.Background()
	s := startActionStack(t)
	w, err := s.h.Client.CreateWork(ctx, client.CreateWorkRequest{Scope: "setup"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.h.Client.Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup", Work: w.Work.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Work != w.Work.ID || res.Event.Parent != w.CreatedEvent.ID || res.Event.Actor != "operator:local" {
		t.Errorf("event %+v, want it about Work %s, by the owner", res.Event, w.Work.ID)
	}
	if c := s.who.calls(); len(c) != 1 || c[0].Work != w.Work.ID || c[0].Caller != "operator:local" {
		t.Errorf("the handler got %+v", c)
	}
	chain, err := s.h.Client.EventChain(ctx, w.CreatedEvent.ID, client.Page{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range chain.Items {
		found = found || e.ID == res.Event.ID
	}
	if !found {
		t.Errorf("the action's event is not in the Work's causal chain %s", chain.Raw)
	}
}

func TestActRefusals(t *testing.T) {
	ctx := context.Background()
	s := startActionStack(t)
	team, err := s.h.Client.CreateWork(ctx, client.CreateWorkRequest{Scope: "team", Binding: "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	owner := s.h.OwnerToken(t)
	post := func(path, body, key string) raw {
		h := map[string]string{}
		if key != "" {
			h["Idempotency-Key"] = key
		}
		return do(t, s.h, req{method: "POST", path: path, token: owner, body: body, header: h})
	}
	for _, c := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"unknown action", "/v1/actions/ext.nope", `{"scope":"setup"}`, 404, "not_found"},
		{"no scope", "/v1/actions/ext.whoami", `{}`, 422, "invalid_request"},
		{"unknown scope", "/v1/actions/ext.whoami", `{"scope":"nowhere"}`, 422, "invalid_request"},
		{"another scope's Work", "/v1/actions/ext.whoami", `{"scope":"setup","work":"` + team.Work.ID + `"}`, 422, "invalid_request"},
		{"no such Work", "/v1/actions/ext.whoami", `{"scope":"setup","work":"wrk_missing"}`, 422, "invalid_request"},
		{"input not an object", "/v1/actions/ext.whoami", `{"scope":"setup","input":[1]}`, 422, "invalid_request"},
		{"unknown member", "/v1/actions/ext.whoami", `{"scope":"setup","actor":"operator:mallory"}`, 422, "invalid_request"},
		{"the handler refuses", "/v1/actions/ext.whoami", `{"scope":"setup","input":{"refuse":true}}`, 422, "asked_to_refuse"},
	} {
		got := post(c.path, c.body, "k-"+strings.ReplaceAll(c.name, " ", "-"))
		if got.status != c.status || got.code() != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, got.status, got.body, c.status, c.code)
		}
	}
	if got := post("/v1/actions/ext.whoami", `{"scope":"setup","input":{"refuse":true}}`, "k-msg"); got.message() != "the input asked for a refusal; leave refuse out" {
		t.Errorf("the handler's message came back as %q", got.message())
	}
	expect(t, post("/v1/actions/ext.whoami", `{"scope":"setup"}`, ""), http.StatusBadRequest, "idempotency_key_required")
	viewer, _ := s.h.AddOperator(t, "vera", management.RoleView)
	if _, err := s.h.ClientFor(viewer).Act(ctx, "ext.whoami", client.ActRequest{Scope: "setup"}, nil); !client.IsForbiddenRole(err) {
		t.Errorf("a view credential acting: %v, want forbidden_role", err)
	}
	// Only the handler's refusal reached the handler; none of the others
	// recorded an Event.
	if c := s.who.calls(); len(c) != 2 {
		t.Errorf("the handler ran %d times, want 2 (the two refusals it gave)", len(c))
	}
	evs, err := s.h.Client.ListEvents(ctx, client.EventFilter{Type: "core.action"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 2 {
		t.Errorf("%d core.action events, want the 2 requests the handler refused", len(evs.Items))
	}
}
