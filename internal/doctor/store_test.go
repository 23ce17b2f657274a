package doctor_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/doctor"
	"github.com/open-conduit/open-conduit/internal/storage/postgres"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestStoreCheck: with --store, doctor connects to the PostgreSQL store
// and reports its schema against this release's: every migration
// pending on a database no daemon opened (a warning), ok once a store
// migrated it, too new when it records a version this release does not
// know (an error), unreachable, or refused as the daemon refuses it. It
// migrates nothing, and no report repeats the URL, its user, the password
// or the password's reference.
func TestStoreCheck(t *testing.T) {
	c := pgtest.Require(t)
	ctx := context.Background()
	db, err := c.FreshDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const password = "doctor-pg-password"
	t.Setenv("OC_DOCTOR_STORE_PW", password)
	secret := []string{password, "OC_DOCTOR_STORE_PW", c.URL(db), c.Dir(), "oc_doctor_user"}
	check := func(url, ref, want string, sev doctor.Severity) doctor.Finding {
		t.Helper()
		opts := options(t, t.TempDir())
		opts.Store = daemon.StoreOptions{URL: url, Password: ref}
		rep := run(t, opts)
		got := find(rep, want)
		if len(got) != 1 || got[0].Severity != sev {
			t.Fatalf("store %s: findings %+v; want one %s %s", want, rep.Findings, sev, want)
		}
		b, _ := json.Marshal(rep)
		for _, s := range secret {
			if strings.Contains(string(b), s) {
				t.Fatalf("the report repeats %q: %s", s, b)
			}
		}
		return got[0]
	}
	url := c.URL(db)
	check(url, "env:OC_DOCTOR_STORE_PW", doctor.CodeStorePending, doctor.SeverityWarning)
	// Still nothing applied: doctor migrated nothing.
	check(url, "", doctor.CodeStorePending, doctor.SeverityWarning)

	s, err := postgres.Open(ctx, postgres.Options{ConnString: url, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	check(url, "env:OC_DOCTOR_STORE_PW", doctor.CodeStoreOK, doctor.SeverityOK)

	conn, err := pgx.Connect(ctx, c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if f := check(url, "", doctor.CodeStoreTooNew, doctor.SeverityError); !strings.Contains(f.Message, "9999") {
		t.Errorf("too new does not name the version: %q", f.Message)
	}

	check("postgres://oc_doctor_user@/nodb?host=/nonexistent-oc-dir&connect_timeout=5", "", doctor.CodeStoreFailed, doctor.SeverityError)
	check("postgres://oc_doctor_user:"+password+"@/"+db, "", doctor.CodeStoreInvalid, doctor.SeverityError)
	check(url, "OC_DOCTOR_STORE_PW", doctor.CodeStoreInvalid, doctor.SeverityError)
	// Without --store, no store finding.
	if rep := run(t, options(t, t.TempDir())); len(find(rep, doctor.CodeStoreOK))+len(find(rep, doctor.CodeStoreFailed)) != 0 {
		t.Fatalf("a store finding without a store: %+v", rep.Findings)
	}
}
