package configsvc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// cfgBundle is a config service on a real SQLite store in a state
// directory that can be reopened.
type cfgBundle struct {
	dir   string
	clock *clock.Fake
	reg   *config.Registry
	store *sqlite.Store
	svc   *configsvc.Service
}

func newCfg(t *testing.T, dir string, reg *config.Registry) *cfgBundle {
	t.Helper()
	if dir == "" {
		dir = mgmttest.NewStateDir(t)
	}
	b := &cfgBundle{dir: dir, clock: clock.NewFake(mgmttest.Epoch), reg: reg}
	b.open(t)
	return b
}

func (b *cfgBundle) open(t *testing.T) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.dir, "coordination.db"), Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b.store = s
	reg := b.reg
	if reg == nil {
		reg = bootstrap.ReleaseRegistry()
	}
	b.svc, err = configsvc.New(configsvc.Options{
		Store: s, StateDir: b.dir, Default: mgmttest.StackConfig, Registry: reg, Clock: b.clock, Logger: mgmttest.DiscardLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reopen closes the store and opens a fresh service on the same
// directory: a daemon restart.
func (b *cfgBundle) reopen(t *testing.T, reg *config.Registry) {
	t.Helper()
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	b.reg = reg
	b.open(t)
}

func (b *cfgBundle) path() string { return filepath.Join(b.dir, configsvc.ConfigFileName) }

func hashOf(t *testing.T, doc []byte) string {
	t.Helper()
	snap, res := config.Validate(doc, bootstrap.ReleaseRegistry())
	if !res.Valid() {
		t.Fatalf("test document does not validate: %v", res.Diagnostics)
	}
	return snap.Hash
}

// configWith returns StackConfig with a different team scope.
func configWith(team string) []byte {
	return bytes.Replace(mgmttest.StackConfig, []byte(`"team": {
      "parent": "setup",`), []byte(team), 1)
}

var (
	// otherConfig differs from StackConfig only in the team scope's reads.
	otherConfig = bytes.Replace(mgmttest.StackConfig, []byte(`"reads": ["work"]}`), []byte(`"reads": ["work", "events"]}`), 1)
	// noTeam removes the team scope (a tombstone).
	noTeam = configWith(`"team": {"removed": true}, "unused": {`)
	// rootTeam reparents the team scope to the top.
	rootTeam = configWith(`"team": {`)
)

func TestConfigFirstStartActivatesTheDefaultWithoutAFile(t *testing.T) {
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	g, ok := b.svc.ActiveGeneration()
	if !ok || g.Number != 1 || g.Hash != hashOf(t, mgmttest.StackConfig) || g.Actor != configsvc.ActorFirstStart {
		t.Fatalf("active generation = %+v, %v", g, ok)
	}
	if b.svc.Active().Generation != 1 {
		t.Errorf("snapshot generation = %d", b.svc.Active().Generation)
	}
	if _, err := os.Stat(b.path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first start wrote %s: %v", b.path(), err)
	}
	doc := filepath.Join(b.dir, statedir.PrivateDir, configsvc.GenerationsDir, g.Hash+".json")
	if fi, err := os.Stat(doc); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private copy of the document: %v %v", fi, err)
	}
	recs, err := b.store.ListScopeRecords(context.Background())
	if err != nil || len(recs) != 2 || recs[0].ID != "setup" || recs[1].ID != "team" || recs[1].Parent != "setup" || recs[0].Generation != 1 {
		t.Errorf("scope records = %+v, %v", recs, err)
	}
	if n, _ := b.svc.Generation(context.Background()); n != 1 {
		t.Errorf("health generation = %d", n)
	}
}

func TestConfigFirstStartTakesTheFile(t *testing.T) {
	b := newCfg(t, "", nil)
	if err := os.WriteFile(b.path(), otherConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g, _ := b.svc.ActiveGeneration(); g.Number != 1 || g.Hash != hashOf(t, otherConfig) {
		t.Fatalf("active generation = %+v, want the file's", g)
	}
}

func TestConfigFirstStartRefusesAnInvalidFile(t *testing.T) {
	b := newCfg(t, "", nil)
	if err := os.WriteFile(b.path(), []byte(`{"version": 1, "scopes": {"x": {"parent": "nowhere"}}, "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := b.svc.Restore(context.Background())
	var fe *configsvc.FileError
	if !errors.As(err, &fe) || len(fe.Diagnostics) < 2 || !strings.Contains(err.Error(), b.path()) || !strings.Contains(err.Error(), "unknown_field") {
		t.Fatalf("Restore = %v, want the file's diagnostics", err)
	}
	if _, err := b.store.LatestGeneration(context.Background()); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a generation was committed: %v", err)
	}
	if b.svc.Active() != nil {
		t.Error("a configuration is active")
	}
}

func TestConfigApply(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	b.svc.OnApply(func(s *config.Snapshot) { seen = append(seen, s.Generation) })

	_, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 7, Actor: "operator:local"})
	if !errors.Is(err, configsvc.ErrStaleGeneration) {
		t.Fatalf("apply against generation 7: %v", err)
	}
	_, err = b.svc.Apply(ctx, configsvc.ApplyRequest{Config: []byte(`{"version": 2}`), ExpectedGeneration: 1})
	var me *configsvc.Refusal
	if !errors.As(err, &me) || !errors.Is(err, configsvc.ErrInvalidConfig) || len(me.Diagnostics) == 0 {
		t.Fatalf("apply of an invalid config: %v", err)
	}
	_, err = b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, ExpectedHash: strings.Repeat("0", 64)})
	if !errors.As(err, &me) || !errors.Is(err, configsvc.ErrHashMismatch) {
		t.Fatalf("apply with another hash: %v", err)
	}
	if _, err := os.Stat(b.path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused apply wrote the file: %v", err)
	}

	res, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, ExpectedHash: hashOf(t, otherConfig), Actor: "operator:local"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation.Number != 2 || res.Previous != 1 || res.Generation.Actor != "operator:local" || b.svc.Active().Generation != 2 {
		t.Fatalf("apply = %+v", res)
	}
	got, err := os.ReadFile(b.path())
	if err != nil || !bytes.Equal(got, otherConfig) {
		t.Fatalf("config file = %q, %v", got, err)
	}
	if fi, _ := os.Stat(b.path()); fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %v", fi.Mode())
	}
	// The default was active and never on disk: the backup holds it.
	if last, err := os.ReadFile(b.path() + configsvc.LastGoodSuffix); err != nil || !bytes.Equal(last, mgmttest.StackConfig) {
		t.Errorf("last-good after the first apply = %q, %v", last, err)
	}
	if len(seen) != 1 || seen[0] != 2 {
		t.Errorf("hooks saw %v", seen)
	}
	old, err := b.svc.Snapshot(ctx, 1)
	if err != nil || old.Hash != hashOf(t, mgmttest.StackConfig) || old.Generation != 1 {
		t.Errorf("pinned generation 1 = %v, %v", old, err)
	}

	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: mgmttest.StackConfig, ExpectedGeneration: 2}); err != nil {
		t.Fatal(err)
	}
	if last, _ := os.ReadFile(b.path() + configsvc.LastGoodSuffix); !bytes.Equal(last, otherConfig) {
		t.Errorf("last-good after the second apply = %q", last)
	}
	// No temporary file is left behind.
	entries, _ := os.ReadDir(b.dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	// Generation 2 is restored from storage after a restart.
	b.reopen(t, nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	two, err := b.svc.Snapshot(ctx, 2)
	if err != nil || two.Hash != hashOf(t, otherConfig) {
		t.Errorf("generation 2 after a restart = %v, %v", two, err)
	}
	if _, err := b.svc.Snapshot(ctx, 9); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("generation 9: %v", err)
	}
}

func TestConfigRestoreKeepsTheCommittedGenerationDespiteADiskEdit(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	// A valid edit on disk, then a restart.
	if err := os.WriteFile(b.path(), noTeam, 0o600); err != nil {
		t.Fatal(err)
	}
	b.reopen(t, nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := b.svc.ActiveGeneration(); g.Number != 2 || g.Hash != hashOf(t, otherConfig) {
		t.Fatalf("after a disk edit and a restart: generation %+v, want 2 with the committed hash", g)
	}
	if sc, ok := b.svc.Active().Scope("team"); !ok || sc.Removed {
		t.Error("the disk edit took effect")
	}
	// Without its private copy, the committed document is found in the
	// backup or the file when either holds it; here neither does.
	if err := os.RemoveAll(filepath.Join(b.dir, statedir.PrivateDir, configsvc.GenerationsDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.path(), otherConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	b.reopen(t, nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := b.svc.ActiveGeneration(); g.Number != 2 {
		t.Errorf("generation %d after restoring from the file", g.Number)
	}
}

func fancyRegistry(t *testing.T) *config.Registry {
	t.Helper()
	reg := bootstrap.ReleaseRegistry()
	if err := reg.AddExecutor(executor.Info{Name: "fancy", Transport: executor.TransportNone}, nil); err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestConfigAdoption(t *testing.T) {
	ctx := context.Background()
	fancy := bytes.Replace(mgmttest.StackConfig, []byte(`"a": {"executor": "shell", "config": {"command": ["true"]}}`), []byte(`"a": {"executor": "fancy"}`), 1)
	b := newCfg(t, "", fancyRegistry(t))
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: fancy, ExpectedGeneration: 1}); err != nil {
		t.Fatal(err)
	}
	// A release that no longer registers the executor: the committed
	// generation and the file (the same document) both fail.
	b.reopen(t, nil)
	err := b.svc.Restore(ctx)
	if err == nil || !strings.Contains(err.Error(), "generation 2") || !strings.Contains(err.Error(), b.path()) || !strings.Contains(err.Error(), "unknown_reference") {
		t.Fatalf("Restore = %v, want both problems named", err)
	}
	// A valid file is adopted as the next generation.
	if err := os.WriteFile(b.path(), otherConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	b.reopen(t, nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	g, _ := b.svc.ActiveGeneration()
	if g.Number != 3 || g.Hash != hashOf(t, otherConfig) || g.Actor != configsvc.ActorAdoption {
		t.Fatalf("adopted generation = %+v", g)
	}
}

func TestConfigScopeInUse(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_team", Scope: "team", Binding: "a", State: storage.WorkRunning, CreatedAt: mgmttest.Epoch})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string][]byte{"removed": noTeam, "reparented": rootTeam} {
		_, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: doc, ExpectedGeneration: 1})
		if !errors.Is(err, configsvc.ErrScopeInUse) || !strings.Contains(err.Error(), "team ("+name) {
			t.Errorf("%s: %v, want scope_in_use naming team", name, err)
		}
	}
	if _, err := os.Stat(b.path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused apply wrote the file: %v", err)
	}
	// Disabling is not removing.
	disabled := configWith(`"team": {"enabled": false, "parent": "setup",`)
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: disabled, ExpectedGeneration: 1}); err != nil {
		t.Fatalf("disabling a busy scope: %v", err)
	}
	b.clock.Advance(time.Second)
	err = b.store.WithTx(ctx, func(tx storage.Tx) error {
		done := storage.WorkSucceeded
		_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: "wrk_team", State: &done, Now: b.clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: noTeam, ExpectedGeneration: 2}); err != nil {
		t.Fatalf("removing a scope whose Work finished: %v", err)
	}
	recs, _ := b.store.ListScopeRecords(ctx)
	var team, setup storage.ScopeRecord
	for _, r := range recs {
		switch r.ID {
		case "team":
			team = r
		case "setup":
			setup = r
		}
	}
	if !team.Removed || team.Active || team.Generation != 3 {
		t.Errorf("team's record = %+v, want removed at generation 3", team)
	}
	if setup.Generation != 1 {
		t.Errorf("setup's record changed: %+v", setup)
	}
}
