package configsvc_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
)

// Applying the active generation's document again makes no generation:
// the answer names the active one as Unchanged, no hook runs, and a
// changed document still makes the next.
func TestApplyOfTheActiveDocumentMakesNoGeneration(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, Actor: "operator:local"})
	if err != nil || res.Unchanged || res.Generation.Number != 2 {
		t.Fatalf("first apply = %+v, %v", res, err)
	}
	hooks := 0
	b.svc.OnApply(func(*config.Snapshot) { hooks++ })
	again, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 2, Actor: "operator:local"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Unchanged || again.Generation.Number != 2 || again.Previous != 2 || b.svc.Active().Generation != 2 || hooks != 0 {
		t.Fatalf("apply of the active document = %+v, active %d, hooks %d", again, b.svc.Active().Generation, hooks)
	}
	next, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: rootTeam, ExpectedGeneration: 2, Actor: "operator:local"})
	if err != nil || next.Unchanged || next.Generation.Number != 3 {
		t.Fatalf("a changed document = %+v, %v", next, err)
	}
}
