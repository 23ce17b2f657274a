package management

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
)

// countingCredentials holds one active operator credential and counts the
// lookups by digest.
type countingCredentials struct {
	Credentials
	operator Digest
	lookups  int
}

func (c *countingCredentials) ByDigest(_ context.Context, d Digest) (Credential, error) {
	c.lookups++
	if d == c.operator {
		return Credential{ID: "tok_op", Name: OwnerName, Digest: d}, nil
	}
	return Credential{}, extension.ErrNotFound
}

// knowingToolbelt is a toolbelt that holds one execution token in its
// cache.
type knowingToolbelt struct {
	extension.Toolbelt
	cached Digest
}

func (k knowingToolbelt) CachedExecutionToken(d Digest) bool { return d == k.cached }

// The toolbelt socket's operator check skips the credential lookup for a
// token the toolbelt holds as a live execution token, and makes it for
// every other bearer, so an operator credential is still recognised.
func TestOperatorCheckSkipsCachedExecutionTokens(t *testing.T) {
	ctx := context.Background()
	exe, op, other := bearer.DigestOf("execution"), bearer.DigestOf("operator"), bearer.DigestOf("other")
	creds := &countingCredentials{operator: op}
	check := newOperatorCheck(creds, knowingToolbelt{cached: exe})
	for _, c := range []struct {
		name     string
		d        Digest
		operator bool
		lookups  int
	}{
		{"a cached execution token", exe, false, 0},
		{"an operator credential", op, true, 1},
		{"an unknown bearer", other, false, 2},
	} {
		got, err := check.IsOperator(ctx, c.d)
		if err != nil || got != c.operator || creds.lookups != c.lookups {
			t.Errorf("%s: operator %v, %v after %d lookups; want %v after %d", c.name, got, err, creds.lookups, c.operator, c.lookups)
		}
	}
	// A toolbelt that keeps no cache: every bearer is looked up.
	creds.lookups = 0
	plain := newOperatorCheck(creds, nil)
	if got, err := plain.IsOperator(ctx, exe); err != nil || got || creds.lookups != 1 {
		t.Errorf("without a token cache: operator %v, %v after %d lookups; want false after 1", got, err, creds.lookups)
	}
}
