package daemon

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// TestPostgresStoreRunsWorkEndToEnd: a daemon given a PostgreSQL store
// keeps its records there (no coordination.db in the state directory),
// resolves the store's password from a secret reference, runs Work to its
// end on it, counts it for the metrics, and logs neither the store's
// address nor its password.
func TestPostgresStoreRunsWorkEndToEnd(t *testing.T) {
	c := pgtest.Require(t)
	db, err := c.FreshDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const password = "pg-password-never-logged"
	t.Setenv("OC_TEST_STORE_PASSWORD", password)
	state := shortDir(t)
	r := start(t, state, func(o *Options) {
		o.Store = c.URL(db)
		o.StorePassword = "env:OC_TEST_STORE_PASSWORD"
	})
	if r.d.pg == nil || r.d.db != nil {
		t.Fatalf("the daemon did not open the PostgreSQL store")
	}
	if _, err := os.Stat(filepath.Join(state, DatabaseFile)); !os.IsNotExist(err) {
		t.Errorf("%s exists beside a PostgreSQL store (%v)", DatabaseFile, err)
	}
	w := r.create(bootstrap.DefaultScope, bootstrap.DefaultBinding)
	w = r.terminal(w.ID)
	if w.State != storage.WorkSucceeded {
		t.Fatalf("Work ended %s (%s %s), want succeeded\nlogs:\n%s", w.State, w.BlockedReason, w.OutcomeMessage, r.logs)
	}
	exes := r.executions(w.ID)
	if len(exes) != 1 || exes[0].Result != storage.ResultSucceeded {
		t.Fatalf("executions = %+v, want one that succeeded", exes)
	}
	if out := r.log(exes[0]); !strings.Contains(out, "Open Conduit ran Work "+w.ID) {
		t.Errorf("log %q does not say the Work ran", out)
	}
	counts, err := r.d.counts(context.Background())
	if err != nil || counts.Work[string(storage.WorkSucceeded)] != 1 || counts.Finished[string(storage.ResultSucceeded)] != 1 {
		t.Fatalf("metrics counts = %+v, %v; want one succeeded Work and attempt", counts, err)
	}
	r.stop()
	for _, secret := range []string{password, c.Dir(), db} {
		if strings.Contains(r.logs.String(), secret) {
			t.Errorf("the logs name %q", secret)
		}
	}
}

// TestStoreOptionsAreRefusedBeforeTheStateDirectory: a store URL holding
// a password, one that is not postgres://, a password without a store and
// a password that is not a secret reference are refused before the state
// directory is made, without repeating what was given.
func TestStoreOptionsAreRefusedBeforeTheStateDirectory(t *testing.T) {
	for _, tc := range []struct{ store, password, want string }{
		{"postgres://oc:s3cr3t-pw@db/oc", "", "holds a password"},
		{"postgres://oc@db/oc?password=s3cr3t-pw", "", "holds a password"},
		{"mysql://oc@db/oc", "", "postgres:// URL"},
		{"", "env:S3CR3T_PW", "without a store"},
		{"postgres://oc@db/oc", "s3cr3t-pw", "secret reference"},
	} {
		state := filepath.Join(t.TempDir(), "s")
		opts := options(t, state, io.Discard)
		opts.Store, opts.StorePassword = tc.store, tc.password
		_, err := New(context.Background(), opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("store %q, password %q: %v; want a refusal saying %q", tc.store, tc.password, err, tc.want)
		}
		if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "oc@db") {
			t.Fatalf("the refusal repeats what was given: %v", err)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Fatalf("the state directory was made before the refusal (%v)", err)
		}
	}
}

// TestSecondDaemonOnTheStoreLeavesTheFirstsAttempt: two daemons, each
// with a state directory (a node) of its own, on one PostgreSQL store. The
// second one starting adopts nothing of the first's live attempt (its
// owner and epoch stay the first's, its process runs on), the store-wide
// duties have one holder, the first daemon's node, and the attempt ends
// with the first daemon, its command run once.
func TestSecondDaemonOnTheStoreLeavesTheFirstsAttempt(t *testing.T) {
	c := pgtest.Require(t)
	db, err := c.FreshDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store := func(o *Options) { o.Store = c.URL(db) }
	stateA, stateB := shortDir(t), shortDir(t)
	fifo, mark := fifoConfig(t, stateA)
	cfg, err := os.ReadFile(filepath.Join(stateA, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(stateB, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateB, ConfigFile), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	a := start(t, stateA, store)
	w := a.create("t", "job")
	waitFile(t, mark, "started")
	exe := a.executions(w.ID)[0]
	if exe.Node != a.d.Info().Node || exe.Node == "" {
		t.Fatalf("the execution records node %q, want the first daemon's %q", exe.Node, a.d.Info().Node)
	}

	b := start(t, stateB, store)
	if b.d.Info().Node == a.d.Info().Node {
		t.Fatalf("two state directories share the node id %s", b.d.Info().Node)
	}
	if got := b.executions(w.ID); len(got) != 1 || got[0].Owner != a.d.Info().Owner || got[0].Epoch != 1 || got[0].State != storage.ExecutionRunning {
		t.Fatalf("after the second daemon started: %+v, want the first daemon's attempt at epoch 1, running", got)
	}
	for _, name := range scheduler.AllDuties {
		l, err := b.d.store.GetDutyLease(context.Background(), name)
		if err != nil || l.Owner != a.d.Info().Node {
			t.Errorf("duty %s: %+v, %v; want held by the first daemon's node", name, l, err)
		}
		if b.d.duties.Held(name) {
			t.Errorf("the second daemon holds duty %s too", name)
		}
	}

	release(t, fifo, "0")
	w = a.terminal(w.ID)
	exes := a.executions(w.ID)
	if w.State != storage.WorkSucceeded || len(exes) != 1 || exes[0].Owner != a.d.Info().Owner || exes[0].Epoch != 1 {
		t.Fatalf("Work %s, executions %+v: want succeeded by the first daemon at epoch 1", w.State, exes)
	}
	if b, _ := os.ReadFile(mark); strings.Count(string(b), "started") != 1 {
		t.Errorf("the job ran %d times, want once", strings.Count(string(b), "started"))
	}
}

// TestArtifactsAreReadThroughAnotherDaemon: two daemons, each with a state
// directory of its own, on one PostgreSQL database: the log of Work one
// of them ran is read byte for byte through the other's management API
// (the credential is the store's, so the first's owner token serves), as
// an artifact and as the finished attempt's log, and neither state
// directory keeps artifact bytes.
func TestArtifactsAreReadThroughAnotherDaemon(t *testing.T) {
	c := pgtest.Require(t)
	db, err := c.FreshDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	onDB := func(o *Options) { o.Store = c.URL(db) }
	a := start(t, shortDir(t), onDB)
	bState := shortDir(t)
	b := start(t, bState, onDB)
	w := a.create(bootstrap.DefaultScope, bootstrap.DefaultBinding)
	w = a.terminal(w.ID)
	if w.State != storage.WorkSucceeded {
		t.Fatalf("Work ended %s (%s %s)\nlogs:\n%s\n%s", w.State, w.BlockedReason, w.OutcomeMessage, a.logs, b.logs)
	}
	exes := a.executions(w.ID)
	if len(exes) != 1 {
		t.Fatalf("executions = %+v", exes)
	}
	want := a.log(exes[0])
	if !strings.Contains(want, "Open Conduit ran Work "+w.ID) {
		t.Fatalf("log %q does not say the Work ran", want)
	}
	arts, err := b.d.store.ListArtifacts(context.Background(), &storage.ListArtifactsParams{Execution: exes[0].ID})
	if err != nil || len(arts) != 1 {
		t.Fatalf("artifacts seen by the other daemon: %+v, %v", arts, err)
	}
	other := client.New(b.d.Info().Socket, client.TokenFile(a.d.Info().TokenFile))
	var got, log strings.Builder
	if _, err := other.ArtifactContent(context.Background(), arts[0].ID, "", &got); err != nil {
		t.Fatalf("the artifact through the other daemon: %v", err)
	}
	if _, err := other.ExecutionLog(context.Background(), exes[0].ID, client.LogOptions{Follow: true}, &log); err != nil {
		t.Fatalf("the log through the other daemon: %v", err)
	}
	if got.String() != want || log.String() != want {
		t.Fatalf("through the other daemon: artifact %q, log %q; want %q", got.String(), log.String(), want)
	}
	for _, r := range []*running{a, b} {
		ents, err := os.ReadDir(filepath.Join(r.d.Info().StateDir, ArtifactsDir))
		if err != nil || len(ents) != 0 {
			t.Errorf("the artifact directory of %s holds %d entries (%v)", r.d.Info().StateDir, len(ents), err)
		}
	}
}
