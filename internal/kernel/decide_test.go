package kernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The tests of the router decision's steps, each alone (see
// Runtime.decide for their order).

// finish ends a Work with state.
func (b *bundle) finish(t *testing.T, work string, state storage.WorkState) {
	t.Helper()
	ctx := context.Background()
	if err := b.store.WithTx(ctx, func(tx storage.Tx) error {
		_, _, err := b.rt.FinishWorkInTx(ctx, tx, work, kernel.Finish{State: state})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDecideStepOwner(t *testing.T) {
	b := setup(t)
	running := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/1"}})
	done := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/2"}})
	b.finish(t, done.ID, storage.WorkSucceeded)
	elsewhere := b.createWork(t, kernel.CreateWorkRequest{Scope: "s2", Keys: []string{"pr/3"}})
	b.finish(t, elsewhere.ID, storage.WorkSucceeded)
	tests := []struct {
		name  string
		scope string
		key   string
		want  string // the owner's id, "" for none
	}{
		{"no key resolves nothing", "s1", "", ""},
		{"a key resolves to the Work that owns it", "s1", "pr/1", running.ID},
		{"a Work's own id resolves to it", "s1", running.ID, running.ID},
		{"a key owned in another scope resolves nothing", "s2", "pr/1", ""},
		{"a finished Work's key is released", "s1", "pr/2", ""},
		{"a finished Work's id resolves to it", "s1", done.ID, done.ID},
		{"a finished Work of another scope does not", "s1", elsewhere.ID, ""},
		{"an unknown key resolves nothing", "s1", "pr/9", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := kernel.ResolveOwner(context.Background(), b.store, storage.Event{Type: "a.b", Scope: tt.scope, CorrelationKey: tt.key})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if w != nil {
				got = w.ID
			}
			if got != tt.want {
				t.Fatalf("owner of %q in %s = %q, want %q", tt.key, tt.scope, got, tt.want)
			}
		})
	}
}

func TestDecideStepWakes(t *testing.T) {
	b := setup(t)
	// keys waits type-only on its own keys; named waits on an outside key;
	// parent waits type-only and has a child.
	keys := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/1"}})
	b.waitOn(t, b.run(t, keys.ID), kernel.WaitSpec{Types: []string{"ci.done"}}, 0)
	named := b.createWork(t, kernel.CreateWorkRequest{})
	b.waitOn(t, b.run(t, named.ID), kernel.WaitSpec{Keys: []string{"ext/1"}}, 0)
	parent := b.createWork(t, kernel.CreateWorkRequest{})
	child := b.createWork(t, kernel.CreateWorkRequest{Parent: parent.ID})
	b.waitOn(t, b.run(t, parent.ID), kernel.WaitSpec{Types: []string{"child.done"}}, 0)
	late := b.createWork(t, kernel.CreateWorkRequest{})
	marked := b.waitOn(t, b.run(t, late.ID), kernel.WaitSpec{Keys: []string{"ext/2"}}, 1<<40)
	tests := []struct {
		name string
		ev   storage.Event
		want []string // the woken Work
	}{
		{"no key wakes nothing", storage.Event{Type: "ci.done", Scope: "s1"}, nil},
		{"the owner's type-only wait on its key", storage.Event{Type: "ci.done", Scope: "s1", CorrelationKey: "pr/1"}, []string{keys.ID}},
		{"a type the wait does not name", storage.Event{Type: "ci.started", Scope: "s1", CorrelationKey: "pr/1"}, nil},
		{"another scope", storage.Event{Type: "ci.done", Scope: "s2", CorrelationKey: "pr/1"}, nil},
		{"an event from the waiting Work itself", storage.Event{Type: "ci.done", Scope: "s1", CorrelationKey: "pr/1", Work: keys.ID}, nil},
		{"a wait that names the key", storage.Event{Type: "any.thing", Scope: "s1", CorrelationKey: "ext/1"}, []string{named.ID}},
		{"the parent's wait on its child's id", storage.Event{Type: "child.done", Scope: "s1", CorrelationKey: child.ID}, []string{parent.ID}},
		{"an event at or below the watermark", storage.Event{Type: "x.y", Scope: "s1", CorrelationKey: "ext/2", Seq: marked.Watermark}, nil},
		{"a hypothetical event counts as new", storage.Event{Type: "x.y", Scope: "s1", CorrelationKey: "ext/2"}, []string{late.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wakes, err := b.rt.WakesFor(context.Background(), b.store, tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, wk := range wakes {
				got = append(got, wk.Work)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("woken %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecideStepSplitWakes(t *testing.T) {
	a, b, c := kernel.Wake{Work: "wrk_a", Wait: "wt_a"}, kernel.Wake{Work: "wrk_b", Wait: "wt_b"}, kernel.Wake{Work: "wrk_c", Wait: "wt_c"}
	tests := []struct {
		name    string
		owner   *storage.Work
		wakes   []kernel.Wake
		primary string
		others  []kernel.Wake
	}{
		{"no owner: every wake is another's", nil, []kernel.Wake{a, b}, "", []kernel.Wake{a, b}},
		{"a waiting owner's wake is the primary", &storage.Work{ID: "wrk_b", State: storage.WorkWaiting}, []kernel.Wake{a, b, c}, "wt_b", []kernel.Wake{a, c}},
		{"a running owner has no primary wake", &storage.Work{ID: "wrk_b", State: storage.WorkRunning}, []kernel.Wake{a, b}, "", []kernel.Wake{a, b}},
		{"no wakes", &storage.Work{ID: "wrk_b", State: storage.WorkWaiting}, nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			primary, others := kernel.SplitWakes(tt.wakes, tt.owner)
			got := ""
			if primary != nil {
				got = primary.Wait
			}
			if got != tt.primary || len(others) != len(tt.others) {
				t.Fatalf("split = %q, %v; want %q, %v", got, others, tt.primary, tt.others)
			}
			for i := range others {
				if others[i] != tt.others[i] {
					t.Fatalf("others %v, want %v", others, tt.others)
				}
			}
		})
	}
}

func TestDecideStepScopeRoutes(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = githubRoutes()
	routes, err := b.rt.ScopeRoutes(context.Background(), "s1")
	if err != nil || len(routes) != len(githubRoutes()) || routes[0].ID != githubRoutes()[0].ID {
		t.Fatalf("routes of s1 = %+v (%v), want the table's in order", routes, err)
	}
	failing := kernel.RouteFunc(func(context.Context, string) ([]kernel.Route, error) { return nil, errors.New("down") })
	rt, err := kernel.New(kernel.Options{Clock: b.clock, IDs: b.ids, Routes: failing})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.ScopeRoutes(context.Background(), "s1"); err == nil || !strings.Contains(err.Error(), "routes of scope s1") {
		t.Fatalf("a failing provider: %v, want the scope named", err)
	}
}

func TestDecideStepBypass(t *testing.T) {
	routes := []kernel.Route{{ID: "r1"}, {ID: "r2"}}
	wake := &kernel.Wake{Work: "wrk_1", Wait: "wt_1", Reason: "Wait wt_1 names key \"k\""}
	tests := []struct {
		name    string
		owner   *storage.Work
		primary *kernel.Wake
		bypass  bool
		effect  kernel.Effect
		wait    string
	}{
		{name: "no owner consults the routes"},
		{name: "a running owner consults the routes", owner: &storage.Work{ID: "wrk_1", State: storage.WorkRunning}},
		{name: "a ready owner consults the routes", owner: &storage.Work{ID: "wrk_1", State: storage.WorkReady}},
		{name: "a waiting owner woken", owner: &storage.Work{ID: "wrk_1", State: storage.WorkWaiting}, primary: wake, bypass: true, effect: kernel.EffectWake, wait: "wt_1"},
		{name: "a waiting owner not woken queues", owner: &storage.Work{ID: "wrk_1", State: storage.WorkWaiting}, bypass: true, effect: kernel.EffectQueue},
		{name: "a finished owner drops", owner: &storage.Work{ID: "wrk_1", State: storage.WorkSucceeded}, bypass: true, effect: kernel.EffectDrop},
		{name: "a cancelled owner drops", owner: &storage.Work{ID: "wrk_1", State: storage.WorkCancelled}, bypass: true, effect: kernel.EffectDrop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bypass, verdicts, effect, wait, detail := kernel.Bypass(routes, tt.owner, tt.primary)
			if bypass != tt.bypass || effect != tt.effect || wait != tt.wait {
				t.Fatalf("bypass = %v %s %q (%s); want %v %s %q", bypass, effect, wait, detail, tt.bypass, tt.effect, tt.wait)
			}
			if !bypass {
				return
			}
			if len(verdicts) != len(routes) || !strings.Contains(detail, tt.owner.ID) {
				t.Fatalf("verdicts %+v, detail %q", verdicts, detail)
			}
			for i, v := range verdicts {
				if v.Route != routes[i].ID || v.Verdict != kernel.VerdictBypassed || v.Reason != "Work wrk_1 is "+string(tt.owner.State) {
					t.Fatalf("verdict %d: %+v, want %s bypassed for the owner's state", i, v, routes[i].ID)
				}
			}
		})
	}
}

func TestDecideStepMatch(t *testing.T) {
	routes := []kernel.Route{
		{ID: "exact", MatchType: "github.pr_opened", MatchSource: "github"},
		{ID: "prefix", MatchType: "github.*"},
		{ID: "other", MatchType: "gitlab.*"},
	}
	tests := []struct {
		name     string
		routes   []kernel.Route
		ev       storage.Event
		matched  int
		verdicts string
	}{
		{"the first match decides; later routes are not reached", routes, storage.Event{Type: "github.pr_opened", Source: "github"}, 0, "exact=match prefix=not_reached other=not_reached "},
		{"a source mismatch skips", routes, storage.Event{Type: "github.pr_opened", Source: "gitea"}, 1, "exact=skip prefix=match other=not_reached "},
		{"a prefix matches deeper types", routes, storage.Event{Type: "github.pr.x", Source: "github"}, 1, "exact=skip prefix=match other=not_reached "},
		{"a prefix does not match its bare family", routes, storage.Event{Type: "github", Source: "github"}, -1, "exact=skip prefix=skip other=skip "},
		{"no route matches", routes, storage.Event{Type: "noise.x"}, -1, "exact=skip prefix=skip other=skip "},
		{"no routes", nil, storage.Event{Type: "noise.x"}, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs, matched := kernel.MatchRoutes(tt.routes, tt.ev)
			if got := verdicts(kernel.Decision{Routes: vs}); matched != tt.matched || got != tt.verdicts {
				t.Fatalf("match = %d %q, want %d %q", matched, got, tt.matched, tt.verdicts)
			}
			for _, v := range vs {
				if v.Reason == "" {
					t.Fatalf("verdict %+v has no reason", v)
				}
			}
		})
	}
}

func TestDecideStepRouteEffect(t *testing.T) {
	owner := &storage.Work{ID: "wrk_1", State: storage.WorkRunning}
	start := kernel.Route{ID: "r", Effect: kernel.EffectStart, Binding: "b1"}
	queue := kernel.Route{ID: "r", Effect: kernel.EffectQueue}
	drop := kernel.Route{ID: "r", Effect: kernel.EffectDrop}
	keyed := storage.Event{Type: "a.b", CorrelationKey: "k"}
	own := storage.Event{Type: "a.b", CorrelationKey: "k", Work: "wrk_1"}
	tests := []struct {
		name    string
		rt      kernel.Route
		owner   *storage.Work
		ev      storage.Event
		effect  kernel.Effect
		binding string
		detail  string
	}{
		{"start without an owner starts on the route's binding", start, nil, keyed, kernel.EffectStart, "b1", "starts a new Work on binding b1"},
		{"start with an owner queues for it", start, owner, keyed, kernel.EffectQueue, "", "instead of starting another"},
		{"queue with an owner queues for it", queue, owner, keyed, kernel.EffectQueue, "", "queued as input for Work wrk_1"},
		{"queue without an owner drops", queue, nil, keyed, kernel.EffectDrop, "", "no unfinished Work owns key"},
		{"queue without a key drops", queue, nil, storage.Event{Type: "a.b"}, kernel.EffectDrop, "", "no correlation key"},
		{"drop drops", drop, owner, keyed, kernel.EffectDrop, "", "route r drops it"},
		{"the owner's own emission is not started back to it", start, owner, own, kernel.EffectDrop, "", "not queued back to it"},
		{"the owner's own emission is not queued back to it", queue, owner, own, kernel.EffectDrop, "", "not queued back to it"},
		{"the owner's own emission on a dropping route", drop, owner, own, kernel.EffectDrop, "", "route r drops it"},
		{"an effect this release does not know drops", kernel.Route{ID: "r", Effect: kernel.Effect("teleport")}, nil, keyed, kernel.EffectDrop, "", "does not apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			effect, binding, detail := kernel.RouteEffect(tt.rt, tt.owner, tt.ev)
			if effect != tt.effect || binding != tt.binding || !strings.Contains(detail, tt.detail) {
				t.Fatalf("effect = %s %q %q, want %s %q containing %q", effect, binding, detail, tt.effect, tt.binding, tt.detail)
			}
		})
	}
}

// keyOwnerReads counts GetKeyOwner.
type keyOwnerReads struct {
	storage.Reader
	n int
}

func (k *keyOwnerReads) GetKeyOwner(ctx context.Context, scope, key string) (storage.Work, error) {
	k.n++
	return k.Reader.GetKeyOwner(ctx, scope, key)
}

// A decision reads the owner of the event's key once, for the owner step
// and the wakes step both.
func TestDecisionReadsTheKeyOwnerOnce(t *testing.T) {
	b := setup(t)
	w := b.createWork(t, kernel.CreateWorkRequest{Keys: []string{"pr/1"}})
	b.waitOn(t, b.run(t, w.ID), kernel.WaitSpec{Types: []string{"ci.done"}}, 0)
	rd := &keyOwnerReads{Reader: b.store}
	d, err := b.rt.Trace(context.Background(), rd, storage.Event{Type: "ci.done", Scope: "s1", CorrelationKey: "pr/1"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Work != w.ID || d.Effect != kernel.EffectWake {
		t.Fatalf("decision = %+v, want it to wake %s", d, w.ID)
	}
	if rd.n != 1 {
		t.Fatalf("the decision read the key's owner %d times, want once", rd.n)
	}
}
