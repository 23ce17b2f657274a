package configsvc_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// An apply (and a set, which is one) offers its publishing transaction to
// the result recorder on its context, after the generation is in it, with
// the very ApplyResult it returns; the recorder's error rolls the apply
// back (no generation, the file put back, no hook). A first start and an
// apply that publishes nothing run no recorder.
func TestApplyOffersItsTransactionToTheResultRecorder(t *testing.T) {
	b := newCfg(t, "", nil)
	var told []configsvc.ApplyResult
	fail := errors.New("the record's write failed")
	failing := false
	ctx := kernel.WithResultRecorder(context.Background(), func(ctx context.Context, tx storage.Tx, result any) error {
		res, ok := result.(configsvc.ApplyResult)
		if !ok {
			t.Fatalf("the recorder was told %T, want an ApplyResult", result)
		}
		if g, err := tx.GetGeneration(ctx, res.Generation.Number); err != nil || g.Hash != res.Generation.Hash {
			t.Fatalf("the recorder's transaction holds generation %+v (%v), want %+v", g, err, res.Generation)
		}
		told = append(told, res)
		if failing {
			return fail
		}
		return nil
	})
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if len(told) != 0 {
		t.Fatalf("the first start ran the recorder: %+v", told)
	}
	hooks := 0
	b.svc.OnApply(func(*config.Snapshot) { hooks++ })

	failing = true
	_, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, Actor: "operator:local"})
	if !errors.Is(err, fail) || len(told) != 1 {
		t.Fatalf("apply with a failing recorder = %v (recorder ran %d times), want its error", err, len(told))
	}
	if latest, err := b.store.LatestGeneration(ctx); err != nil || latest.Number != 1 || b.svc.Active().Generation != 1 || hooks != 0 {
		t.Fatalf("after the rolled-back apply: latest %+v (%v), active %d, hooks %d; want generation 1 and no hook", latest, err, b.svc.Active().Generation, hooks)
	}
	if _, err := os.Stat(b.path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rolled-back apply left the config file: %v", err)
	}

	failing = false
	res, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 1, Actor: "operator:local"})
	if err != nil || len(told) != 2 || res.Generation.Number != 2 {
		t.Fatalf("apply = %+v, %v (recorder ran %d times)", res, err, len(told))
	}
	if !reflect.DeepEqual(told[1], res) {
		t.Fatalf("the recorder was told %+v, the apply returned %+v", told[1], res)
	}
	if _, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: otherConfig, ExpectedGeneration: 2, Actor: "operator:local"}); err != nil || len(told) != 2 {
		t.Fatalf("an unchanged apply = %v, recorder ran %d times; want no transaction and no recorder", err, len(told))
	}
	set, err := b.svc.Set(ctx, configsvc.SetRequest{Pointer: "/scopes/more", Value: []byte(`{}`), ExpectedGeneration: 2, Actor: "operator:local"})
	if err != nil || len(told) != 3 || !reflect.DeepEqual(told[2], set) {
		t.Fatalf("set = %+v, %v; recorder told %+v", set, err, told[len(told)-1])
	}
}
