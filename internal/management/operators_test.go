package management_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

func TestBootstrapWritesOwnerToken(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	fi, err := os.Stat(h.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %04o, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(filepath.Dir(h.TokenFile))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("private dir: %v %v", di.Mode(), err)
	}
	tok := h.OwnerToken(t)
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil || len(raw) != 32 {
		t.Fatalf("owner token is not unpadded base64url of 32 bytes: %d bytes, %v", len(raw), err)
	}
	c, err := h.Credentials.ActiveByName(context.Background(), management.OwnerName)
	if err != nil {
		t.Fatal(err)
	}
	if c.Role != management.RoleAdmin || c.Digest != bearer.DigestOf(tok) || !strings.HasPrefix(c.ID, "tok_") {
		t.Fatalf("owner credential = %+v", c)
	}
}

func TestBootstrapLooksOnlyAtTheOwner(t *testing.T) {
	ctx := context.Background()
	dir := mgmttest.NewStateDir(t)
	creds := &mgmttest.Credentials{}
	h := mgmttest.Start(t, mgmttest.Options{StateDir: dir, Credentials: creds})
	h.AddOperator(t, "alice", management.RoleAdmin)
	owner := h.OwnerToken(t)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}

	lock, err := statedir.AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	ops := newOperators(t, creds, h.Clock, clock.SystemEntropy())
	// Ready: the file holds the owner's active credential.
	if st, err := management.BootstrapOperator(ctx, lock, ops); err != nil || st != management.BootstrapReady {
		t.Fatalf("bootstrap = %s, %v; want ready", st, err)
	}
	// A missing file with an active owner credential is stale, even
	// though a named admin exists; nothing changes.
	os.Remove(h.TokenFile)
	if st, err := management.BootstrapOperator(ctx, lock, ops); err != nil || st != management.BootstrapStale {
		t.Fatalf("bootstrap without the file = %s, %v; want stale", st, err)
	}
	if c, err := creds.ActiveByName(ctx, management.OwnerName); err != nil || c.Digest != bearer.DigestOf(owner) {
		t.Fatal("stale bootstrap changed the owner's credential")
	}
	// With the owner's credential revoked, bootstrap issues a new one,
	// whatever named credentials exist.
	c, _ := creds.ActiveByName(ctx, management.OwnerName)
	if err := creds.Revoke(ctx, c.ID, mgmttest.Epoch); err != nil {
		t.Fatal(err)
	}
	if st, err := management.BootstrapOperator(ctx, lock, ops); err != nil || st != management.BootstrapCreated {
		t.Fatalf("bootstrap after revocation = %s, %v; want created", st, err)
	}
	if tok := mustRead(t, h.TokenFile); tok == owner {
		t.Fatal("bootstrap kept the revoked token")
	}
	// Without the lock, nothing happens.
	lock.Close()
	if _, err := management.BootstrapOperator(ctx, lock, ops); err == nil {
		t.Fatal("BootstrapOperator ran without the lock")
	}
	if err := management.RecoverOperator(ctx, lock, ops); err == nil {
		t.Fatal("RecoverOperator ran without the lock")
	}
}

func TestRotation(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	ctx := context.Background()
	aliceFile, aliceIssued := h.AddOperator(t, "alice", management.RoleOperate)
	old := mustRead(t, aliceFile)

	rot, err := client.New(h.Socket, client.StaticToken(old)).Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Name != "alice" || rot.Role != "operate" || rot.Token == "" || rot.Token == old || rot.TokenID == aliceIssued.Credential.ID {
		t.Fatalf("rotation = %+v", rot)
	}
	// The old token is refused at once; the new one works with the same role.
	if _, err := client.New(h.Socket, client.StaticToken(old)).Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("old token after rotation: %v, want unauthorized", err)
	}
	next := client.New(h.Socket, client.StaticToken(rot.Token))
	if _, err := next.Health(ctx); err != nil {
		t.Fatalf("new token: %v", err)
	}
	if _, err := next.AddOperator(ctx, "bob", ""); !client.IsForbiddenRole(err) {
		t.Fatalf("rotation changed the role: %v", err)
	}
	// The owner rotates too, and stays admin.
	ownerRot, err := h.Client.Rotate(ctx)
	if err != nil || ownerRot.Role != "admin" || ownerRot.Name != "local" {
		t.Fatalf("owner rotation = %+v, %v", ownerRot, err)
	}
	if _, err := h.Client.Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("owner's old token file after rotation: %v, want unauthorized", err)
	}
	// The issued token is never stored in idempotency history, even
	// when the caller sends a key.
	got := do(t, h, req{method: "POST", path: "/v1/auth/rotate", token: ownerRot.Token, body: "{}", header: map[string]string{"Idempotency-Key": "rot-1"}})
	expect(t, got, 200, "")
	if recs := h.Idempotency.(*mgmttest.Idempotency).Records(); len(recs) != 0 {
		t.Fatalf("rotation was recorded: %+v", recs)
	}
	// A revoked caller cannot rotate.
	expect(t, do(t, h, req{method: "POST", path: "/v1/auth/rotate", token: ownerRot.Token, body: "{}"}), 401, "unauthorized")
	// Strict body.
	expect(t, do(t, h, req{method: "POST", path: "/v1/auth/rotate", token: rot.Token, body: `{"role":"admin"}`}), 422, "invalid_request")
}

func TestRevocationRules(t *testing.T) {
	execs := &mgmttest.ExecutionTokens{}
	const execTok = "ZXhlY3V0aW9uLXRva2VuLWZvci10ZXN0cy0wMDAwMDA"
	execs.Add(execTok, management.ExecutionToken{ID: "tok_exec", ExecutionID: "exe_1"})
	h := mgmttest.Start(t, mgmttest.Options{ExecutionTokens: execs})
	ctx := context.Background()
	adminFile, _ := h.AddOperator(t, "root", management.RoleAdmin)
	operFile, operIs := h.AddOperator(t, "ops", management.RoleOperate)
	_, viewIs := h.AddOperator(t, "watcher", management.RoleView)
	owner, _ := h.Credentials.ActiveByName(ctx, management.OwnerName)
	admin, oper := h.ClientFor(adminFile), h.ClientFor(operFile)

	// Non-admin refused on another operator's credential.
	if _, err := oper.Revoke(ctx, viewIs.Credential.ID, nil); !client.IsForbiddenRole(err) {
		t.Fatalf("operate revoking another operator: %v, want forbidden_role", err)
	}
	// The owner is unrevocable by a named admin.
	if _, err := admin.Revoke(ctx, owner.ID, nil); !client.IsForbidden(err) || !strings.Contains(err.Error(), "auth recover") {
		t.Fatalf("named admin revoking the owner: %v, want forbidden naming auth recover", err)
	}
	if _, err := h.Client.Health(ctx); err != nil {
		t.Fatalf("owner locked out: %v", err)
	}
	// Execution tokens: operate may revoke them.
	res, err := oper.Revoke(ctx, "tok_exec", nil)
	if err != nil || res.Class != "execution" {
		t.Fatalf("operate revoking an execution token: %+v, %v", res, err)
	}
	if tk, _ := execs.ByDigest(ctx, bearer.DigestOf(execTok)); tk.RevokedAt.IsZero() {
		t.Fatal("execution token not revoked")
	}
	// Admin revokes a named operator.
	res, err = admin.Revoke(ctx, viewIs.Credential.ID, &client.RequestOptions{IdempotencyKey: "rv-1"})
	if err != nil || res.Class != "operator" || !res.Revoked {
		t.Fatalf("admin revoking a named operator: %+v, %v", res, err)
	}
	if c, _ := h.Credentials.ByID(ctx, viewIs.Credential.ID); c.Active() {
		t.Fatal("named operator still active")
	}
	// A lost response: the same key replays.
	again, err := admin.Revoke(ctx, viewIs.Credential.ID, &client.RequestOptions{IdempotencyKey: "rv-1"})
	if err != nil || !again.Replayed || !bytes.Equal(again.Raw, res.Raw) {
		t.Fatalf("replayed revocation = %+v, %v", again, err)
	}
	// Unknown id.
	if _, err := admin.Revoke(ctx, "tok_nope", nil); !client.IsNotFound(err) {
		t.Fatalf("unknown id: %v", err)
	}
	// Self-revocation by a non-admin, then the token is dead.
	if _, err := oper.Revoke(ctx, operIs.Credential.ID, nil); err != nil {
		t.Fatalf("self-revocation: %v", err)
	}
	if _, err := oper.Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("self-revoked token: %v", err)
	}
	// The owner may revoke itself.
	if _, err := h.Client.Revoke(ctx, owner.ID, nil); err != nil {
		t.Fatalf("owner self-revocation: %v", err)
	}
	if _, err := h.Client.Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("owner token after self-revocation: %v", err)
	}
}

func TestRecoverOperatorAfterLostRotation(t *testing.T) {
	ctx := context.Background()
	dir := mgmttest.NewStateDir(t)
	creds := &mgmttest.Credentials{}
	h := mgmttest.Start(t, mgmttest.Options{StateDir: dir, Credentials: creds})
	namedFile, _ := h.AddOperator(t, "alice", management.RoleView)
	lostFile := h.TokenFile
	// Rotate and lose the response: the file still holds the old token.
	if _, err := h.Client.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.Health(ctx); !client.IsUnauthorized(err) {
		t.Fatalf("owner after a lost rotation: %v", err)
	}
	// Recovery needs the lock: refused while the server holds it.
	if _, err := statedir.AcquireLock(dir); err == nil {
		t.Fatal("lock not held by the running server")
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	lock, err := statedir.AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := management.RecoverOperator(ctx, lock, newOperators(t, creds, h.Clock, clock.SystemEntropy())); err != nil {
		t.Fatal(err)
	}
	lock.Close()

	h2 := mgmttest.Start(t, mgmttest.Options{StateDir: dir, Credentials: creds})
	if _, err := h2.Client.Health(ctx); err != nil {
		t.Fatalf("recovered owner token: %v", err)
	}
	if _, err := h2.Client.AddOperator(ctx, "bob", ""); err != nil {
		t.Fatalf("recovered owner is not admin: %v", err)
	}
	// The lost rotation's credential is revoked too: one active owner.
	list, err := h2.Client.Operators(ctx, client.Page{})
	if err != nil {
		t.Fatal(err)
	}
	active := 0
	for _, o := range list.Items {
		if o.Name == "local" && o.Active {
			active++
		}
	}
	if active != 1 {
		t.Fatalf("%d active owner credentials after recovery", active)
	}
	// Named operators are untouched.
	if _, err := h2.ClientFor(namedFile).Health(ctx); err != nil {
		t.Fatalf("named operator after recovery: %v", err)
	}
	if lostFile != h2.TokenFile {
		t.Fatal("token file moved")
	}
}

func TestIssueOperators(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	ctx := context.Background()
	is, err := h.Client.AddOperator(ctx, "carol", "")
	if err != nil {
		t.Fatal(err)
	}
	if is.Role != "view" || is.Name != "carol" || is.Token == "" {
		t.Fatalf("issued = %+v", is)
	}
	for _, bad := range []string{"", "local", "Carol", "1abc", "a_b", "a.b", strings.Repeat("a", 33)} {
		if _, err := h.Client.AddOperator(ctx, bad, "view"); !client.IsInvalidRequest(err) {
			t.Errorf("name %q: %v, want invalid_request", bad, err)
		}
	}
	if _, err := h.Client.AddOperator(ctx, strings.Repeat("a", 32), "operate"); err != nil {
		t.Errorf("32-character name refused: %v", err)
	}
	if _, err := h.Client.AddOperator(ctx, "dave", "root"); !client.IsInvalidRequest(err) {
		t.Errorf("role root: %v", err)
	}
	// One active credential per name.
	if _, err := h.Client.AddOperator(ctx, "carol", "admin"); !client.IsConflict(err) || !strings.Contains(err.Error(), "revoke") {
		t.Fatalf("second credential for carol: %v, want conflict saying to revoke", err)
	}
	// After revocation the name can be issued again.
	if _, err := h.Client.Revoke(ctx, is.TokenID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client.AddOperator(ctx, "carol", "operate"); err != nil {
		t.Fatalf("reissue after revocation: %v", err)
	}
	// The issued token is not in idempotency history, even with a key.
	got := do(t, h, req{method: "POST", path: "/v1/auth/operators", token: h.OwnerToken(t), body: `{"name":"erin"}`, header: map[string]string{"Idempotency-Key": "iss-1"}})
	expect(t, got, http.StatusCreated, "")
	for _, rec := range h.Idempotency.(*mgmttest.Idempotency).Records() {
		if rec.Path == "/v1/auth/operators" {
			t.Fatal("operator issue was recorded")
		}
	}
}

// TestListingHasNoTokenOrDigest greps the raw listing for every token
// and every digest in hex and base64.
func TestListingHasNoTokenOrDigest(t *testing.T) {
	var logs bytes.Buffer
	h := mgmttest.Start(t, mgmttest.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	tokens := []string{h.OwnerToken(t)}
	for _, n := range []string{"amy", "ben"} {
		is, err := h.Client.AddOperator(ctx, n, "operate")
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, is.Token)
	}
	rot, err := client.New(h.Socket, client.StaticToken(tokens[1])).Rotate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, rot.Token)
	got := do(t, h, req{method: "GET", path: "/v1/auth/operators", token: h.OwnerToken(t)})
	expect(t, got, 200, "")
	for _, tok := range tokens {
		d := bearer.DigestOf(tok)
		for _, secret := range []string{tok, hex.EncodeToString(d[:]), base64.StdEncoding.EncodeToString(d[:]), base64.RawURLEncoding.EncodeToString(d[:])} {
			if bytes.Contains(got.body, []byte(secret)) {
				t.Fatalf("listing contains a token or digest: %s", got.body)
			}
			if strings.Contains(logs.String(), secret) {
				t.Fatal("log contains a token or digest")
			}
		}
	}
	list, err := h.Client.ListOperators(ctx, client.OperatorFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, o := range list.Items {
		names[o.Name]++
		if o.TokenID == "" || o.Role == "" || o.CreatedAt.IsZero() || (!o.Active && o.RevokedAt == nil) {
			t.Fatalf("listing entry incomplete: %+v", o)
		}
	}
	if names["local"] != 1 || names["amy"] != 2 || names["ben"] != 1 {
		t.Fatalf("listing names = %v", names)
	}
}

// newOperators is management.NewOperators for a test: the test says
// which clock and entropy source (production code has no defaults).
func newOperators(t *testing.T, creds management.Credentials, c clock.Clock, e clock.Entropy) *management.Operators {
	t.Helper()
	ops, err := management.NewOperators(creds, c, e)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestOperatorsUnit(t *testing.T) {
	ops := newOperators(t, &mgmttest.Credentials{}, fakeClock{mgmttest.Epoch}, failingReader{})
	if _, err := ops.Issue(context.Background(), "amy", management.RoleView); err == nil {
		t.Fatal("Issue succeeded without entropy")
	}
	if _, err := ops.Rotate(context.Background(), management.Principal{Class: management.ClassExecution, TokenID: "tok_x"}); !errors.Is(err, extension.ErrUnauthorized) {
		t.Fatal("an execution principal rotated")
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

// pageAll reads a listing from its first page to its last through next,
// limit items a page, and returns every item's key and the page count.
func pageAll[T any](t *testing.T, limit int, next func(client.Page) (*client.List[T], error), key func(T) string) (keys []string, pages int, firstCursor string) {
	t.Helper()
	p := client.Page{Limit: limit}
	for {
		page, err := next(p)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		pages++
		if len(page.Items) > limit {
			t.Fatalf("page %d has %d items, limit %d", pages, len(page.Items), limit)
		}
		for _, it := range page.Items {
			keys = append(keys, key(it))
		}
		if pages == 1 {
			firstCursor = page.NextCursor
		}
		if page.NextCursor == "" {
			return keys, pages, firstCursor
		}
		if pages > 100 {
			t.Fatal("the listing does not end")
		}
		p.Cursor = page.NextCursor
	}
}

// The operator listing pages on (created_at, id) with a captured upper
// bound, on the in-memory store and on SQLite alike: oldest first (not by
// name), ties by id, a credential issued while it is paged never joins it,
// and its cursors are checked like every list's.
func TestOperatorListPages(t *testing.T) {
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			var h *mgmttest.Harness
			// other is a filtered cursor of another listing, and the path
			// of that listing with its filter.
			var otherCursor, otherPath string
			if backend == "memory" {
				var f *fixture
				h, f = start(t, mgmttest.Options{})
				f.add("t1", "n")
				f.add("t2", "n")
				otherPath = "/v1/test/things?name=n&limit=1"
			} else {
				s := mgmttest.StartStack(t, mgmttest.StackOptions{})
				createWork(t, s, "w1")
				createWork(t, s, "w2")
				h = s.Harness
				otherPath = "/v1/work?scope=setup&limit=1"
			}
			var other struct {
				NextCursor string `json:"next_cursor"`
			}
			got := do(t, h, req{method: "GET", path: otherPath, token: h.OwnerToken(t)})
			expect(t, got, 200, "")
			if err := json.Unmarshal(got.body, &other); err != nil || other.NextCursor == "" {
				t.Fatalf("no cursor from %s: %s", otherPath, got.body)
			}
			otherCursor = other.NextCursor

			owner, err := h.Credentials.ActiveByName(ctx, management.OwnerName)
			if err != nil {
				t.Fatal(err)
			}
			creds := []management.Credential{owner}
			// Names out of alphabetical order, two at each instant.
			for i, name := range []string{"zoe", "amy", "kim", "bob", "eve", "dan"} {
				if i%2 == 0 {
					h.Clock.Advance(time.Second)
				}
				_, is := h.AddOperator(t, name, management.RoleView)
				creds = append(creds, is.Credential)
			}
			slices.SortFunc(creds, func(a, b management.Credential) int {
				return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
			})
			var want, names []string
			for _, c := range creds {
				want, names = append(want, c.ID), append(names, c.Name)
			}
			if slices.IsSorted(names) {
				t.Fatalf("test setup: creation order %v is also name order", names)
			}

			c := h.Client
			page, err := c.ListOperators(ctx, client.OperatorFilter{All: true, Page: client.Page{Limit: 3}})
			if err != nil || len(page.Items) != 3 || page.NextCursor == "" {
				t.Fatalf("first page = %+v, %v", page, err)
			}
			firstCursor, issued := page.NextCursor, h.Clock.Now()
			// While the listing is paged, a new credential never joins it;
			// a revocation shows (it does not move a credential).
			h.Clock.Advance(time.Second)
			_, late := h.AddOperator(t, "late", management.RoleView)
			// (creds[5] comes on the second page.)
			gone := creds[5]
			if err := h.Credentials.Revoke(ctx, gone.ID, h.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			var seen, revoked []string
			for pages := 1; ; pages++ {
				for _, o := range page.Items {
					seen = append(seen, o.TokenID)
					if !o.Active && o.RevokedAt != nil {
						revoked = append(revoked, o.TokenID)
					}
				}
				if page.NextCursor == "" {
					if pages != 3 {
						t.Errorf("%d pages, want 3 (7 credentials by 3)", pages)
					}
					break
				}
				if page, err = c.ListOperators(ctx, client.OperatorFilter{All: true, Page: client.Page{Limit: 3, Cursor: page.NextCursor}}); err != nil {
					t.Fatalf("page %d: %v", pages+1, err)
				}
			}
			if !slices.Equal(seen, want) {
				t.Errorf("paged %v, want %v by creation time then id", seen, want)
			}
			if !slices.Equal(revoked, []string{gone.ID}) {
				t.Errorf("revoked while paging = %v, want [%s]", revoked, gone.ID)
			}
			// Started again, the listing has the late credential, last.
			again, pages, _ := pageAll(t, 2, func(p client.Page) (*client.List[client.Operator], error) {
				return c.ListOperators(ctx, client.OperatorFilter{All: true, Page: p})
			},
				func(o client.Operator) string { return o.TokenID })
			if !slices.Equal(again, append(slices.Clone(want), late.Credential.ID)) || pages != 4 {
				t.Errorf("fresh listing = %v in %d pages, want %v then %s in 4", again, pages, want, late.Credential.ID)
			}

			// The cursor is checked like every list's.
			tok := h.OwnerToken(t)
			tampered := []byte(firstCursor)
			tampered[5] ^= 1
			for _, bad := range []string{string(tampered), "garbage", firstCursor + "x"} {
				expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?cursor=" + url.QueryEscape(bad), token: tok}), 422, "invalid_cursor")
			}
			expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?cursor=" + url.QueryEscape(otherCursor), token: tok}), 422, "cursor_mismatch")
			expect(t, do(t, h, req{method: "GET", path: otherPath + "&cursor=" + url.QueryEscape(firstCursor), token: tok}), 422, "cursor_mismatch")
			expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?name=amy", token: tok}), 422, "invalid_request")
			for _, limit := range []string{"0", "501", "x"} {
				expect(t, do(t, h, req{method: "GET", path: "/v1/auth/operators?limit=" + limit, token: tok}), 422, "invalid_request")
			}
			// A view credential pages too.
			viewFile, _ := h.AddOperator(t, "viewer", management.RoleView)
			if p, err := h.ClientFor(viewFile).ListOperators(ctx, client.OperatorFilter{All: true, Page: client.Page{Limit: 3, Cursor: firstCursor}}); err != nil || len(p.Items) != 3 || p.Items[0].TokenID != want[3] {
				t.Errorf("view credential's second page = %+v, %v", p, err)
			}
			// Expiry: good until 15 minutes have passed, refused from then.
			h.Clock.Advance(issued.Add(management.CursorLifetime - time.Millisecond).Sub(h.Clock.Now()))
			if _, err := c.ListOperators(ctx, client.OperatorFilter{All: true, Page: client.Page{Limit: 3, Cursor: firstCursor}}); err != nil {
				t.Errorf("cursor just inside its lifetime: %v", err)
			}
			h.Clock.Advance(time.Millisecond)
			if _, err := c.ListOperators(ctx, client.OperatorFilter{All: true, Page: client.Page{Limit: 3, Cursor: firstCursor}}); client.ErrorCode(err) != "cursor_expired" {
				t.Errorf("cursor after 15 minutes: %v", err)
			}
		})
	}
}

func tokenIDs(list []client.Operator) []string {
	out := make([]string, 0, len(list))
	for _, o := range list {
		out = append(out, o.TokenID)
	}
	return out
}

// An empty page is never returned with a cursor, and a limit at least the
// listing's size answers in one page.
func TestOperatorListOnePage(t *testing.T) {
	h := mgmttest.Start(t, mgmttest.Options{})
	ctx := context.Background()
	h.AddOperator(t, "amy", management.RoleView)
	list, err := h.Client.Operators(ctx, client.Page{Limit: 2})
	if err != nil || len(list.Items) != 2 || list.NextCursor != "" {
		t.Fatalf("two credentials, limit 2 = %+v, %v", list, err)
	}
	if !strings.Contains(string(list.Raw), `"items":[`) || strings.Contains(string(list.Raw), "next_cursor") {
		t.Errorf("last page body = %s", list.Raw)
	}
	all, err := h.Client.Operators(ctx, client.Page{})
	if err != nil || !slices.Equal(tokenIDs(all.Items), tokenIDs(list.Items)) || all.NextCursor != "" {
		t.Errorf("default page = %+v, %v", all, err)
	}
}
