package client_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

// Operators and Scopes send the page as the limit and cursor query
// parameters (none for the zero Page) and return the page's next cursor.
func TestOperatorsAndScopesSendThePage(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	mux := http.NewServeMux()
	serve := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.URL.RequestURI())
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}
	}
	mux.HandleFunc("GET /v1/auth/operators", serve(`{"items":[{"name":"amy","role":"view","token_id":"tok_1","active":true,"created_at":"2026-03-01T12:00:00Z"}],"next_cursor":"n.o"}`))
	mux.HandleFunc("GET /v1/scopes", serve(`{"items":[{"id":"ops","generation":3}],"next_cursor":"s.c"}`))
	c := client.New(fakeDaemon(t, mux), client.StaticToken("t"))
	ctx := context.Background()

	ops, err := c.Operators(ctx, client.Page{})
	if err != nil || len(ops.Items) != 1 || ops.Items[0].TokenID != "tok_1" || ops.NextCursor != "n.o" || len(ops.Raw) == 0 {
		t.Fatalf("operators = %+v, %v", ops, err)
	}
	if _, err := c.Operators(ctx, client.Page{Limit: 2, Cursor: ops.NextCursor}); err != nil {
		t.Fatal(err)
	}
	scopes, err := c.Scopes(ctx, client.Page{Limit: 500, Cursor: "a/b+c"})
	if err != nil || len(scopes.Items) != 1 || scopes.Items[0].ID != "ops" || scopes.NextCursor != "s.c" {
		t.Fatalf("scopes = %+v, %v", scopes, err)
	}
	want := []string{"/v1/auth/operators", "/v1/auth/operators?cursor=n.o&limit=2", "/v1/scopes?cursor=a%2Fb%2Bc&limit=500"}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("requests %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d = %s, want %s", i, seen[i], want[i])
		}
	}
}
