package management_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// execBundle is a management server that knows a real toolbelt's tokens,
// on SQLite, with one running attempt.
type execBundle struct {
	h  *mgmttest.Harness
	tb *toolbelt.Toolbelt
	a  *toolbelttest.Attempt
}

func setupExecution(t *testing.T) *execBundle {
	t.Helper()
	f, err := toolbelttest.NewFixture(t.TempDir(), toolbelttest.Real, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tb := f.TB.(*toolbelt.Toolbelt)
	h := mgmttest.Start(t, mgmttest.Options{ExecutionTokens: management.ToolbeltTokens(tb), Clock: f.Env.Clock})
	b := &execBundle{h: h, tb: tb}
	if b.a, err = f.Start(); err != nil {
		t.Fatal(err)
	}
	return b
}

func rawOn(t *testing.T, socket, method, path, token, body string) raw {
	t.Helper()
	req, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := rawClient(socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return raw{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestExecutionTokenOnManagementSocket: an execution token is
// wrong_credential_class on every route of the management socket.
func TestExecutionTokenOnManagementSocket(t *testing.T) {
	b := setupExecution(t)
	for _, rt := range b.h.Server.Routes() {
		path := strings.ReplaceAll(rt.Pattern, "{id}", "x")
		body := ""
		if rt.Method == "POST" {
			body = "{}"
		}
		r := rawOn(t, b.h.Socket, rt.Method, path, b.a.Token, body)
		if r.status != http.StatusForbidden || r.code() != "wrong_credential_class" {
			t.Errorf("%s %s with an execution token = %d %s", rt.Method, path, r.status, r.code())
		}
	}
	// Once the toolbelt revokes it, it is just unknown there.
	if err := b.tb.Revoke(context.Background(), b.a.TokenID); err != nil {
		t.Fatal(err)
	}
	r := rawOn(t, b.h.Socket, "GET", "/v1/health", b.a.Token, "")
	if r.status != http.StatusUnauthorized {
		t.Errorf("a revoked execution token = %d %s", r.status, r.code())
	}
}
