package configsvc_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// documents is storage.ConfigDocuments in memory.
type documents struct {
	mu   sync.Mutex
	docs map[string][]byte
}

func (d *documents) PutConfigDocument(_ context.Context, hash string, doc []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.docs == nil {
		d.docs = map[string][]byte{}
	}
	if _, ok := d.docs[hash]; !ok {
		d.docs[hash] = append([]byte(nil), doc...)
	}
	return nil
}

func (d *documents) ConfigDocument(_ context.Context, hash string) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if doc, ok := d.docs[hash]; ok {
		return doc, nil
	}
	return nil, storage.ErrNotFound
}

// shared is a second service on b's store with a state directory of its
// own: another daemon on a shared store.
func shared(t *testing.T, b *cfgBundle, docs storage.ConfigDocuments) (*configsvc.Service, string) {
	t.Helper()
	dir := mgmttest.NewStateDir(t)
	svc, err := configsvc.New(configsvc.Options{
		Store: b.store, StateDir: dir, Default: mgmttest.StackConfig, Registry: bootstrap.ReleaseRegistry(),
		Clock: b.clock, Logger: mgmttest.DiscardLogger(), Documents: docs,
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc, dir
}

// TestFollowServesAnotherServicesGeneration: two services on one store,
// each with its own state directory and the store keeping documents. The
// second starts on the first's generation (its document from the store,
// copied into its state directory); Follow changes nothing while nothing
// changed, then serves the first's apply as an apply does (hooks, the
// config file); and an apply through the second, which had not followed
// yet, is judged against the latest generation.
func TestFollowServesAnotherServicesGeneration(t *testing.T) {
	ctx := context.Background()
	docs := &documents{}
	a := newCfg(t, "", nil)
	svcA, err := configsvc.New(configsvc.Options{
		Store: a.store, StateDir: a.dir, Default: mgmttest.StackConfig, Registry: bootstrap.ReleaseRegistry(),
		Clock: a.clock, Logger: mgmttest.DiscardLogger(), Documents: docs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svcA.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	svcB, dirB := shared(t, a, docs)
	if err := svcB.Restore(ctx); err != nil {
		t.Fatalf("a second service on the store: %v", err)
	}
	if g := svcB.Active().Generation; g != 1 {
		t.Fatalf("B serves generation %d", g)
	}
	h := hashOf(t, mgmttest.StackConfig)
	if _, err := os.Stat(filepath.Join(dirB, "private", configsvc.GenerationsDir, h+".json")); err != nil {
		t.Errorf("B keeps no copy of the document: %v", err)
	}
	var hooked []int64
	svcB.OnApply(func(s *config.Snapshot) { hooked = append(hooked, s.Generation) })
	if changed, err := svcB.Follow(ctx); changed || err != nil {
		t.Fatalf("Follow with nothing new: %v, %v", changed, err)
	}

	if _, err := svcA.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, Actor: "operator:a"}); err != nil {
		t.Fatal(err)
	}
	if changed, err := svcB.Follow(ctx); !changed || err != nil {
		t.Fatalf("Follow after A's apply: %v, %v", changed, err)
	}
	if g, _ := svcB.ActiveGeneration(); g.Number != 2 || g.Hash != hashOf(t, otherConfig) || len(hooked) != 1 || hooked[0] != 2 {
		t.Fatalf("B after following: %+v, hooks %v", g, hooked)
	}
	if got, err := os.ReadFile(filepath.Join(dirB, configsvc.ConfigFileName)); err != nil || string(got) != string(otherConfig) {
		t.Errorf("B's config file = %q, %v; want A's document", got, err)
	}

	// A applies generation 3; B, not told, applies against 3.
	if _, err := svcA.Apply(ctx, configsvc.ApplyRequest{Config: mgmttest.StackConfig, ExpectedGeneration: 2, Actor: "operator:a"}); err != nil {
		t.Fatal(err)
	}
	res, err := svcB.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 3, Actor: "operator:b"})
	if err != nil || res.Generation.Number != 4 {
		t.Fatalf("B's apply against the latest generation: %+v, %v", res, err)
	}
	if changed, err := svcA.Follow(ctx); !changed || err != nil || svcA.Active().Generation != 4 {
		t.Fatalf("A following B's apply: %v, %v, generation %d", changed, err, svcA.Active().Generation)
	}
}

// TestFollowRefusesAGenerationItCannotLoad: without the store's
// documents, a generation another service committed cannot be loaded:
// Follow says so and the active generation stays.
func TestFollowRefusesAGenerationItCannotLoad(t *testing.T) {
	ctx := context.Background()
	a := newCfg(t, "", nil)
	if err := a.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	svcB, _ := shared(t, a, nil)
	// B restores while A's first document is still readable nowhere but
	// A's state directory: B is refused at start.
	if err := svcB.Restore(ctx); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("B's restore without the document: %v", err)
	}
	docs := &documents{}
	svcB, _ = shared(t, a, docs)
	_ = docs.PutConfigDocument(ctx, hashOf(t, mgmttest.StackConfig), mgmttest.StackConfig)
	if err := svcB.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, Actor: "operator:a"}); err != nil {
		t.Fatal(err)
	}
	if changed, err := svcB.Follow(ctx); changed || err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Follow of a generation whose document is missing: %v, %v", changed, err)
	}
	if g := svcB.Active().Generation; g != 1 {
		t.Fatalf("B serves generation %d after a refused follow, want 1", g)
	}
}
