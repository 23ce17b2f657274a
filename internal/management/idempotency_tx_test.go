package management_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// Every idempotent route whose effect is one transaction of coordination
// storage writes its Idempotency-Key record in that transaction: a new
// request commits once, and its record replays the very response it got.
// (With the record written afterwards, as before, each step commits
// twice.)
func TestIdempotencyRecordCommitsWithTheRequest(t *testing.T) {
	var commits atomic.Int64
	s := mgmttest.StartStack(t, mgmttest.StackOptions{OnCommit: func(time.Duration) { commits.Add(1) }})
	ctx := context.Background()
	c := s.Client
	type step struct {
		name string
		// prep sets the step up; what it commits is not counted.
		prep func()
		do   func(key string) (raw []byte, replayed bool, err error)
	}
	controlled := func(out *client.Controlled, err error) ([]byte, bool, error) {
		if err != nil {
			return nil, false, err
		}
		return out.Raw, out.Replayed, nil
	}
	applied := func(out *client.Applied, err error) ([]byte, bool, error) {
		if err != nil {
			return nil, false, err
		}
		return out.Raw, out.Replayed, nil
	}
	var work, teamWork, execWork, exe, operatorToken string
	var doc []byte
	var base int64
	steps := []step{
		{name: "create", do: func(key string) ([]byte, bool, error) {
			out, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "setup", Input: input(`{"n":1}`)}, keyed(key))
			if err != nil {
				return nil, false, err
			}
			work = out.Work.ID
			return out.Raw, out.Replayed, nil
		}},
		{name: "emit", do: func(key string) ([]byte, bool, error) {
			out, err := c.Emit(ctx, client.EmitRequest{Scope: "setup", Type: "note.added", Data: []byte(`{"n":2}`)}, keyed(key))
			if err != nil {
				return nil, false, err
			}
			return out.Raw, out.Replayed, nil
		}},
		{name: "wake", do: func(key string) ([]byte, bool, error) {
			out, err := c.WakeWork(ctx, work, client.WakeRequest{Data: []byte(`{"why":"look"}`)}, keyed(key))
			if err != nil {
				return nil, false, err
			}
			return out.Raw, out.Replayed, nil
		}},
		{name: "hold", do: func(key string) ([]byte, bool, error) {
			return controlled(c.HoldWork(ctx, work, client.HoldRequest{Reason: "wait for the window"}, keyed(key)))
		}},
		{name: "release", do: func(key string) ([]byte, bool, error) {
			return controlled(c.ReleaseWork(ctx, work, "window open", keyed(key)))
		}},
		{name: "attach", do: func(key string) ([]byte, bool, error) {
			return controlled(c.AttachWork(ctx, work, client.AttachRequest{CorrelationKey: "ticket-7"}, keyed(key)))
		}},
		{name: "cancel", do: func(key string) ([]byte, bool, error) {
			return controlled(c.CancelWork(ctx, work, "done", keyed(key)))
		}},
		{name: "retry", do: func(key string) ([]byte, bool, error) {
			return controlled(c.RetryWork(ctx, work, "again", keyed(key)))
		}},
		{name: "rebind", prep: func() {
			out, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "team", Binding: "a"}, keyed("prep-team"))
			if err != nil {
				t.Fatal(err)
			}
			teamWork = out.Work.ID
		}, do: func(key string) ([]byte, bool, error) {
			return controlled(c.RebindWork(ctx, teamWork, client.RebindRequest{Binding: "b"}, keyed(key)))
		}},
		{name: "execution cancel", prep: func() {
			execWork = createWork(t, s, "prep-exec").Work.ID
			exe = insertExecution(t, s, execWork, "exe_tx")
		}, do: func(key string) ([]byte, bool, error) {
			return controlled(c.CancelExecution(ctx, exe, "stop it", keyed(key)))
		}},
		{name: "config apply", prep: func() {
			base = s.Config.Active().Generation
			doc = bytes.Replace(mgmttest.StackConfig, []byte(`"scopes": {`), []byte(`"scopes": {"extra": {},`), 1)
		}, do: func(key string) ([]byte, bool, error) {
			return applied(c.ApplyConfig(ctx, doc, base, "", keyed(key)))
		}},
		{name: "config set", prep: func() {
			base = s.Config.Active().Generation
		}, do: func(key string) ([]byte, bool, error) {
			return applied(c.SetConfig(ctx, "/scopes/more", []byte(`{}`), base, keyed(key)))
		}},
		{name: "auth revoke", prep: func() {
			_, is := s.AddOperator(t, "bob", management.RoleOperate)
			operatorToken = is.Credential.ID
		}, do: func(key string) ([]byte, bool, error) {
			out, err := c.Revoke(ctx, operatorToken, keyed(key))
			if err != nil {
				return nil, false, err
			}
			return out.Raw, out.Replayed, nil
		}},
	}
	for _, st := range steps {
		if st.prep != nil {
			st.prep()
		}
		before := commits.Load()
		key := "tx-" + strings.ReplaceAll(st.name, " ", "-")
		first, replayed, err := st.do(key)
		if err != nil || replayed {
			t.Fatalf("%s: %v (replayed %v)", st.name, err, replayed)
		}
		if n := commits.Load() - before; n != 1 {
			t.Fatalf("%s committed %d transactions, want one: the effect and its Idempotency-Key record together", st.name, n)
		}
		again, replayed, err := st.do(key)
		if err != nil || !replayed || !bytes.Equal(again, first) {
			t.Fatalf("%s replay: %v (replayed %v)\nfirst %s\nagain %s", st.name, err, replayed, first, again)
		}
		if n := commits.Load() - before; n != 1 {
			t.Fatalf("%s's replay committed %d more transactions, want none", st.name, n-1)
		}
	}
	if got := s.Config.Active().Generation; got != base+1 {
		t.Fatalf("active generation %d, want %d: each apply published once", got, base+1)
	}
}

// failingRecords is Idempotency-Key history on coordination storage whose
// writes inside a request's transaction fail while fail is set: the
// transaction must then roll the effect back with its record.
type failingRecords struct {
	management.IdempotencyStore
	store storage.Store
	fail  atomic.Bool
}

func newFailingRecords(s storage.Store) *failingRecords {
	return &failingRecords{IdempotencyStore: management.StoreIdempotency(s), store: s}
}

// PutInTx makes failingRecords a store that writes inside the request's
// transaction, as management.StoreIdempotency is.
func (f *failingRecords) PutInTx(ctx context.Context, tx storage.Tx, rec management.IdempotencyRecord) error {
	if f.fail.Load() {
		return errors.New("the record's write failed")
	}
	return tx.PutIdempotency(ctx, &storage.IdempotencyRecord{Principal: rec.Principal, Key: rec.Key, Method: rec.Method,
		Path: rec.Path, BodyHash: rec.BodyHash, Status: rec.Status, Body: rec.Body, CreatedAt: rec.CreatedAt})
}

// A config apply, a config set and an operator credential's revoke whose
// Idempotency-Key record cannot be written in their transaction change
// nothing: the generation, the config file and the credential stay as
// they were. The same request then succeeds and is replayed.
func TestIdempotencyRecordFailureRollsTheEffectBack(t *testing.T) {
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	recs := newFailingRecords(s.Store)
	// A second server on the stack's store, as a second daemon sharing
	// it would be, with the same owner: its token file copied.
	dir := mgmttest.NewStateDir(t)
	if err := statedir.Prepare(dir); err != nil {
		t.Fatal(err)
	}
	if err := statedir.EnsurePrivateSubdir(filepath.Join(dir, statedir.PrivateDir)); err != nil {
		t.Fatal(err)
	}
	if err := statedir.WriteTokenFile(statedir.OwnerTokenPath(dir), s.OwnerToken(t)); err != nil {
		t.Fatal(err)
	}
	h := mgmttest.Start(t, mgmttest.Options{
		StateDir: dir, Idempotency: recs, Credentials: management.StoreCredentials(s.Store), Health: s.Config, Clock: s.Clock,
		Routes: s.Resources.Routes(),
		Authenticated: func(ctx context.Context, p management.Principal) context.Context {
			return kernel.WithActor(ctx, p.Actor())
		},
	})
	owner := h.OwnerToken(t)
	base := s.Config.Active().Generation
	configPath := s.Config.ConfigPath()
	fileBefore, errBefore := os.ReadFile(configPath)
	var doc any
	if err := json.Unmarshal(bytes.Replace(mgmttest.StackConfig, []byte(`"scopes": {`), []byte(`"scopes": {"extra": {},`), 1), &doc); err != nil {
		t.Fatal(err)
	}
	_, bob := h.AddOperator(t, "bob", management.RoleOperate)
	body := func(v map[string]any) func() string {
		return func() string {
			if _, ok := v["expected_generation"]; ok {
				// Against the generation each apply before it made.
				v["expected_generation"] = s.Config.Active().Generation
			}
			b, _ := json.Marshal(v)
			return string(b)
		}
	}
	for _, c := range []struct {
		name, path string
		body       func() string
		unchanged  func() error
	}{
		{"config apply", "/v1/config/apply", body(map[string]any{"config": doc, "expected_generation": 0}), func() error {
			if got := s.Config.Active().Generation; got != base {
				return errors.New("a generation was published")
			}
			if latest, err := s.Store.LatestGeneration(context.Background()); err != nil || latest.Number != base {
				return errors.New("a generation was committed")
			}
			if now, err := os.ReadFile(configPath); !bytes.Equal(now, fileBefore) || (err == nil) != (errBefore == nil) {
				return errors.New("the config file was not put back")
			}
			return nil
		}},
		{"config set", "/v1/config/set", body(map[string]any{"pointer": "/scopes/more", "value": map[string]any{}, "expected_generation": 0}), func() error {
			if latest, err := s.Store.LatestGeneration(context.Background()); err != nil || latest.Number != base {
				return errors.New("a generation was committed")
			}
			return nil
		}},
		{"auth revoke", "/v1/auth/revoke", body(map[string]any{"token_id": bob.Credential.ID}), func() error {
			if cr, err := s.Store.GetCredential(context.Background(), bob.Credential.ID); err != nil || !cr.Active() {
				return errors.New("the credential was revoked")
			}
			return nil
		}},
	} {
		key := map[string]string{"Idempotency-Key": "fail-" + strings.ReplaceAll(c.name, " ", "-")}
		b := c.body()
		recs.fail.Store(true)
		failed := do(t, h, req{method: "POST", path: c.path, token: owner, body: b, header: key})
		if failed.status < 500 {
			t.Fatalf("%s whose record failed answered %d %s, want a server error", c.name, failed.status, failed.body)
		}
		if err := c.unchanged(); err != nil {
			t.Fatalf("%s whose record failed: %v; the effect must roll back with its record", c.name, err)
		}
		recs.fail.Store(false)
		first := do(t, h, req{method: "POST", path: c.path, token: owner, body: b, header: key})
		if first.status != http.StatusOK || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("%s retried = %d %s (replayed %q)", c.name, first.status, first.body, first.header.Get("Idempotent-Replayed"))
		}
		again := do(t, h, req{method: "POST", path: c.path, token: owner, body: b, header: key})
		if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
			t.Fatalf("%s replay = %d %s (replayed %q), want %s", c.name, again.status, again.body, again.header.Get("Idempotent-Replayed"), first.body)
		}
		base = s.Config.Active().Generation
	}
}

// An execution token's revoke records its Idempotency-Key response in the
// toolbelt's own revoke transaction: when the record cannot be written,
// the token stays live; then the same request revokes it and is replayed.
func TestExecutionTokenRevokeRecordsInItsTransaction(t *testing.T) {
	f, err := toolbelttest.NewFixture(t.TempDir(), toolbelttest.Real, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tb := f.TB.(*toolbelt.Toolbelt)
	recs := newFailingRecords(f.Env.Store)
	h := mgmttest.Start(t, mgmttest.Options{ExecutionTokens: management.ToolbeltTokens(tb), Idempotency: recs, Clock: f.Env.Clock})
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	owner := h.OwnerToken(t)
	body, _ := json.Marshal(map[string]any{"token_id": a.TokenID})
	key := map[string]string{"Idempotency-Key": "revoke-exec"}

	recs.fail.Store(true)
	failed := do(t, h, req{method: "POST", path: "/v1/auth/revoke", token: owner, body: string(body), header: key})
	if failed.status < 500 {
		t.Fatalf("revoke whose record failed answered %d %s, want a server error", failed.status, failed.body)
	}
	if tok, err := f.Env.Store.GetToken(context.Background(), a.TokenID); err != nil || !tok.RevokedAt.IsZero() {
		t.Fatalf("after a failed record the token is %+v (%v), want it live: the revoke rolls back with its record", tok, err)
	}
	recs.fail.Store(false)
	first := do(t, h, req{method: "POST", path: "/v1/auth/revoke", token: owner, body: string(body), header: key})
	if first.status != http.StatusOK || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("revoke = %d %s", first.status, first.body)
	}
	if tok, err := f.Env.Store.GetToken(context.Background(), a.TokenID); err != nil || tok.RevokedAt.IsZero() {
		t.Fatalf("after the revoke the token is %+v (%v), want it revoked", tok, err)
	}
	rec, err := f.Env.Store.GetIdempotency(context.Background(), "operator:local", "revoke-exec")
	if err != nil || !bytes.Equal(rec.Body, first.body) {
		t.Fatalf("the record = %+v (%v), want the response %s", rec, err, first.body)
	}
	again := do(t, h, req{method: "POST", path: "/v1/auth/revoke", token: owner, body: string(body), header: key})
	if again.status != http.StatusOK || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("replay = %d %s (replayed %q)", again.status, again.body, again.header.Get("Idempotent-Replayed"))
	}
}
