package toolbelt_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// digestCounter counts the toolbelt's token lookups by digest.
type digestCounter struct {
	storage.Store
	n atomic.Int64
}

func (d *digestCounter) GetTokenByDigest(ctx context.Context, digest []byte) (storage.Token, error) {
	d.n.Add(1)
	return d.Store.GetTokenByDigest(ctx, digest)
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type cacheFixture struct {
	f    *toolbelttest.Fixture
	a    *toolbelttest.Attempt
	tb   *toolbelt.Toolbelt
	look *digestCounter
	logs *lockedBuffer
}

// warmCache starts an attempt and makes two calls with its token: the
// second must not look the token up again.
func warmCache(t *testing.T) *cacheFixture {
	t.Helper()
	cf := &cacheFixture{logs: &lockedBuffer{}}
	h := toolbelttest.Harness{Name: "cache", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		opts := env.Options()
		cf.look = &digestCounter{Store: opts.Store}
		opts.Store = cf.look
		opts.Logger = slog.New(slog.NewJSONHandler(cf.logs, nil))
		tb, err := toolbelt.New(opts)
		cf.tb = tb
		return tb, err
	}}
	f, err := toolbelttest.NewFixture(t.TempDir(), h, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cf.f = f
	if cf.a, err = f.Start(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n := cf.look.n.Load(); n != 1 {
		t.Fatalf("two calls looked their token up %d times, want once (the second from the cache)", n)
	}
	return cf
}

func refused(t *testing.T, err error, why string) {
	t.Helper()
	if !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("%s: the next call answered %v, want forbidden", why, err)
	}
}

// A live token narrowed by an apply is refused on its very next call,
// however warm the cache is.
func TestTokenCacheNarrowedCeilingRefusesTheNextCall(t *testing.T) {
	cf := warmCache(t)
	cf.f.Env.Ceiling.Deny(toolbelttest.Scope, "emit")
	_, err := cf.f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, "")
	refused(t, err, "after the ceiling narrowed")
	cf.f.Env.Ceiling.Allow(toolbelttest.Scope, "emit")
	cf.tb.InvalidateTokens()
	if _, err := cf.f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, ""); err != nil {
		t.Fatalf("after the ceiling widened again: %v", err)
	}
	// The refused call looked its stored record up once (still live: the
	// refusal stands), and the call after InvalidateTokens once more.
	if n := cf.look.n.Load(); n != 3 {
		t.Fatalf("token looked up %d times, want 3: InvalidateTokens empties the cache", n)
	}
}

// A token revoked by id is refused on its next call.
func TestTokenCacheRevokedTokenRefusesTheNextCall(t *testing.T) {
	cf := warmCache(t)
	if err := cf.tb.Revoke(context.Background(), cf.a.TokenID); err != nil {
		t.Fatal(err)
	}
	_, err := cf.f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, "")
	refused(t, err, "after the revocation")
	if !strings.Contains(cf.logs.String(), "was revoked") {
		t.Fatalf("the refusal is not the revoked token's:\n%s", cf.logs)
	}
}

// A token revoked in storage outside the toolbelt (its attempt finished)
// is refused on its next call with the very refusal an uncached call
// gets: the token's revocation, not the lease guard's.
func TestTokenCacheFinishedAttemptRefusedAsWithoutTheCache(t *testing.T) {
	cf := warmCache(t)
	// As the scheduler finishes an attempt: the execution ends and its
	// tokens are revoked in the same transaction, not by the toolbelt.
	ctx := context.Background()
	err := cf.f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		st, res := storage.ExecutionFinished, storage.ResultSucceeded
		fin, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: cf.a.Execution.ID, Epoch: cf.a.Execution.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			State: &st, Result: &res, Now: cf.f.Env.Clock.Now(),
		})
		if err != nil {
			return err
		}
		return storage.RevokeFinishedTokens(ctx, tx, fin, cf.f.Env.Clock.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cf.f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, "")
	refused(t, err, "after the attempt finished")
	if !strings.Contains(cf.logs.String(), "was revoked") {
		t.Fatalf("the refusal is not the revoked token's:\n%s", cf.logs)
	}
}

// A recovered attempt's new epoch refuses the old token at once.
func TestTokenCacheNewEpochRefusesTheOldToken(t *testing.T) {
	cf := warmCache(t)
	b, err := cf.f.Recover(cf.a)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cf.f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, "")
	refused(t, err, "after the recovery")
	if _, err := cf.f.Call(b.Token, "emit", `{"type":"cache.tick"}`, ""); err != nil {
		t.Fatalf("the new epoch's token: %v", err)
	}
}

// CachedExecutionToken answers from the cache alone: a token a call
// authenticated with, until something drops it or it expires.
func TestCachedExecutionTokenFollowsTheCache(t *testing.T) {
	cf := warmCache(t)
	d := bearer.DigestOf(cf.a.Token)
	if !cf.tb.CachedExecutionToken(d) {
		t.Fatal("a token two calls authenticated with is not cached")
	}
	other, err := cf.f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if cf.tb.CachedExecutionToken(bearer.DigestOf(other.Token)) {
		t.Fatal("a token no call used is reported cached")
	}
	before := cf.look.n.Load()
	cf.tb.CachedExecutionToken(d)
	if cf.look.n.Load() != before {
		t.Fatal("CachedExecutionToken read storage")
	}
	cf.tb.InvalidateTokens()
	if cf.tb.CachedExecutionToken(d) {
		t.Fatal("still cached after InvalidateTokens")
	}
	if _, err := cf.f.Call(cf.a.Token, "emit", `{"type":"cache.tick"}`, ""); err != nil {
		t.Fatal(err)
	}
	if err := cf.tb.Revoke(context.Background(), cf.a.TokenID); err != nil {
		t.Fatal(err)
	}
	if cf.tb.CachedExecutionToken(d) {
		t.Fatal("still cached after its revocation")
	}
	if _, err := cf.f.Call(other.Token, "emit", `{"type":"cache.tick"}`, ""); err != nil {
		t.Fatal(err)
	}
	if !cf.tb.CachedExecutionToken(bearer.DigestOf(other.Token)) {
		t.Fatal("the second attempt's token is not cached after its call")
	}
	cf.f.Env.Clock.Advance(toolbelttest.Deadline + time.Minute)
	if cf.tb.CachedExecutionToken(bearer.DigestOf(other.Token)) {
		t.Fatal("an expired token is reported cached")
	}
}
