package management_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// GET /metrics serves the handler it is given to any operator credential,
// after authentication as on every route; every refusal is reported with
// its socket and code.
func TestMetricsPath(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	h, _ := start(t, mgmttest.Options{
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			w.Write([]byte("open_conduit_test 1\n"))
		}),
		Refused: func(socket, code string) {
			mu.Lock()
			refused = append(refused, socket+" "+code)
			mu.Unlock()
		},
	})
	_, is := h.AddOperator(t, "scraper", management.RoleView)
	view := is.Token
	got := do(t, h, req{method: "GET", path: management.MetricsPath, token: view})
	if got.status != http.StatusOK || string(got.body) != "open_conduit_test 1\n" {
		t.Fatalf("GET /metrics with a view credential: %d %q", got.status, got.body)
	}
	expect(t, do(t, h, req{method: "GET", path: management.MetricsPath}), http.StatusUnauthorized, "unauthorized")
	expect(t, do(t, h, req{method: "POST", path: management.MetricsPath, token: view, body: "{}"}), http.StatusMethodNotAllowed, "method_not_allowed")
	// Only the exact path: /metrics/x is not it.
	expect(t, do(t, h, req{method: "GET", path: management.MetricsPath + "/x", token: view}), http.StatusNotFound, "not_found")
	mu.Lock()
	defer mu.Unlock()
	want := []string{"management unauthorized", "management method_not_allowed", "management not_found"}
	if !slices.Equal(refused, want) {
		t.Fatalf("refusals reported %v, want %v", refused, want)
	}
}
