package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// Enablement is checked again inside the call's transaction, against the
// latest generation that transaction sees: once a generation that
// disables an extension commits, its operations are refused even while
// the active generation (what the check before the transaction reads)
// still enables it, as between an apply's commit and its activation. The
// handler never runs; when that generation enables it, the call passes.
func TestEnablementIsCheckedInTheCallsTransaction(t *testing.T) {
	f, err := toolbelttest.NewFixture(t.TempDir(), toolbelttest.Real, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var ran atomic.Int64
	err = f.Register(extension.Registration{Name: "beta", Operations: []extension.Operation{{
		Name: "beta.ping", Summary: "Answer.",
		Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			ran.Add(1)
			return json.RawMessage(`{}`), nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	at, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(at.Token, "beta.ping", `{}`, ""); err != nil || ran.Load() != 1 {
		t.Fatalf("before any generation commits: %v (ran %d)", err, ran.Load())
	}

	// Generation 2 disables beta; it is committed, not yet active.
	f.Env.Extensions.Set(2, "beta", toolbelt.Enablement{})
	ctx := context.Background()
	err = f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		for _, n := range []int64{1, 2} {
			if err := tx.InsertGeneration(ctx, &storage.Generation{Number: n, Hash: "h", Normalized: json.RawMessage(`{}`),
				Actor: "operator:test", CreatedAt: f.Env.Clock.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Call(at.Token, "beta.ping", `{}`, "")
	if !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) {
		t.Fatalf("once a disabling generation committed: %v, want the bare forbidden", err)
	}
	if ran.Load() != 1 {
		t.Fatalf("the handler ran %d times, want once", ran.Load())
	}
	// Builtins are not the extension's: they pass.
	if _, err := f.Call(at.Token, "emit", `{"type":"test.still"}`, ""); err != nil {
		t.Fatalf("emit once beta is disabled: %v", err)
	}

	// Negative control: the committed generation enables it again.
	f.Env.Extensions.Set(2, "beta", toolbelt.Enablement{Enabled: true})
	if _, err := f.Call(at.Token, "beta.ping", `{}`, ""); err != nil || ran.Load() != 2 {
		t.Fatalf("once the committed generation enables it: %v (ran %d)", err, ran.Load())
	}
}
