package doctor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/daemon"
)

// Codes of the store check (only with --store).
const (
	CodeStoreOK        = "store_ok"
	CodeStoreInvalid   = "store_invalid"
	CodeStoreFailed    = "store_unreachable"
	CodeStoreTooNew    = "store_schema_too_new"
	CodeStorePending   = "store_migrations_pending"
	storeCheckDeadline = 15 * time.Second
)

// storeFix names the store without repeating its URL or password
// reference, which the operator has.
const storeFix = "open-conduit doctor --store URL --store-password REF (the daemon's own)"

// checkStore connects to the PostgreSQL store the options name and
// checks its schema against this release's migrations, changing nothing.
// No message repeats the URL, a user name, a password or its reference.
func (r *run) checkStore(ctx context.Context) {
	so := r.opts.Store
	if so.URL == "" {
		return
	}
	if so.StateDir == "" {
		so.StateDir = r.state()
	}
	if so.Keyring == nil {
		so.Keyring = r.opts.Keyring
	}
	if err := so.Check(); err != nil {
		r.add(SeverityError, CodeStoreInvalid, "the store options are refused, as the daemon would refuse them: "+err.Error(), storeFix)
		return
	}
	ctx, cancel := r.withTimeout(ctx, storeCheckDeadline)
	defer cancel()
	schema, err := daemon.InspectStore(ctx, so)
	if err != nil {
		r.add(SeverityError, CodeStoreFailed, "cannot reach the PostgreSQL store: "+err.Error(),
			"check that the database server runs and that the daemon's user may connect (pg_isready), then: "+storeFix)
		return
	}
	version := 0
	if n := len(schema.Applied); n > 0 {
		version = schema.Applied[n-1]
	}
	switch {
	case len(schema.Unknown) > 0:
		r.add(SeverityError, CodeStoreTooNew, fmt.Sprintf("the store's schema records migration %s, which this release does not know: a newer release wrote it, and this one refuses to open it", ints(schema.Unknown)),
			"run the newer release of open-conduit on every daemon of this store")
	case len(schema.Pending) > 0:
		r.add(SeverityWarning, CodeStorePending, fmt.Sprintf("the store's schema is at version %d and lacks migration %s of this release; the first daemon of this release to start applies them (under a lock, once)", version, ints(schema.Pending)),
			"start a daemon of this release on the store: open-conduit daemon --store URL --store-password REF")
	default:
		r.add(SeverityOK, CodeStoreOK, fmt.Sprintf("the PostgreSQL store answers; its schema is at version %d, this release's", version), "")
	}
}

func ints(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf("%04d", v)
	}
	return strings.Join(s, ", ")
}
