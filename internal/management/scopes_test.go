package management_test

import (
	"bytes"
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// manyScopes has seven scopes, written out of id order, one of them a
// tombstone.
var manyScopes = []byte(`{"version": 1, "scopes": {
  "ops": {"bindings": {"sh": {"executor": "shell", "config": {"command": ["true"]}}}}, "ci": {"parent": "ops"}, "web": {}, "db": {"enabled": false},
  "auth": {"parent": "web"}, "gone": {"removed": true}, "mail": {}
}}`)

var manyScopesByID = []string{"auth", "ci", "db", "gone", "mail", "ops", "web"}

func scopeIDs(list []client.Scope) []string {
	out := make([]string, 0, len(list))
	for _, sc := range list {
		out = append(out, sc.ID)
	}
	return out
}

// The scope listing pages on the scope id within the active generation,
// and its cursors are checked like every list's.
func TestScopeListPages(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{Default: manyScopes})
	c := s.Client
	got, pages, first := pageAll(t, 3, func(p client.Page) (*client.List[client.Scope], error) { return c.Scopes(ctx, p) },
		func(sc client.Scope) string { return sc.ID })
	if !slices.Equal(got, manyScopesByID) || pages != 3 {
		t.Fatalf("paged %v in %d pages, want %v in 3", got, pages, manyScopesByID)
	}
	second, err := c.Scopes(ctx, client.Page{Limit: 3, Cursor: first})
	if err != nil || !slices.Equal(scopeIDs(second.Items), manyScopesByID[3:6]) || second.Items[0].Generation != 1 || !second.Items[0].Removed {
		t.Fatalf("second page = %+v, %v", second, err)
	}
	// A limit at least the listing's size answers in one page.
	if all, err := c.Scopes(ctx, client.Page{Limit: 7}); err != nil || len(all.Items) != 7 || all.NextCursor != "" {
		t.Errorf("limit 7 = %+v, %v", all, err)
	}
	if all, err := c.Scopes(ctx, client.Page{}); err != nil || !slices.Equal(scopeIDs(all.Items), manyScopesByID) || all.NextCursor != "" {
		t.Errorf("default page = %+v, %v", all, err)
	}

	tok := s.OwnerToken(t)
	tampered := []byte(first)
	tampered[len(tampered)-3] ^= 1
	for _, bad := range []string{string(tampered), "garbage", "x." + first} {
		expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/scopes?cursor=" + url.QueryEscape(bad), token: tok}), 422, "invalid_cursor")
	}
	// Another listing's cursor, with its filter, and this one's elsewhere.
	for _, key := range []string{"w1", "w2"} {
		if _, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "ops"}, keyed(key)); err != nil {
			t.Fatal(err)
		}
	}
	work, err := c.ListWork(ctx, client.WorkFilter{Scope: "ops", Page: client.Page{Limit: 1}})
	if err != nil || work.NextCursor == "" {
		t.Fatalf("work = %+v, %v", work, err)
	}
	if _, err := c.Scopes(ctx, client.Page{Cursor: work.NextCursor}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("a filtered Work listing's cursor on scopes: %v", err)
	}
	s.AddOperator(t, "amy", management.RoleView)
	ops, err := c.Operators(ctx, client.Page{Limit: 1})
	if err != nil || ops.NextCursor == "" {
		t.Fatalf("operators = %+v, %v", ops, err)
	}
	if _, err := c.Scopes(ctx, client.Page{Cursor: ops.NextCursor}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("the operator listing's cursor on scopes: %v", err)
	}
	if _, err := c.Operators(ctx, client.Page{Cursor: first}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("a scope cursor on operators: %v", err)
	}
	if _, err := c.ListWork(ctx, client.WorkFilter{Scope: "ops", Page: client.Page{Cursor: first}}); client.ErrorCode(err) != "cursor_mismatch" {
		t.Errorf("a scope cursor on a filtered Work listing: %v", err)
	}
	expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/scopes?parent=ops", token: tok}), 422, "invalid_request")
	expect(t, do(t, s.Harness, req{method: "GET", path: "/v1/scopes?limit=501", token: tok}), 422, "invalid_request")

	// Expiry on the fake clock.
	s.Clock.Advance(management.CursorLifetime - time.Millisecond)
	if _, err := c.Scopes(ctx, client.Page{Limit: 3, Cursor: first}); err != nil {
		t.Errorf("cursor just inside its lifetime: %v", err)
	}
	s.Clock.Advance(time.Millisecond)
	if _, err := c.Scopes(ctx, client.Page{Limit: 3, Cursor: first}); client.ErrorCode(err) != "cursor_expired" {
		t.Errorf("cursor after 15 minutes: %v", err)
	}
}

// A scope cursor is bound to the configuration generation it was issued
// under: once another generation is active the set of scopes may have
// changed, so the cursor is refused with cursor_mismatch, saying so, and
// a fresh listing shows the new set.
func TestScopeCursorIsBoundToItsGeneration(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{Default: manyScopes})
	c := s.Client
	page, err := c.Scopes(ctx, client.Page{Limit: 2})
	if err != nil || page.NextCursor == "" || page.Items[0].Generation != 1 {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	old := page.NextCursor
	// Still generation 1: the cursor goes on where the page ended.
	if next, err := c.Scopes(ctx, client.Page{Limit: 2, Cursor: old}); err != nil || !slices.Equal(scopeIDs(next.Items), manyScopesByID[2:4]) {
		t.Fatalf("second page = %+v, %v", next, err)
	}
	// Generation 2 adds a scope that sorts first.
	withAcme := bytes.Replace(manyScopes, []byte(`"mail": {}`), []byte(`"mail": {}, "acme": {}`), 1)
	if applied, err := c.ApplyConfig(ctx, withAcme, 1, "", keyed("apply-acme")); err != nil || applied.Generation != 2 {
		t.Fatalf("apply = %+v, %v", applied, err)
	}
	_, err = c.Scopes(ctx, client.Page{Limit: 2, Cursor: old})
	if client.ErrorCode(err) != "cursor_mismatch" || !strings.Contains(err.Error(), "generation 1") || !strings.Contains(err.Error(), "generation 2 is active") {
		t.Fatalf("a generation-1 cursor under generation 2: %v", err)
	}
	want := append([]string{"acme"}, manyScopesByID...)
	got, pages, _ := pageAll(t, 2, func(p client.Page) (*client.List[client.Scope], error) { return c.Scopes(ctx, p) },
		func(sc client.Scope) string { return sc.ID })
	if !slices.Equal(got, want) || pages != 4 {
		t.Errorf("fresh listing = %v in %d pages, want %v in 4", got, pages, want)
	}
	// A generation-2 cursor survives a restart on the same generation
	// (the cursor key and the committed generation are both kept).
	page, err = c.Scopes(ctx, client.Page{Limit: 4})
	if err != nil || page.NextCursor == "" || page.Items[0].Generation != 2 {
		t.Fatalf("generation 2 first page = %+v, %v", page, err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s = mgmttest.StartStack(t, mgmttest.StackOptions{StateDir: s.StateDir, Default: manyScopes, Clock: s.Clock, IDs: s.IDs})
	if next, err := s.Client.Scopes(ctx, client.Page{Limit: 4, Cursor: page.NextCursor}); err != nil || !slices.Equal(scopeIDs(next.Items), want[4:]) || next.NextCursor != "" {
		t.Errorf("generation-2 cursor after a restart = %+v, %v", next, err)
	}
}
