package management_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"github.com/open-conduit/open-conduit/extension"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

const fakeToken = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" // well-formed, unknown

func TestEveryRouteNeedsAToken(t *testing.T) {
	h, _ := start(t, mgmttest.Options{})
	paths := []req{{method: "GET", path: "/v1/no/such/route"}}
	for _, rt := range h.Server.Routes() {
		paths = append(paths, req{method: rt.Method, path: routePath(rt.Pattern), body: "{}"})
	}
	for _, q := range paths {
		for _, tok := range []string{"", "not-a-token", fakeToken} {
			q.token = tok
			got := do(t, h, q)
			expect(t, got, http.StatusUnauthorized, "unauthorized")
			if !strings.HasPrefix(got.header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("%s %s: 401 without WWW-Authenticate: Bearer", q.method, q.path)
			}
		}
	}
	// Another scheme is no token.
	got := do(t, h, req{method: "GET", path: "/v1/health", header: map[string]string{"Authorization": "Basic " + h.OwnerToken(t)}})
	expect(t, got, http.StatusUnauthorized, "unauthorized")
	// The owner's token works.
	expect(t, do(t, h, req{method: "GET", path: "/v1/health", token: h.OwnerToken(t)}), http.StatusOK, "")
}

func TestExecutionTokenIsWrongCredentialClassEverywhere(t *testing.T) {
	execs := &mgmttest.ExecutionTokens{}
	const execToken = "ZXhlY3V0aW9uLXRva2VuLWZvci10ZXN0cy0wMDAwMDA"
	const revokedExec = "cmV2b2tlZC1leGVjdXRpb24tdG9rZW4tZm9yLXRlc3Q"
	execs.Add(execToken, management.ExecutionToken{ID: "tok_exec1", ExecutionID: "exe_1"})
	execs.Add(revokedExec, management.ExecutionToken{ID: "tok_exec2", ExecutionID: "exe_2", RevokedAt: mgmttest.Epoch})
	h, _ := start(t, mgmttest.Options{ExecutionTokens: execs})

	paths := []req{{method: "GET", path: "/v1/no/such/route"}, {method: "DELETE", path: "/v1/health"}}
	for _, rt := range h.Server.Routes() {
		paths = append(paths, req{method: rt.Method, path: routePath(rt.Pattern), body: "{}"})
	}
	for _, q := range paths {
		q.token = execToken
		expect(t, do(t, h, q), http.StatusForbidden, "wrong_credential_class")
		q.token = revokedExec
		expect(t, do(t, h, q), http.StatusUnauthorized, "unauthorized")
	}
	// An expired execution token is just invalid.
	const expired = "ZXhwaXJlZC1leGVjdXRpb24tdG9rZW4tZm9yLXRlc3Q"
	execs.Add(expired, management.ExecutionToken{ID: "tok_exec3", ExecutionID: "exe_3", ExpiresAt: mgmttest.Epoch.Add(time.Minute)})
	expect(t, do(t, h, req{method: "GET", path: "/v1/health", token: expired}), http.StatusForbidden, "wrong_credential_class")
	h.Clock.Advance(time.Minute)
	expect(t, do(t, h, req{method: "GET", path: "/v1/health", token: expired}), http.StatusUnauthorized, "unauthorized")
}

func TestOperatorTokenNeverReachesTheToolbelt(t *testing.T) {
	h, _ := start(t, mgmttest.Options{})
	for _, q := range []req{
		{method: "POST", path: "/v1/toolbelt/call", body: `{"operation":"emit"}`},
		{method: "POST", path: "/v1/toolbelt/call", noContentType: true, body: "not json"},
		{method: "GET", path: "/v1/toolbelt/guidance"},
		{method: "GET", path: "/v1/toolbelt/serving?capability=git.credential"},
	} {
		q.token = h.OwnerToken(t)
		expect(t, do(t, h, q), http.StatusForbidden, "wrong_credential_class")
	}
}

// specRole is the role the spec's rule gives a route: reads, route trace
// and config validate need view; config apply and issuing operators need
// admin; every other control needs operate.
func specRole(rt management.Route) management.Role {
	switch {
	case rt.Method == http.MethodGet:
		return management.RoleView
	case strings.HasSuffix(rt.Pattern, "/route/trace"), rt.Pattern == "/v1/config/validate":
		return management.RoleView
	case rt.Pattern == "/v1/config/apply", rt.Pattern == "/v1/auth/operators":
		return management.RoleAdmin
	case rt.Pattern == "/v1/config/set":
		// config set applies as config apply does (issue 11).
		return management.RoleAdmin
	}
	return management.RoleOperate
}

// keyExempt lists the mutating routes the spec exempts from
// Idempotency-Key: validate, rotate, operator issue, route trace and
// toolbelt calls.
func keyExempt(rt management.Route) bool {
	switch {
	case rt.Class == management.ClassExecution:
		return true
	case strings.HasSuffix(rt.Pattern, "/route/trace"),
		rt.Pattern == "/v1/config/validate", rt.Pattern == "/v1/auth/rotate", rt.Pattern == "/v1/auth/operators":
		return true
	}
	return false
}

// TestRoleTable walks every route the daemon serves (the built-in,
// resource and action routes, composed by management.NewServers as the
// daemon composes them): each has a role, the role is the spec's, mutating
// routes need an Idempotency-Key unless the spec exempts them, and the
// server enforces the role on the wire (one role below is refused with
// forbidden_role, naming the role needed, before the body is read; the
// role itself gets past the check and the route answers without failing).
func TestRoleTable(t *testing.T) {
	quiet := func(context.Context, extension.ActionRequest) (json.RawMessage, error) { return nil, nil }
	s := mgmttest.StartStack(t, mgmttest.StackOptions{Extensions: []extension.Registration{{Name: "ext",
		Actions: []extension.Action{{Name: "ext.quiet", Summary: "Do nothing.", Handler: quiet}}}}})
	tokens := map[management.Role]string{}
	for _, r := range []management.Role{management.RoleView, management.RoleOperate, management.RoleAdmin} {
		tokFile, _ := s.AddOperator(t, "op-"+r.String(), r)
		tokens[r] = mustRead(t, tokFile)
	}
	routes := s.Server.Routes()
	registered := map[string]bool{}
	for _, rt := range routes {
		registered[rt.Method+" "+rt.Pattern] = true
	}
	want := []string{"GET /v1/health", "GET /v1/actions", "POST /v1/actions/{name}"}
	for _, rt := range s.Resources.Routes() {
		want = append(want, rt.Method+" "+rt.Pattern)
	}
	for _, name := range want {
		if !registered[name] {
			t.Errorf("%s is not registered on the server", name)
		}
	}
	// The credential routes go last: rotating one's own credential with
	// its own role replaces the token the other routes are walked with.
	last := func(rt management.Route) int {
		if strings.HasPrefix(rt.Pattern, "/v1/auth/") {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(routes, func(a, b management.Route) int { return cmp.Compare(last(a), last(b)) })
	for i, rt := range routes {
		name := rt.Method + " " + rt.Pattern
		if !rt.Role.Valid() {
			t.Errorf("%s has no role entry", name)
			continue
		}
		if rt.Class == management.ClassExecution {
			continue // refused by credential class, whatever the role
		}
		if want := specRole(rt); rt.Role != want {
			t.Errorf("%s needs %s, the spec says %s", name, rt.Role, want)
		}
		if rt.Method == http.MethodPost && rt.Idempotent == keyExempt(rt) {
			t.Errorf("%s: Idempotent=%v, but the spec exempts it: %v", name, rt.Idempotent, keyExempt(rt))
		}
		path := routePath(strings.ReplaceAll(rt.Pattern, "{name}", "ext.quiet"))
		// The body is deliberately not JSON: a role refusal must come
		// before the body is read.
		if below := rt.Role - 1; below.Valid() {
			got := do(t, s.Harness, req{method: rt.Method, path: path, token: tokens[below], body: "{not json", noContentType: true})
			expect(t, got, http.StatusForbidden, "forbidden_role")
			if !strings.Contains(got.message(), rt.Role.String()) {
				t.Errorf("%s: refusal %q does not name the role needed", name, got.message())
			}
		}
		body := "{}"
		if name == "POST /v1/actions/{name}" {
			body = `{"scope":"setup"}`
		}
		got := do(t, s.Harness, req{method: rt.Method, path: path, token: tokens[rt.Role], body: body, header: map[string]string{"Idempotency-Key": "k" + strconv.Itoa(i)}})
		if got.code() == "forbidden_role" || got.code() == "unauthorized" || got.status >= 500 {
			t.Errorf("%s with role %s: %d %s", name, rt.Role, got.status, got.body)
		}
		if strings.HasPrefix(rt.Pattern, "/v1/actions") && got.status != http.StatusOK {
			t.Errorf("%s with role %s: %d %s, want 200", name, rt.Role, got.status, got.body)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	tok, err := statedir.ReadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestNewRefusesUnclassifiedRoutes(t *testing.T) {
	ok := func(*http.Request) (any, error) { return nil, nil }
	base := management.Options{
		Credentials: &mgmttest.Credentials{}, Idempotency: &mgmttest.Idempotency{},
		Health: management.HealthFunc(func(context.Context) (int64, error) { return 1, nil }),
		Clock:  clock.System{}, Entropy: clock.SystemEntropy(), Logger: mgmttest.DiscardLogger(),
	}
	for name, rt := range map[string]management.Route{
		"no role":        {Method: "GET", Pattern: "/v1/x", Handler: ok},
		"bad role":       {Method: "GET", Pattern: "/v1/x", Role: 9, Handler: ok},
		"no handler":     {Method: "GET", Pattern: "/v1/x", Role: management.RoleView},
		"no prefix":      {Method: "GET", Pattern: "/x", Role: management.RoleView, Handler: ok},
		"odd method":     {Method: "PATCH", Pattern: "/v1/x", Role: management.RoleView, Handler: ok},
		"idempotent GET": {Method: "GET", Pattern: "/v1/x", Role: management.RoleView, Idempotent: true, Handler: ok},
		"duplicate":      {Method: "GET", Pattern: "/v1/health", Role: management.RoleView, Handler: ok},
	} {
		opts := base
		opts.Routes = []management.Route{rt}
		if _, err := management.New(opts); err == nil {
			t.Errorf("New accepted a route with %s", name)
		}
	}
	if _, err := management.New(base); err != nil {
		t.Fatalf("New with the built-in routes: %v", err)
	}
}

// TestRolesPerClass checks an allowed and a refused call on one route of
// each class: a read (view), a control (operate), an admin action.
func TestRolesPerClass(t *testing.T) {
	h, _ := start(t, mgmttest.Options{})
	view, _ := h.AddOperator(t, "viewer", management.RoleView)
	oper, _ := h.AddOperator(t, "operator", management.RoleOperate)
	ctx := context.Background()

	// Read: view is enough.
	if _, err := h.ClientFor(view).Health(ctx); err != nil {
		t.Fatalf("view reading health: %v", err)
	}
	// Control: view is refused, operate is allowed.
	if _, err := h.ClientFor(view).Revoke(ctx, "tok_unknown", nil); !client.IsForbiddenRole(err) {
		t.Fatalf("view revoking: %v, want forbidden_role", err)
	}
	if _, err := h.ClientFor(oper).Revoke(ctx, "tok_unknown", nil); !client.IsNotFound(err) {
		t.Fatalf("operate revoking an unknown id: %v, want not_found (past the role check)", err)
	}
	// Admin: operate is refused, the owner (admin) is allowed.
	if _, err := h.ClientFor(oper).AddOperator(ctx, "eve", "admin"); !client.IsForbiddenRole(err) {
		t.Fatalf("operate issuing an operator: %v, want forbidden_role", err)
	}
	if _, err := h.Client.AddOperator(ctx, "eve", ""); err != nil {
		t.Fatalf("admin issuing an operator: %v", err)
	}
}

func TestRoutingErrorsUseTheEnvelope(t *testing.T) {
	h, _ := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	got := do(t, h, req{method: "DELETE", path: "/v1/health", token: tok})
	expect(t, got, http.StatusMethodNotAllowed, "method_not_allowed")
	if allow := got.header.Get("Allow"); !strings.Contains(allow, "GET") {
		t.Fatalf("405 Allow = %q", allow)
	}
	expect(t, do(t, h, req{method: "GET", path: "/v1/nothing", token: tok}), http.StatusNotFound, "not_found")
	expect(t, do(t, h, req{method: "GET", path: "/v1/test/../health", token: tok}), http.StatusNotFound, "not_found")
	expect(t, do(t, h, req{method: "GET", path: "/v1/health/", token: tok}), http.StatusNotFound, "not_found")
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type = %q", ct)
	}
}

func TestStrictRequests(t *testing.T) {
	h, _ := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	big := `{"name":"` + strings.Repeat("x", httpapi.MaxBody) + `"}`
	cases := []struct {
		name   string
		q      req
		status int
		code   string
	}{
		{"ok", req{body: `{"name":"a","n":1,"tags":["x"],"nested":{"a":"b"}}`}, 200, ""},
		{"ok charset", req{body: `{}`, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, 200, ""},
		{"no content type", req{body: `{}`, noContentType: true}, 415, "unsupported_media_type"},
		{"text content type", req{body: `{}`, header: map[string]string{"Content-Type": "text/plain"}}, 415, "unsupported_media_type"},
		{"other charset", req{body: `{}`, header: map[string]string{"Content-Type": "application/json; charset=latin1"}}, 415, "unsupported_media_type"},
		{"too large", req{body: big}, 413, "payload_too_large"},
		{"unknown field", req{body: `{"name":"a","extra":1}`}, 422, "invalid_request"},
		{"unknown nested field", req{body: `{"nested":{"b":"x"}}`}, 422, "invalid_request"},
		{"duplicate field", req{body: `{"name":"a","name":"b"}`}, 422, "invalid_request"},
		{"duplicate nested field", req{body: `{"nested":{"a":"x","a":"y"}}`}, 422, "invalid_request"},
		{"null field", req{body: `{"name":null}`}, 422, "invalid_request"},
		{"null in array", req{body: `{"tags":["a",null]}`}, 422, "invalid_request"},
		{"null nested", req{body: `{"nested":{"a":null}}`}, 422, "invalid_request"},
		{"query string", req{path: "/v1/test/echo?x=1", body: `{}`}, 422, "invalid_request"},
		{"empty query string", req{path: "/v1/test/echo?", body: `{}`}, 422, "invalid_request"},
		{"empty body", req{body: ""}, 422, "invalid_request"},
		{"array body", req{body: `[]`}, 422, "invalid_request"},
		{"two values", req{body: `{} {}`}, 422, "invalid_request"},
		{"not json", req{body: `{name:1}`}, 422, "invalid_request"},
		{"truncated", req{body: `{"name":"a"`}, 422, "invalid_request"},
		{"wrong type", req{body: `{"n":"one"}`}, 422, "invalid_request"},
		{"invalid utf-8", req{body: "{\"name\":\"\xff\"}"}, 422, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.method, q.token = "POST", tok
			if q.path == "" {
				q.path = "/v1/test/echo"
			}
			got := do(t, h, q)
			expect(t, got, tc.status, tc.code)
			if tc.status >= 400 && len(got.message()) == 0 {
				t.Fatal("refusal without a message")
			}
			if bytes.Contains(got.body, []byte("hunter")) || bytes.Contains(got.body, []byte(`"one"`)) {
				t.Fatalf("refusal echoes a value: %s", got.body)
			}
		})
	}
}

func TestIdempotentReplayAndConflict(t *testing.T) {
	h, f := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	post := func(key, body string) raw {
		hdr := map[string]string{}
		if key != "" {
			hdr["Idempotency-Key"] = key
		}
		return do(t, h, req{method: "POST", path: "/v1/test/things", token: tok, body: body, header: hdr})
	}
	first := post("key-1", `{"name":"a"}`)
	expect(t, first, http.StatusCreated, "")
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first response marked as replayed")
	}
	// Same request, other whitespace: the original status and body.
	again := post("key-1", "{ \"name\" : \"a\" }\n")
	if again.status != first.status || !bytes.Equal(again.body, first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay = %d %s (replayed=%q), want %d %s", again.status, again.body, again.header.Get("Idempotent-Replayed"), first.status, first.body)
	}
	if f.creates != 1 {
		t.Fatalf("handler ran %d times, want 1", f.creates)
	}
	// Changed body under the same key.
	expect(t, post("key-1", `{"name":"b"}`), http.StatusConflict, "idempotency_conflict")
	// Same key on another path.
	got := do(t, h, req{method: "POST", path: "/v1/test/flaky", token: tok, body: `{"name":"a"}`, header: map[string]string{"Idempotency-Key": "key-1"}})
	expect(t, got, http.StatusConflict, "idempotency_conflict")
	// Missing and malformed keys.
	expect(t, post("", `{"name":"a"}`), http.StatusBadRequest, "idempotency_key_required")
	expect(t, post("has:colon", `{"name":"a"}`), http.StatusUnprocessableEntity, "invalid_request")
	expect(t, post(strings.Repeat("k", management.MaxIdempotencyKey+1), `{"name":"a"}`), http.StatusUnprocessableEntity, "invalid_request")
	if f.creates != 1 {
		t.Fatalf("handler ran %d times, want 1", f.creates)
	}
	// The owner's key reaches the handler unchanged.
	var c created
	if err := json.Unmarshal(first.body, &c); err != nil || c.Key != "key-1" {
		t.Fatalf("owner's effective key = %q (%v), want key-1", c.Key, err)
	}
}

func TestIdempotencyKeysOfTwoOperatorsNeverMeet(t *testing.T) {
	h, f := start(t, mgmttest.Options{})
	alice, _ := h.AddOperator(t, "alice", management.RoleOperate)
	bob, _ := h.AddOperator(t, "bob", management.RoleOperate)
	body := `{"name":"same"}`
	send := func(tok string) created {
		got := do(t, h, req{method: "POST", path: "/v1/test/things", token: tok, body: body, header: map[string]string{"Idempotency-Key": "shared"}})
		expect(t, got, http.StatusCreated, "")
		if got.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("a request of another operator was replayed: %s", got.body)
		}
		var c created
		if err := json.Unmarshal(got.body, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b, o := send(mustRead(t, alice)), send(mustRead(t, bob)), send(h.OwnerToken(t))
	if a.Key != "operator:alice:shared" || b.Key != "operator:bob:shared" || o.Key != "shared" {
		t.Fatalf("effective keys = %q %q %q", a.Key, b.Key, o.Key)
	}
	if a.ID == b.ID || a.ID == o.ID || b.ID == o.ID {
		t.Fatalf("derived identities met: %s %s %s", a.ID, b.ID, o.ID)
	}
	if f.creates != 3 {
		t.Fatalf("handler ran %d times, want 3", f.creates)
	}
	// Each replays its own.
	got := do(t, h, req{method: "POST", path: "/v1/test/things", token: mustRead(t, alice), body: body, header: map[string]string{"Idempotency-Key": "shared"}})
	if got.header.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(got.body), a.ID) {
		t.Fatalf("alice's replay = %s", got.body)
	}
}

func TestRefusalsAreNotRecorded(t *testing.T) {
	h, f := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	q := req{method: "POST", path: "/v1/test/flaky", token: tok, body: `{}`, header: map[string]string{"Idempotency-Key": "retry-me"}}
	expect(t, do(t, h, q), http.StatusConflict, "conflict")
	got := do(t, h, q)
	expect(t, got, http.StatusOK, "")
	if got.header.Get("Idempotent-Replayed") != "" || f.fails != 2 {
		t.Fatalf("retry after a refusal did not run the handler again (fails=%d)", f.fails)
	}
	if again := do(t, h, q); again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, got.body) {
		t.Fatalf("success was not replayed: %s", again.body)
	}
}

func TestIdempotencyRetentionAndSweep(t *testing.T) {
	idem := &mgmttest.Idempotency{}
	h, f := start(t, mgmttest.Options{Idempotency: idem})
	tok := h.OwnerToken(t)
	q := req{method: "POST", path: "/v1/test/things", token: tok, body: `{"name":"a"}`, header: map[string]string{"Idempotency-Key": "old"}}
	expect(t, do(t, h, q), http.StatusCreated, "")
	h.Clock.Advance(management.IdempotencyRetention - time.Second)
	if n, err := h.Server.SweepIdempotency(context.Background()); err != nil || n != 0 {
		t.Fatalf("sweep before 30 days deleted %d (%v)", n, err)
	}
	if got := do(t, h, q); got.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("record was not replayed within 30 days")
	}
	h.Clock.Advance(2 * time.Second)
	if n, err := h.Server.SweepIdempotency(context.Background()); err != nil || n != 1 {
		t.Fatalf("sweep after 30 days deleted %d (%v), want 1", n, err)
	}
	if len(idem.Records()) != 0 {
		t.Fatal("record survived the sweep")
	}
	if got := do(t, h, q); got.header.Get("Idempotent-Replayed") != "" || f.creates != 2 {
		t.Fatal("a swept key was replayed")
	}
}

func TestCursors(t *testing.T) {
	h, f := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	for i := range 5 {
		f.add("thg_"+string(rune('a'+i)), []string{"x", "y"}[i%2])
	}
	list := func(query string) raw {
		return do(t, h, req{method: "GET", path: "/v1/test/things" + query, token: tok})
	}
	page := func(r raw) api.Page[thing] {
		t.Helper()
		expect(t, r, 200, "")
		var p api.Page[thing]
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := page(list("?limit=2"))
	if len(p1.Items) != 2 || p1.NextCursor == "" {
		t.Fatalf("first page = %+v", p1)
	}
	// Added after the first page: beyond the captured upper bound.
	f.add("thg_late", "x")
	p2 := page(list("?limit=2&cursor=" + url.QueryEscape(p1.NextCursor)))
	p3 := page(list("?limit=2&cursor=" + url.QueryEscape(p2.NextCursor)))
	var seen []string
	for _, p := range []api.Page[thing]{p1, p2, p3} {
		for _, it := range p.Items {
			seen = append(seen, it.ID)
		}
	}
	if strings.Join(seen, ",") != "thg_a,thg_b,thg_c,thg_d,thg_e" || p3.NextCursor != "" {
		t.Fatalf("pages = %v (last cursor %q)", seen, p3.NextCursor)
	}

	// Tampering: flip one character of the payload, or of the MAC.
	for _, bad := range []string{
		p1.NextCursor[:3] + flip(p1.NextCursor[3]) + p1.NextCursor[4:],
		p1.NextCursor[:len(p1.NextCursor)-2] + flip(p1.NextCursor[len(p1.NextCursor)-2]) + p1.NextCursor[len(p1.NextCursor)-1:],
		"garbage", "a.b",
	} {
		expect(t, list("?limit=2&cursor="+url.QueryEscape(bad)), 422, "invalid_cursor")
	}
	// Other filters, other endpoint.
	expect(t, list("?limit=2&name=x&cursor="+url.QueryEscape(p1.NextCursor)), 422, "cursor_mismatch")
	// A cursor from a server with another key is invalid.
	h2, _ := start(t, mgmttest.Options{})
	expect(t, do(t, h2, req{method: "GET", path: "/v1/test/things?cursor=" + url.QueryEscape(p1.NextCursor), token: h2.OwnerToken(t)}), 422, "invalid_cursor")

	// Expiry: valid until 15 minutes have passed.
	fresh := page(list("?limit=1")).NextCursor
	h.Clock.Advance(management.CursorLifetime - time.Millisecond)
	page(list("?limit=1&cursor=" + url.QueryEscape(fresh)))
	h.Clock.Advance(time.Millisecond)
	expect(t, list("?limit=1&cursor="+url.QueryEscape(fresh)), 422, "cursor_expired")

	// Strict query parameters.
	expect(t, list("?limit=0"), 422, "invalid_request")
	expect(t, list("?limit=501"), 422, "invalid_request")
	expect(t, list("?bogus=1"), 422, "invalid_request")
	expect(t, list("?name=x&name=y"), 422, "invalid_request")
}

func TestCursorBoundToEndpoint(t *testing.T) {
	clk := mgmttest.Epoch
	c, err := management.NewCursors(bytes.Repeat([]byte{7}, 32), nil, fakeClock{clk})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := http.NewRequest("GET", "http://localhost/v1/work", nil)
	r2, _ := http.NewRequest("GET", "http://localhost/v1/events", nil)
	cur, err := management.EncodeCursor(c, r1, map[string]string{"scope": "s"}, management.Keyset[string]{Bound: "b", After: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if ks, err := management.DecodeCursor[string](c, r1, map[string]string{"scope": "s"}, cur); err != nil || ks.After != "a" || ks.Bound != "b" {
		t.Fatalf("decode = %+v, %v", ks, err)
	}
	if _, err := management.DecodeCursor[string](c, r2, map[string]string{"scope": "s"}, cur); !errors.Is(err, httpapi.ErrCursorMismatch) {
		t.Fatalf("cursor on another endpoint: %v", err)
	}
	if _, err := management.NewCursors([]byte("short"), nil, fakeClock{clk}); err == nil {
		t.Fatal("short cursor key accepted")
	}
}

type fakeClock struct{ t time.Time }

func (f fakeClock) Now() time.Time { return f.t }

func flip(b byte) string {
	if b == 'A' {
		return "B"
	}
	return "A"
}

func TestETagAndNotModified(t *testing.T) {
	h, f := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	f.add("thg_1", "x")
	first := do(t, h, req{method: "GET", path: "/v1/test/things/thg_1", token: tok})
	expect(t, first, 200, "")
	etag := first.header.Get("ETag")
	if etag == "" || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("ETag = %q", etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		got := do(t, h, req{method: "GET", path: "/v1/test/things/thg_1", token: tok, header: map[string]string{"If-None-Match": inm}})
		if got.status != http.StatusNotModified || len(got.body) != 0 || got.header.Get("ETag") != etag {
			t.Fatalf("If-None-Match %s: %d %q ETag %q", inm, got.status, got.body, got.header.Get("ETag"))
		}
	}
	f.touch("thg_1")
	got := do(t, h, req{method: "GET", path: "/v1/test/things/thg_1", token: tok, header: map[string]string{"If-None-Match": etag}})
	expect(t, got, 200, "")
	if got.header.Get("ETag") == etag {
		t.Fatal("ETag did not change with the revision")
	}
	// Through the client: 304 is a response, not an error.
	resp, err := h.Client.Do(context.Background(), "GET", "/v1/test/things/thg_1", nil, &client.RequestOptions{IfNoneMatch: got.header.Get("ETag")})
	if err != nil || resp.Status != http.StatusNotModified {
		t.Fatalf("client conditional read = %v, %v", resp, err)
	}
}

func TestIDsWithSlashes(t *testing.T) {
	h, f := start(t, mgmttest.Options{})
	tok := h.OwnerToken(t)
	id := "github/open-conduit/pr/12"
	f.add(id, "x")
	got := do(t, h, req{method: "GET", path: "/v1/test/things/" + url.PathEscape(id), token: tok})
	expect(t, got, 200, "")
	var th thing
	if err := json.Unmarshal(got.body, &th); err != nil || th.ID != id {
		t.Fatalf("PathValue gave %q (%v), want %q", th.ID, err, id)
	}
	// Unescaped, the slashes are segments of another path.
	expect(t, do(t, h, req{method: "GET", path: "/v1/test/things/" + id, token: tok}), 404, "not_found")
	// Through the client.
	resp, err := h.Client.Do(context.Background(), "GET", "/v1/test/things/"+client.PathEscape(id), nil, nil)
	if err != nil || !strings.Contains(string(resp.Body), `"github/open-conduit/pr/12"`) {
		t.Fatalf("client read of a slashed id = %v, %v", resp, err)
	}
}

func TestHealth(t *testing.T) {
	h, _ := start(t, mgmttest.Options{
		Version: "1.2.3",
		Health:  management.HealthFunc(func(context.Context) (int64, error) { return 7, nil }),
	})
	got, err := h.Client.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "ok" || got.Version != "1.2.3" || got.Generation != 7 {
		t.Fatalf("health = %+v", got)
	}
	expect(t, do(t, h, req{method: "GET", path: "/v1/health?x=1", token: h.OwnerToken(t)}), 422, "invalid_request")
}

func TestBackendTextNeverReachesTheCaller(t *testing.T) {
	var logs bytes.Buffer
	h, _ := start(t, mgmttest.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Health: management.HealthFunc(func(context.Context) (int64, error) {
			return 0, errors.New("database locked: secret=s3cr3t")
		}),
	})
	tok := h.OwnerToken(t)
	for _, path := range []string{"/v1/test/broken", "/v1/health", "/v1/test/panic"} {
		got := do(t, h, req{method: "GET", path: path, token: tok})
		expect(t, got, 500, "internal")
		if bytes.Contains(got.body, []byte("hunter2")) || bytes.Contains(got.body, []byte("s3cr3t")) || bytes.Contains(got.body, []byte("sqlite")) {
			t.Fatalf("backend text in the response: %s", got.body)
		}
	}
	if !strings.Contains(logs.String(), "disk I/O error") || !strings.Contains(logs.String(), "bad handler") {
		t.Fatalf("the failure was not logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), tok) {
		t.Fatal("the token reached the log")
	}
}

type actorKey struct{}

// TestPrincipalOnContext: the handler sees the principal, and what the
// Authenticated hook derives from it (the daemon's bridge to the
// runtime's actor).
func TestPrincipalOnContext(t *testing.T) {
	seen := make(chan [2]string, 2)
	route := management.Route{Method: "GET", Pattern: "/v1/test/whoami", Role: management.RoleView, Handler: func(r *http.Request) (any, error) {
		p, ok := management.PrincipalFrom(r.Context())
		actor, _ := r.Context().Value(actorKey{}).(string)
		if !ok {
			return nil, errors.New("no principal")
		}
		seen <- [2]string{p.Actor(), actor}
		return map[string]string{"actor": p.Actor()}, nil
	}}
	h := mgmttest.Start(t, mgmttest.Options{
		Routes: []management.Route{route},
		Authenticated: func(ctx context.Context, p management.Principal) context.Context {
			return context.WithValue(ctx, actorKey{}, "bridged "+p.Actor())
		},
	})
	alice, _ := h.AddOperator(t, "alice", management.RoleView)
	for tokFile, want := range map[string]string{h.TokenFile: "operator:local", alice: "operator:alice"} {
		if _, err := h.ClientFor(tokFile).Do(context.Background(), "GET", "/v1/test/whoami", nil, nil); err != nil {
			t.Fatal(err)
		}
		got := <-seen
		if got[0] != want || got[1] != "bridged "+want {
			t.Fatalf("principal %q, hook %q; want %q", got[0], got[1], want)
		}
	}
}

// TestShutdownBeforeServe: a Serve whose goroutine starts only after the
// owner already shut the server down returns at once instead of serving
// forever.
func TestShutdownBeforeServe(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	srv, err := management.New(management.Options{Credentials: h.Credentials, Idempotency: h.Idempotency, Health: management.HealthFunc(func(context.Context) (int64, error) { return 1, nil }),
		Clock: clock.System{}, Entropy: clock.SystemEntropy(), Logger: mgmttest.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ocsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve after Shutdown is still serving")
	}
}
