package management_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// GET /v1/auth/operators lists the active credentials; all=true lists the
// revoked ones too. Both page, and a cursor is bound to its listing's
// filter: one of the active listing does not page the full one.
func TestOperatorListActiveByDefault(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			var h *mgmttest.Harness
			if backend == "memory" {
				h = mgmttest.Start(t, mgmttest.Options{})
			} else {
				h = mgmttest.StartStack(t, mgmttest.StackOptions{}).Harness
			}
			owner, err := h.Credentials.ActiveByName(ctx, management.OwnerName)
			if err != nil {
				t.Fatal(err)
			}
			var active, all []string
			all = append(all, owner.ID)
			active = append(active, owner.ID)
			for _, name := range []string{"amy", "ben", "cat", "dan"} {
				h.Clock.Advance(time.Second)
				_, is := h.AddOperator(t, name, management.RoleView)
				all = append(all, is.Credential.ID)
				if name == "ben" || name == "dan" {
					if err := h.Credentials.Revoke(ctx, is.Credential.ID, h.Clock.Now()); err != nil {
						t.Fatal(err)
					}
					continue
				}
				active = append(active, is.Credential.ID)
			}
			c := h.Client
			id := func(o client.Operator) string { return o.TokenID }
			for _, limit := range []int{1, 2, 50} {
				got, _, _ := pageAll(t, limit, func(p client.Page) (*client.List[client.Operator], error) { return c.Operators(ctx, p) }, id)
				if !slices.Equal(got, active) {
					t.Errorf("default listing by %d = %v, want the active %v", limit, got, active)
				}
				got, _, _ = pageAll(t, limit, func(p client.Page) (*client.List[client.Operator], error) {
					return c.ListOperators(ctx, client.OperatorFilter{All: true, Page: p})
				}, id)
				if !slices.Equal(got, all) {
					t.Errorf("all=true listing by %d = %v, want %v", limit, got, all)
				}
			}
			// all=false is the default listing, and its cursor pages it.
			first, err := c.Operators(ctx, client.Page{Limit: 1})
			if err != nil || first.NextCursor == "" {
				t.Fatalf("first page = %+v, %v", first, err)
			}
			tok := h.OwnerToken(t)
			expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?all=false&limit=1&cursor=" + url.QueryEscape(first.NextCursor), token: tok}), 200, "")
			// A cursor is bound to its listing's filter.
			expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?all=true&limit=1&cursor=" + url.QueryEscape(first.NextCursor), token: tok}), 422, "cursor_mismatch")
			full, err := c.ListOperators(ctx, client.OperatorFilter{All: true, Page: client.Page{Limit: 1}})
			if err != nil || full.NextCursor == "" {
				t.Fatalf("first page of all = %+v, %v", full, err)
			}
			if _, err := c.Operators(ctx, client.Page{Limit: 1, Cursor: full.NextCursor}); client.ErrorCode(err) != "cursor_mismatch" {
				t.Errorf("the full listing's cursor on the active listing: %v, want cursor_mismatch", err)
			}
			for _, bad := range []string{"yes", "1", "TRUE", ""} {
				q := "all=" + bad
				if bad == "" {
					q = "all=true&all=false"
				}
				expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?" + q, token: tok}), 422, "invalid_request")
			}
		})
	}
}
