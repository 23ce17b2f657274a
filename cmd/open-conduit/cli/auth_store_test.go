package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// TestAuthRecoverOnAPostgresStore: with --store, auth recover opens the
// PostgreSQL store rather than the state directory's SQLite: the owner's
// credential a first daemon's state directory holds is revoked, and the
// fresh one is written to the state directory recovered, whose token is
// then the owner's active credential in the store. A store URL holding a
// password is refused without being repeated.
func TestAuthRecoverOnAPostgresStore(t *testing.T) {
	c := pgtest.Require(t)
	ctx := context.Background()
	db, err := c.FreshDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	url := c.URL(db)
	creds, closer, err := daemon.OpenCredentials(ctx, daemon.StoreOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ops, err := management.NewOperators(creds, clock.System{}, clock.SystemEntropy())
	if err != nil {
		t.Fatal(err)
	}
	first := mgmttest.NewStateDir(t)
	lock, err := statedir.AcquireLock(first)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := management.BootstrapOperator(ctx, lock, ops); err != nil || st != management.BootstrapCreated {
		t.Fatalf("bootstrap: %s, %v", st, err)
	}
	lock.Close()
	old, err := statedir.ReadTokenFile(statedir.OwnerTokenPath(first))
	if err != nil {
		t.Fatal(err)
	}

	second := mgmttest.NewStateDir(t)
	t.Setenv(EnvStore, url)
	t.Setenv(EnvStorePassword, "")
	code, out, errs := run(t, "auth", "recover", "--state", second)
	if code != 0 || !strings.Contains(out, statedir.OwnerTokenPath(second)) {
		t.Fatalf("recover --store: %d %q %q", code, out, errs)
	}
	if strings.Contains(out+errs, url) || strings.Contains(out+errs, c.Dir()) {
		t.Fatalf("recover repeats the store's address: %q %q", out, errs)
	}
	fresh, err := statedir.ReadTokenFile(statedir.OwnerTokenPath(second))
	if err != nil {
		t.Fatal(err)
	}
	active, err := creds.ActiveByName(ctx, management.OwnerName)
	if err != nil || active.Digest != bearer.DigestOf(fresh) || active.Digest == bearer.DigestOf(old) {
		t.Fatalf("the store's owner credential after recovery: %+v, %v; want the fresh token's, not the first daemon's", active, err)
	}

	code, _, errs = run(t, "auth", "recover", "--state", second, "--store", "postgres://conduit:s3cr3t-pw@/"+db)
	if code != 1 || !strings.Contains(errs, "holds a password") || strings.Contains(errs, "s3cr3t") {
		t.Fatalf("a URL with a password: %d %q", code, errs)
	}
}
