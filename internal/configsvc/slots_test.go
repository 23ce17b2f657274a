package configsvc_test

import (
	"context"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// TestConfigReusedScopeSlot: a scope id a generation removed cannot be
// taken by another scope (another parent, other bindings) while Work of
// the old one is stored, at validate and at apply; the same scope may
// come back.
func TestConfigReusedScopeSlot(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.InsertWork(ctx, &storage.InsertWorkParams{ID: "wrk_team", Scope: "team", Binding: "a", State: storage.WorkSucceeded, CreatedAt: mgmttest.Epoch})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: noTeam, ExpectedGeneration: 1}); err != nil {
		t.Fatalf("removing team: %v", err)
	}
	otherBindings := configWith(`"team": {
      "parent": "setup",
      "bindings": {"c": {"executor": "shell", "config": {"command": ["true"]}}},
      "authorization": {"operations": ["emit"], "reads": ["work"]}}, "unused": {`)
	for name, doc := range map[string][]byte{"another parent": rootTeam, "other bindings": otherBindings} {
		if _, res := b.svc.Validate(doc); !res.Valid() {
			t.Fatalf("%s: the document itself does not validate: %v", name, res.Diagnostics)
		}
		_, res, err := b.svc.ValidateStored(ctx, doc)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diagnostics) != 1 || res.Diagnostics[0].Code != config.CodeScopeSlotTaken || res.Diagnostics[0].Pointer != "/scopes/team" {
			t.Errorf("%s: validate = %v, want one scope_slot_taken at /scopes/team", name, res.Diagnostics)
		}
		_, err = b.svc.Apply(ctx, configsvc.ApplyRequest{Config: doc, ExpectedGeneration: 2})
		var ref *configsvc.Refusal
		if !errors.As(err, &ref) || !errors.Is(err, configsvc.ErrInvalidConfig) || len(ref.Diagnostics) != 1 || ref.Diagnostics[0].Code != config.CodeScopeSlotTaken {
			t.Errorf("%s: apply = %v, want invalid_config with scope_slot_taken", name, err)
		}
	}
	// The same scope coming back takes its own slot again.
	if _, res, err := b.svc.ValidateStored(ctx, mgmttest.StackConfig); err != nil || !res.Valid() {
		t.Fatalf("the old scope back: %v %v", res.Diagnostics, err)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: mgmttest.StackConfig, ExpectedGeneration: 2}); err != nil {
		t.Fatalf("bringing team back as it was: %v", err)
	}
}
