package toolbelt

import (
	"context"
	"sync"

	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// maxCachedTokens bounds the token cache; past it the cache starts over.
const maxCachedTokens = 4096

// tokenCache keeps the live tokens calls authenticated with, by digest,
// so that a call does not look its token up in storage each time. It only
// spares authenticate's read: every call still checks the token's expiry
// on the clock, its assertions, allowlist and the scope's ceiling, and
// runs the lease guard in storage, which refuses a token whose execution
// is no longer running at its epoch under this daemon (a finished
// attempt's tokens, revoked in storage outside the toolbelt, are all of
// that kind). What the toolbelt revokes itself drops the entries of the
// execution: a revocation by id or by execution, and an issue (which
// revokes the lower epochs); an apply drops them all (Invalidate).
//
// A lookup that missed stores what it read only if nothing was dropped
// since it began (version), so a read from before a revocation never
// outlives it in the cache.
type tokenCache struct {
	mu      sync.Mutex
	version uint64
	tokens  map[bearer.Digest]storage.Token
}

func (c *tokenCache) get(d bearer.Digest) (storage.Token, uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[d]
	return t, c.version, ok
}

func (c *tokenCache) put(d bearer.Digest, t storage.Token, version uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if version != c.version {
		return
	}
	if c.tokens == nil || len(c.tokens) >= maxCachedTokens {
		c.tokens = map[bearer.Digest]storage.Token{}
	}
	c.tokens[d] = t
}

func (c *tokenCache) drop(d bearer.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	delete(c.tokens, d)
}

// dropExecution drops every cached token of an execution.
func (c *tokenCache) dropExecution(executionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	for d, t := range c.tokens {
		if t.Execution == executionID {
			delete(c.tokens, d)
		}
	}
}

func (c *tokenCache) dropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version++
	c.tokens = nil
}

// InvalidateTokens empties the token cache. The daemon calls it when a
// configuration generation becomes active, so that nothing a call trusts
// from before an apply outlives it; the ceiling itself is asked on every
// call regardless.
func (tb *Toolbelt) InvalidateTokens() { tb.tokens.dropAll() }

// CachedExecutionToken reports whether the token cache holds an
// unexpired execution token under d: one a call authenticated with and
// nothing dropped since. It reads no storage; the toolbelt socket's
// operator check asks it so that a call on a cached token skips the
// operator credential lookup. It says nothing about whether a call on the
// token would pass: the chain still runs in full.
func (tb *Toolbelt) CachedExecutionToken(d bearer.Digest) bool {
	t, _, ok := tb.tokens.get(d)
	return ok && tb.clock.Now().Before(t.ExpiresAt)
}

// authenticateCached is authenticate served from the token cache when it
// holds the token (hit), else from storage, caching a live token.
func (tb *Toolbelt) authenticateCached(ctx context.Context, token string) (t storage.Token, hit bool, err error) {
	if !bearer.WellFormed(token) {
		return storage.Token{}, false, forbid("the bearer is not an execution token's shape")
	}
	d := bearer.DigestOf(token)
	t, version, ok := tb.tokens.get(d)
	if ok {
		if !tb.clock.Now().Before(t.ExpiresAt) {
			tb.tokens.drop(d)
			return t, true, forbid("token %s expired", t.ID)
		}
		return t, true, nil
	}
	t, err = tb.authenticate(ctx, token)
	if err == nil {
		tb.tokens.put(d, t, version)
	}
	return t, false, err
}
