package configsvc_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// TestConfigSet: a set changes one member of the document as written
// (secret references kept) and publishes it through Apply; its refusals
// are a stale generation, a pointer that cannot be set and a value that
// does not validate, and a retry of a committed set completes it.
func TestConfigSet(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	b.svc.OnApply(func(s *config.Snapshot) { seen = append(seen, s.Generation) })
	reads := configsvc.SetRequest{Pointer: "/scopes/team/authorization/reads", Value: []byte(`["work", "events"]`), ExpectedGeneration: 1, Actor: "operator:local"}

	stale := reads
	stale.ExpectedGeneration = 7
	if _, err := b.svc.Set(ctx, stale); !errors.Is(err, configsvc.ErrStaleGeneration) {
		t.Fatalf("set against generation 7: %v", err)
	}
	bad := reads
	bad.Pointer = "/scopes/nobody/authorization/reads"
	if _, err := b.svc.Set(ctx, bad); !errors.Is(err, configsvc.ErrBadPointer) || !strings.Contains(err.Error(), "/scopes/nobody does not exist") {
		t.Fatalf("set under a missing scope: %v", err)
	}
	invalid := reads
	invalid.Value = []byte(`["work", "` + mgmttest.CanaryReference + `"]`)
	_, err := b.svc.Set(ctx, invalid)
	var re *configsvc.Refusal
	if !errors.As(err, &re) || !errors.Is(err, configsvc.ErrInvalidConfig) || len(re.Diagnostics) == 0 || strings.Contains(err.Error(), mgmttest.CanaryReference) {
		t.Fatalf("set of an invalid value: %v", err)
	}
	if _, err := os.Stat(b.path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused set wrote the file: %v", err)
	}

	res, err := b.svc.Set(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation.Number != 2 || res.Previous != 1 || res.Generation.Hash != hashOf(t, otherConfig) || res.Generation.Actor != "operator:local" {
		t.Fatalf("set = %+v, want generation 2 holding otherConfig", res.Generation)
	}
	saved, err := os.ReadFile(b.path())
	if err != nil || !strings.Contains(string(saved), "env:"+mgmttest.CanaryReference) {
		t.Fatalf("the saved document lost its secret reference: %q %v", saved, err)
	}
	if len(seen) != 1 || seen[0] != 2 {
		t.Errorf("hooks saw %v", seen)
	}
	// The same request retried (its answer lost) completes the set.
	retry := reads
	retry.Retry = true
	again, err := b.svc.Set(ctx, retry)
	if err != nil || !again.Completed || again.Generation.Number != 2 {
		t.Fatalf("retried set = %+v, %v", again, err)
	}
	// Without Retry it is stale.
	if _, err := b.svc.Set(ctx, reads); !errors.Is(err, configsvc.ErrStaleGeneration) {
		t.Fatalf("the same set again: %v", err)
	}
}
