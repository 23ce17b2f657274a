package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

func verdicts(d kernel.Decision) string {
	out := ""
	for _, v := range d.Routes {
		out += fmt.Sprintf("%s=%s ", v.Route, v.Verdict)
	}
	return out
}

// acceptRoute accepts and routes an event in one transaction.
func (b *bundle) acceptRoute(t *testing.T, ev storage.Event) (storage.Event, kernel.Decision) {
	t.Helper()
	var out storage.Event
	var d kernel.Decision
	err := b.store.WithTx(context.Background(), func(tx storage.Tx) error {
		var err error
		if out, err = b.rt.AcceptInTx(context.Background(), tx, ev); err != nil {
			return err
		}
		d, err = b.rt.Route(context.Background(), tx, out)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, d
}

func inputsOf(t *testing.T, rd storage.Reader, work string) []string {
	t.Helper()
	ins, err := rd.ListInputs(context.Background(), &storage.ListInputsParams{Work: work})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.Event)
	}
	return out
}

func githubRoutes() []kernel.Route {
	return []kernel.Route{
		{ID: "open", MatchType: "github.pr_opened", Binding: "reviewer", Effect: kernel.EffectStart},
		{ID: "rest", MatchType: "github.*", MatchSource: "github", Effect: kernel.EffectQueue},
		{ID: "noise", MatchType: "noise.*", Effect: kernel.EffectDrop},
	}
}

func TestRouteEffects(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = githubRoutes()
	ctx := context.Background()

	opened, d := b.acceptRoute(t, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectStart || d.Started == "" || d.Binding != "reviewer" || verdicts(d) != "open=match rest=not_reached noise=not_reached " {
		t.Fatalf("first pr_opened: %+v", d)
	}
	work := d.Started
	w, err := b.store.GetWork(ctx, work)
	if err != nil || w.State != storage.WorkReady || w.Binding != "reviewer" {
		t.Fatalf("started work = %+v, %v", w, err)
	}
	created, _ := b.store.GetEvent(ctx, w.CreatedEvent)
	if created.Type != kernel.TypeWorkCreated || created.Parent != opened.ID || created.Depth != 1 || created.Root != opened.ID {
		t.Fatalf("core.work.created = %+v", created)
	}

	again, d := b.acceptRoute(t, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectQueue || d.Work != work || d.Started != "" {
		t.Fatalf("second pr_opened with an owned key: %+v", d)
	}
	comment, d := b.acceptRoute(t, storage.Event{Type: "github.comment", Source: "github", Scope: "s1", CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectQueue || verdicts(d) != "open=skip rest=match noise=not_reached " {
		t.Fatalf("comment: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "github.comment", Source: "gitlab", Scope: "s1", CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectUnmatched || verdicts(d) != "open=skip rest=skip noise=skip " || d.Routes[1].Reason != "source gitlab is not github" {
		t.Fatalf("comment from another source: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "noise.tick", Source: "x", Scope: "s1", CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectDrop || d.Route != "noise" {
		t.Fatalf("noise: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "github.comment", Source: "github", Scope: "s1", CorrelationKey: "pr/9"})
	if d.Effect != kernel.EffectDrop {
		t.Fatalf("queue without an owner: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "github.comment", Source: "github", Scope: "s1", Work: work, CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectDrop || d.Work != work {
		t.Fatalf("the Work's own event came back to it: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s2", CorrelationKey: "pr/1"})
	if d.Effect != kernel.EffectUnmatched || len(d.Routes) != 0 {
		t.Fatalf("a scope without routes: %+v", d)
	}

	b.reopen(t)
	got := inputsOf(t, b.store, work)
	if fmt.Sprint(got) != fmt.Sprint([]string{opened.ID, again.ID, comment.ID}) {
		t.Fatalf("inputs after reopen = %v", got)
	}
	if owner, err := b.store.GetKeyOwner(ctx, "s1", "pr/1"); err != nil || owner.ID != work {
		t.Fatalf("owner of pr/1 = %+v, %v", owner, err)
	}
	// A replayed delivery is not routed twice.
	ev := storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/2", DeliveryID: "d-7"}
	_, d1 := b.acceptRoute(t, ev)
	_, d2 := b.acceptRoute(t, ev)
	if d1.Started == "" || d2.Started != "" {
		t.Fatalf("a redelivery started Work again: %+v then %+v", d1, d2)
	}
}

func TestTraceIsRouteWithoutWriting(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = githubRoutes()
	ctx := context.Background()
	b.acceptRoute(t, storage.Event{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/1"})
	before, _ := b.store.LastSeq(ctx)
	probes := []storage.Event{
		{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/5"},
		{Type: "github.pr_opened", Source: "github", Scope: "s1", CorrelationKey: "pr/1"},
		{Type: "github.comment", Source: "github", Scope: "s1", CorrelationKey: "pr/1"},
		{Type: "noise.x", Scope: "s1"},
		{Type: "other.x", Scope: "s1"},
	}
	var traced []kernel.Decision
	for _, p := range probes {
		d, err := b.ctl.Trace(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		traced = append(traced, d)
	}
	after, _ := b.store.LastSeq(ctx)
	ws, _ := b.store.ListWork(ctx, &storage.ListWorkParams{})
	if after != before || len(ws) != 1 {
		t.Fatalf("trace wrote: seq %d -> %d, %d Work", before, after, len(ws))
	}
	// Routing the same events decides the same way.
	for i, p := range probes {
		if p.Source == "" {
			p.Source = kernel.SourceManual
		}
		_, d := b.acceptRoute(t, p)
		if d.Effect != traced[i].Effect || verdicts(d) != verdicts(traced[i]) || d.Work != traced[i].Work {
			t.Errorf("probe %d: trace %+v, route %+v", i, traced[i], d)
		}
	}
	for _, bad := range []storage.Event{
		{Type: "core.work.created", Scope: "s1"},
		{Type: "a.b", Source: kernel.SourceHost, Scope: "s1"},
		{Type: "nodot", Scope: "s1"},
		{Type: "a.b", Scope: "s1", Data: []byte(`[]`)},
	} {
		if _, err := b.ctl.Trace(ctx, bad); kernel.CodeOf(err) == "" {
			t.Errorf("trace of %+v: %v, want a refusal", bad, err)
		}
	}
}

func TestRouteStartRespectsCausalBounds(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = []kernel.Route{{ID: "loop", MatchType: "loop.*", Binding: "b", Effect: kernel.EffectStart}}
	var err error
	b.rt, err = kernel.New(kernel.Options{Clock: b.clock, IDs: b.ids, Routes: b.routes, Causal: kernel.CausalLimits{MaxDepth: 2, PerMinute: 100}})
	if err != nil {
		t.Fatal(err)
	}
	root, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "k0"})
	if d.Started == "" {
		t.Fatalf("depth 0: %+v", d)
	}
	child, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "k1", Parent: root.ID})
	if d.Started == "" {
		t.Fatalf("depth 1: %+v", d)
	}
	_, d = b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "k2", Parent: child.ID})
	if d.Started != "" || d.Effect != kernel.EffectDrop || !strings.Contains(d.Detail, "causal_depth_exceeded") {
		t.Fatalf("depth 2 started Work past the bound: %+v", d)
	}
}

// A start refused by the causal depth is only a drop: it pins no limits on
// a root that had none (the refused emission would otherwise fix the
// root's limits for good) and writes nothing else.
func TestRouteStartRefusedByDepthLeavesNoTrace(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = []kernel.Route{{ID: "loop", MatchType: "loop.*", Binding: "b", Effect: kernel.EffectStart}}
	b.rt.SetCausal(kernel.CausalLimits{MaxDepth: 2, PerMinute: 100})
	ctx := context.Background()
	// A chain that started nothing yet, so its root has no pinned limits.
	root, err := b.accept(t, storage.Event{Type: "note.a", Source: "x", Scope: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := b.accept(t, storage.Event{Type: "note.a", Source: "x", Scope: "s1", Parent: root.ID})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := b.store.LastSeq(ctx)
	ev, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "k2", Parent: child.ID})
	if d.Started != "" || d.Effect != kernel.EffectDrop || !strings.Contains(d.Detail, "causal_depth_exceeded") {
		t.Fatalf("a start two steps below its root under depth 2: %+v, want dropped", d)
	}
	if _, err := b.store.GetCausalRoot(ctx, root.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the refused start pinned limits on its root: %v", err)
	}
	if last, _ := b.store.LastSeq(ctx); last != before+1 || last != ev.Seq {
		t.Fatalf("after the refused start the last event is %d, want only the routed event %d", last, ev.Seq)
	}
	if ws, _ := b.store.ListWork(ctx, &storage.ListWorkParams{Scope: "s1"}); len(ws) != 0 {
		t.Fatalf("the refused start created Work: %+v", ws)
	}
	// The root is pinned later by a start it allows, under the limits
	// current then.
	b.rt.SetCausal(kernel.CausalLimits{MaxDepth: 5, PerMinute: 100})
	if _, d := b.acceptRoute(t, storage.Event{Type: "loop.a", Source: "x", Scope: "s1", CorrelationKey: "k3", Parent: child.ID}); d.Started == "" {
		t.Fatalf("a start within the new depth: %+v", d)
	}
	if pin := b.pin(t, root.ID); pin.MaxDepth != 5 {
		t.Fatalf("the root pinned %+v, want depth 5", pin)
	}
}
