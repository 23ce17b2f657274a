package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func TestAcceptRefusesMalformedEvents(t *testing.T) {
	b := setup(t)
	ok := storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", Data: []byte(`{"n":1}`)}
	big := `{"x":"` + strings.Repeat("a", kernel.MaxDataBytes) + `"}`
	cases := []struct {
		name string
		mod  func(*storage.Event)
		code string
	}{
		{"single segment type", func(e *storage.Event) { e.Type = "opened" }, "invalid_event"},
		{"upper case type", func(e *storage.Event) { e.Type = "GitHub.pr" }, "invalid_event"},
		{"empty segment", func(e *storage.Event) { e.Type = "a..b" }, "invalid_event"},
		{"segment starts with digit", func(e *storage.Event) { e.Type = "a.1b" }, "invalid_event"},
		{"no source", func(e *storage.Event) { e.Source = "" }, "invalid_event"},
		{"no scope", func(e *storage.Event) { e.Scope = "" }, "invalid_event"},
		{"data an array", func(e *storage.Event) { e.Data = []byte(`[1]`) }, "invalid_event"},
		{"data not JSON", func(e *storage.Event) { e.Data = []byte(`{"a":`) }, "invalid_event"},
		{"duplicate names", func(e *storage.Event) { e.Data = []byte(`{"a":1,"a":2}`) }, "invalid_event"},
		{"data too large", func(e *storage.Event) { e.Data = []byte(big) }, "data_too_large"},
		{"core type from an ingress", func(e *storage.Event) { e.Type = "core.work.created" }, "core_type_reserved"},
		{"core type from an execution", func(e *storage.Event) { e.Type, e.Source = "core.manual.retry", kernel.SourceExecution }, "core_type_reserved"},
		{"control character in key", func(e *storage.Event) { e.CorrelationKey = "a\nb" }, "invalid_event"},
		{"missing parent", func(e *storage.Event) { e.Parent = "evt_missing" }, "parent_not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := ok
			c.mod(&ev)
			_, err := b.accept(t, ev)
			mustCode(t, err, c.code)
			if !errors.Is(err, extension.ErrInvalid) {
				t.Fatalf("%v does not unwrap to ErrInvalid", err)
			}
		})
	}
	// None of the refusals used a sequence number.
	got, err := b.accept(t, ok)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 1 || got.Root != got.ID || got.Depth != 0 || string(got.Data) != `{"n":1}` {
		t.Fatalf("accepted = %+v", got)
	}
}

func TestAcceptNormalisesData(t *testing.T) {
	b := setup(t)
	ev, err := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1", Data: []byte(" { \"a\" : [ 1 , 2 ] } ")})
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.Data) != `{"a":[1,2]}` {
		t.Fatalf("data = %s", ev.Data)
	}
	empty, err := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
	if err != nil || string(empty.Data) != `{}` {
		t.Fatalf("empty data = %s, %v", empty.Data, err)
	}
}

func TestAcceptActorOnlyFromOperatorSources(t *testing.T) {
	b := setup(t)
	manual, err := b.accept(t, storage.Event{Type: "deploy.requested", Source: kernel.SourceManual, Scope: "s1", Actor: "operator:ann"})
	if err != nil {
		t.Fatal(err)
	}
	action, err := b.accept(t, storage.Event{Type: "core.action.run", Source: kernel.SourceAction, Scope: "s1", Actor: "operator:bob"})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := b.accept(t, storage.Event{Type: "deploy.requested", Source: kernel.SourceExecution, Scope: "s1", Actor: "operator:ann"})
	if err != nil {
		t.Fatal(err)
	}
	ingress, err := b.accept(t, storage.Event{Type: "github.push", Source: "github", Scope: "s1", Actor: "operator:ann"})
	if err != nil {
		t.Fatal(err)
	}
	b.reopen(t)
	for id, want := range map[string]string{manual.ID: "operator:ann", action.ID: "operator:bob", forged.ID: "", ingress.ID: ""} {
		got, err := b.store.GetEvent(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Actor != want {
			t.Errorf("event from %s has actor %q, want %q", got.Source, got.Actor, want)
		}
	}
}

func TestAcceptIdempotentByDeliveryIdentity(t *testing.T) {
	b := setup(t)
	first, err := b.accept(t, storage.Event{Type: "github.push", Source: "github", Scope: "s1", DeliveryID: "gh-1", Data: []byte(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed {
		t.Fatal("the first acceptance is marked replayed")
	}
	b.reopen(t)
	again, err := b.accept(t, storage.Event{Type: "github.push", Source: "github", Scope: "s1", DeliveryID: "gh-1", Data: []byte(`{"n":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.ID != first.ID || again.Seq != first.Seq || string(again.Data) != `{"n":1}` {
		t.Fatalf("redelivery = %+v, want the original %+v", again, first)
	}
	other, err := b.accept(t, storage.Event{Type: "github.push", Source: "gitlab", Scope: "s1", DeliveryID: "gh-1"})
	if err != nil || other.ID == first.ID {
		t.Fatalf("the same delivery id from another source = %+v, %v", other, err)
	}
	evs, err := b.store.ListEvents(context.Background(), &storage.ListEventsParams{})
	if err != nil || len(evs) != 2 {
		t.Fatalf("record holds %d events, %v; want 2", len(evs), err)
	}
	// A caller-chosen id is idempotent too, and refuses another event.
	id := "evt_01j0000000000000000000000a"
	if _, err := b.accept(t, storage.Event{ID: id, Type: "a.b", Source: "x", Scope: "s1"}); err != nil {
		t.Fatal(err)
	}
	re, err := b.accept(t, storage.Event{ID: id, Type: "a.b", Source: "x", Scope: "s1"})
	if err != nil || !re.Replayed {
		t.Fatalf("same id again = %+v, %v", re, err)
	}
	_, err = b.accept(t, storage.Event{ID: id, Type: "a.c", Source: "x", Scope: "s1"})
	mustCode(t, err, "event_conflict")
}

func TestAcceptCausation(t *testing.T) {
	b := setup(t)
	root, err := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := b.accept(t, storage.Event{Type: "a.c", Source: "x", Scope: "s1", Parent: root.ID, Root: "evt_forged", Depth: 42})
	if err != nil {
		t.Fatal(err)
	}
	grand, err := b.derive(t, storage.Event{Type: "a.d", Source: kernel.SourceExecution, Scope: "s1", Parent: child.ID}, kernel.CausalLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if child.Root != root.ID || child.Depth != 1 || grand.Root != root.ID || grand.Depth != 2 || grand.Parent != child.ID {
		t.Fatalf("causation: child %+v, grandchild %+v", child, grand)
	}
	_, err = b.derive(t, storage.Event{Type: "a.d", Source: kernel.SourceExecution, Scope: "s1"}, kernel.CausalLimits{})
	mustCode(t, err, "invalid_event")
}

func TestCausalDepthPinnedOnRoot(t *testing.T) {
	b := setup(t)
	root, err := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	parent := root
	for depth := 1; depth <= 3; depth++ {
		parent, err = b.derive(t, storage.Event{Type: "agent.ping", Source: kernel.SourceExecution, Scope: "s1", Parent: parent.ID}, kernel.CausalLimits{MaxDepth: 3, PerMinute: 100})
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
	}
	b.reopen(t)
	// Larger limits from the caller do not loosen the pinned ones.
	_, err = b.derive(t, storage.Event{Type: "agent.ping", Source: kernel.SourceExecution, Scope: "s1", Parent: parent.ID}, kernel.CausalLimits{MaxDepth: 50, PerMinute: 100})
	mustCode(t, err, "causal_depth_exceeded")
	pin, err := b.store.GetCausalRoot(context.Background(), root.ID)
	if err != nil || pin.MaxDepth != 3 || pin.PerMinute != 100 {
		t.Fatalf("pinned limits = %+v, %v", pin, err)
	}
	// Another root pins its own limits.
	other, _ := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
	if _, err := b.derive(t, storage.Event{Type: "agent.ping", Source: kernel.SourceExecution, Scope: "s1", Parent: other.ID}, kernel.CausalLimits{MaxDepth: 1, PerMinute: 5}); err != nil {
		t.Fatal(err)
	}
	pin, _ = b.store.GetCausalRoot(context.Background(), other.ID)
	if pin.MaxDepth != 1 || pin.PerMinute != 5 {
		t.Fatalf("second root pinned %+v", pin)
	}
}

func TestCausalRatePerMinute(t *testing.T) {
	b := setup(t)
	root, err := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	limits := kernel.CausalLimits{MaxDepth: 10, PerMinute: 3}
	emit := func(delivery string) (storage.Event, error) {
		return b.derive(t, storage.Event{Type: "agent.ping", Source: kernel.SourceExecution, Scope: "s1", Parent: root.ID, DeliveryID: delivery}, limits)
	}
	for i := range 3 {
		if _, err := emit(string(rune('a' + i))); err != nil {
			t.Fatalf("emission %d: %v", i, err)
		}
		b.clock.Advance(10 * time.Second)
	}
	_, err = emit("d")
	mustCode(t, err, "causal_rate_exceeded")
	// A replay of an accepted emission is not counted and not refused.
	if re, err := emit("a"); err != nil || !re.Replayed {
		t.Fatalf("replay inside a full window = %+v, %v", re, err)
	}
	b.reopen(t)
	_, err = emit("d")
	mustCode(t, err, "causal_rate_exceeded")
	b.clock.Advance(31 * time.Second) // one minute after the window opened
	if _, err := emit("d"); err != nil {
		t.Fatalf("a new window still refused: %v", err)
	}
	evs, _ := b.store.ListEvents(context.Background(), &storage.ListEventsParams{})
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("refusals left a gap: %v", evs)
		}
	}
}

// TestRefusedFirstDerivationPinsNothing: an emission refused for depth at
// its root's first derivation writes nothing, even when the caller goes on
// and commits (as the router does when it turns a refused start into a
// drop), so the root's limits are not fixed by a refused emission.
func TestRefusedFirstDerivationPinsNothing(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	root, err := b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	// Two steps of plain causation: depth 2, no pin yet.
	parent := root
	for i := 0; i < 2; i++ {
		if parent, err = b.accept(t, storage.Event{Type: "a.b", Source: "x", Scope: "s1", Parent: parent.ID}); err != nil {
			t.Fatal(err)
		}
	}
	err = b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := b.rt.AcceptDerivedInTx(ctx, tx, storage.Event{Type: "agent.ping", Source: kernel.SourceExecution, Scope: "s1", Parent: parent.ID}, kernel.CausalLimits{MaxDepth: 2, PerMinute: 5})
		mustCode(t, err, "causal_depth_exceeded")
		return nil // commit whatever the refusal left behind
	})
	if err != nil {
		t.Fatal(err)
	}
	if pin, err := b.store.GetCausalRoot(ctx, root.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused first derivation pinned the root: %+v, %v", pin, err)
	}
	// The root's first accepted derivation still pins the limits it is given.
	if _, err := b.derive(t, storage.Event{Type: "agent.ping", Source: kernel.SourceExecution, Scope: "s1", Parent: root.ID}, kernel.CausalLimits{MaxDepth: 4, PerMinute: 5}); err != nil {
		t.Fatal(err)
	}
	if pin, err := b.store.GetCausalRoot(ctx, root.ID); err != nil || pin.MaxDepth != 4 {
		t.Fatalf("pin after an accepted derivation = %+v, %v", pin, err)
	}
}

// Acceptance keeps an Actor only from core.manual and core.action: from
// every other source, the host's own and look-alikes of the operator
// sources included, a forged Actor is dropped.
func TestAcceptDropsAForgedActorFromEveryOtherSource(t *testing.T) {
	b := setup(t)
	sources := []string{kernel.SourceHost, kernel.SourceExecution, "github", "core", "core.actions", "core.action.run", "core.manual.x", "manual", "action"}
	ids := map[string]string{}
	for _, src := range sources {
		ev, err := b.accept(t, storage.Event{Type: "note.added", Source: src, Scope: "s1", Actor: "operator:ann"})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		ids[src] = ev.ID
		if kernel.KeepsActor(src) {
			t.Errorf("KeepsActor(%q) = true", src)
		}
	}
	kept, err := b.accept(t, storage.Event{Type: kernel.TypeAction, Source: kernel.SourceAction, Scope: "s1", Actor: "operator:ann"})
	if err != nil {
		t.Fatal(err)
	}
	b.reopen(t)
	for src, id := range ids {
		ev, err := b.store.GetEvent(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Actor != "" {
			t.Errorf("an event from %s kept the forged actor %q", src, ev.Actor)
		}
	}
	if ev, err := b.store.GetEvent(context.Background(), kept.ID); err != nil || ev.Actor != "operator:ann" {
		t.Errorf("the core.action event's actor = %q, %v; want operator:ann", ev.Actor, err)
	}
}
