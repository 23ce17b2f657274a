package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/storage/postgres"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// StoreOptions name the coordination store a tool on the host opens
// (`auth recover`, `doctor`): the state directory's SQLite when URL is
// empty, else the PostgreSQL store URL names, as the daemon's --store
// and --store-password do.
type StoreOptions struct {
	// StateDir is the state directory (file: and cmd: references of the
	// password are resolved there, as the daemon resolves them).
	StateDir string
	// URL is the postgres:// URL, without a password; empty for SQLite.
	URL string
	// Password is a secret reference to URL's password; empty for none.
	Password string
	// Keyring answers a keyring: password; nil is the platform keyring.
	Keyring config.Keyring
}

// Check refuses options the daemon would refuse (a URL that is not
// postgres:// or holds a password, a password that is not a secret
// reference, a password without a URL), without repeating either.
func (o StoreOptions) Check() error { return checkStore(o.URL, o.Password) }

// storePassword resolves the store's password reference (empty for none)
// through the daemon's resolver, with exe as the reaper of a cmd: one.
// The error names the reference's scheme only.
func storePassword(ctx context.Context, ref, stateDir string, keyring config.Keyring, exe string) (string, error) {
	if ref == "" {
		return "", nil
	}
	parsed, err := config.ParseSecretRef(ref)
	if err != nil {
		return "", fmt.Errorf("the store password: %w", err)
	}
	r := &config.Resolver{Keyring: keyring, StateDir: stateDir, Reaper: []string{exe, "reap", "--"}}
	password, err := r.ResolveRef(ctx, parsed)
	if err != nil {
		return "", fmt.Errorf("cannot resolve the store password %s: %w", parsed, err)
	}
	return password, nil
}

func (o StoreOptions) postgres(ctx context.Context) (postgres.Options, error) {
	if err := o.Check(); err != nil {
		return postgres.Options{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return postgres.Options{}, fmt.Errorf("cannot find the open-conduit binary itself (needed to run a cmd: password): %w", err)
	}
	password, err := storePassword(ctx, o.Password, o.StateDir, o.Keyring, exe)
	if err != nil {
		return postgres.Options{}, err
	}
	return postgres.Options{ConnString: o.URL, Password: password, Clock: clock.System{}}, nil
}

// OpenCredentials opens the operator credentials kept in coordination
// storage, for `open-conduit auth recover`, which runs with the state
// directory's daemon stopped and its lock held by the caller: the state
// directory's SQLite, or the PostgreSQL store o names (which other
// daemons may be using meanwhile). The closer closes storage. It is an
// entry point like Run: it takes the system's clock.
func OpenCredentials(ctx context.Context, o StoreOptions) (management.Credentials, io.Closer, error) {
	if o.URL == "" {
		store, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(o.StateDir, DatabaseFile), Clock: clock.System{}})
		if err != nil {
			return nil, nil, err
		}
		return management.StoreCredentials(store), store, nil
	}
	opts, err := o.postgres(ctx)
	if err != nil {
		return nil, nil, err
	}
	store, err := postgres.Open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	return management.StoreCredentials(store), store, nil
}

// StoreSchema is what InspectStore found of a PostgreSQL store's schema.
type StoreSchema = postgres.Schema

// InspectStore connects to the PostgreSQL store o names and compares the
// migrations it records with this release's, changing nothing (for
// `doctor`). Its errors never repeat the URL, a user name, a password or
// the password's reference.
func InspectStore(ctx context.Context, o StoreOptions) (StoreSchema, error) {
	opts, err := o.postgres(ctx)
	if err != nil {
		return StoreSchema{}, err
	}
	return postgres.Inspect(ctx, opts)
}
