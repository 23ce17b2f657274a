package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/api"
)

// reconcileConfig has a scope team whose route offers a sample and whose
// slow binding runs until it is stopped, and a scope side with the same
// binding. withSlow false drops team's slow binding; sideOn false
// disables side.
func reconcileConfig(withSlow, sideOn bool) []byte {
	slow := map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sleep", "300"}}}
	quick := map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"true"}}}
	teamBindings := map[string]any{"quick": quick}
	if withSlow {
		teamBindings["slow"] = slow
	}
	doc := map[string]any{
		"version": 1,
		"scopes": map[string]any{
			"team": map[string]any{
				"bindings": teamBindings,
				"routes": []any{map[string]any{
					"id": "jobs", "match": map[string]any{"type": "job.*"}, "binding": "quick",
					"samples": map[string]any{"job-one": map[string]any{"type": "job.run", "correlation_key": "job/1", "data": map[string]any{"n": 1}}},
				}},
			},
			"side": map[string]any{"enabled": sideOn, "bindings": map[string]any{"slow": slow}},
		},
	}
	b, _ := json.Marshal(doc)
	return b
}

// Route samples and scope reconcile through the real CLI: a route's
// sample is listed and traced by name; after an apply drops a binding
// and disables a scope, 'scopes reconcile --dry-run' lists the two Work
// left behind and changes nothing, 'scopes reconcile' holds both with the
// operator on each core.scope.reconciled Event, and the same request
// again under its Idempotency-Key answers the same and records nothing.
func TestScopeReconcileAndRouteSamplesThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	e.start()
	var applied api.Applied
	e.cliJSON(&applied, "config", "apply", writeFile(t, filepath.Join(e.root, "before.json"), reconcileConfig(true, true)))

	// Samples: listed with their route, traced by name.
	var samples api.Page[api.RouteSample]
	e.cliJSON(&samples, "route", "--samples", "--scope", "team")
	if len(samples.Items) != 1 || samples.Items[0].Name != "job-one" || samples.Items[0].Route != "jobs" ||
		!strings.Contains(string(samples.Items[0].Event), `"correlation_key":"job/1"`) {
		t.Fatalf("route --samples: %+v", samples.Items)
	}
	var tr api.Trace
	e.cliJSON(&tr, "route", "--trace", "job-one", "--scope", "team")
	if tr.Decision.Effect != api.EffectStart || tr.Decision.Route != "jobs" || tr.Decision.Binding != "quick" {
		t.Fatalf("route --trace job-one: %+v", tr.Decision)
	}
	if code, out, stderr := e.cli("route", "--trace", "job-one", "--scope", "team"); code != 0 || !strings.Contains(out, "effect: start:") {
		t.Fatalf("route --trace job-one: exit %d %q %q", code, out, stderr)
	}
	// The daemon finds the request wrong: a usage error, exit 2.
	if code, _, stderr := e.cli("route", "--trace", "nope", "--scope", "team"); code != 2 || !strings.Contains(stderr, "offers no sample nope") {
		t.Fatalf("route --trace of an unknown sample: exit %d %q", code, stderr)
	}

	var created struct {
		Work api.Work `json:"work"`
	}
	e.cliJSON(&created, "work", "create", "--scope", "team", "--binding", "slow")
	team := created.Work.ID
	e.cliJSON(&created, "work", "create", "--scope", "side")
	side := created.Work.ID
	for _, id := range []string{team, side} {
		e.waitWork(id, "running", func(w work) bool { return w.State == "running" })
	}
	e.cliJSON(&applied, "config", "apply", writeFile(t, filepath.Join(e.root, "after.json"), reconcileConfig(false, false)))

	eventCount := func() int {
		var p api.Page[api.Event]
		e.cliJSON(&p, "events", "list", "--limit", "500")
		return len(p.Items)
	}
	before := eventCount()
	var dry api.Reconciled
	e.cliJSON(&dry, "scopes", "reconcile", "--dry-run")
	problems := func(r api.Reconciled) map[string]string {
		out := map[string]string{}
		for _, it := range r.Items {
			out[it.Work] = it.Problem + "/" + it.Action
		}
		return out
	}
	want := map[string]string{team: "binding_removed/hold", side: "scope_inactive/hold"}
	if got := problems(dry); !dry.DryRun || len(got) != 2 || got[team] != want[team] || got[side] != want[side] {
		t.Fatalf("reconcile --dry-run: %+v", dry)
	}
	if n := eventCount(); n != before {
		t.Fatalf("a dry run recorded events: %d -> %d", before, n)
	}
	if w := e.getWork(team); w.BlockedReason != "" {
		t.Fatalf("a dry run held Work: %+v", w)
	}
	if code, out, _ := e.cli("scopes", "reconcile", "team", "--dry-run"); code != 0 || !strings.Contains(out, "would hold") || strings.Contains(out, side) {
		t.Fatalf("reconcile team --dry-run printed %q", out)
	}

	var done api.Reconciled
	e.cliJSON(&done, "scopes", "reconcile", "--idempotency-key", "reconcile-1")
	if got := problems(done); done.DryRun || len(got) != 2 || got[team] != want[team] || got[side] != want[side] {
		t.Fatalf("reconcile: %+v", done)
	}
	for _, it := range done.Items {
		var ev api.Event
		e.cliJSON(&ev, "events", "get", it.Event)
		if ev.Type != "core.scope.reconciled" || ev.Work != it.Work || !strings.HasPrefix(ev.Actor, "operator:") {
			t.Errorf("the event of %s: %+v", it.Work, ev)
		}
		if w := e.getWork(it.Work); w.BlockedReason != "scope_reconciled" || !strings.Contains(w.BlockedDetail, ev.Actor) || w.State != "running" {
			t.Errorf("Work %s after reconcile: %+v, want running, held scope_reconciled by %s", it.Work, w, ev.Actor)
		}
	}
	after := eventCount()
	if after != before+2 {
		t.Fatalf("reconcile recorded %d events, want 2", after-before)
	}
	// The same request again: the same answer, nothing recorded.
	var again api.Reconciled
	e.cliJSON(&again, "scopes", "reconcile", "--idempotency-key", "reconcile-1")
	if len(again.Items) != 2 || again.Items[0].Event != done.Items[0].Event || again.Items[1].Event != done.Items[1].Event {
		t.Fatalf("the replay answered %+v, want %+v", again, done)
	}
	if n := eventCount(); n != after {
		t.Fatalf("the replay recorded events: %d -> %d", after, n)
	}
	// A new request finds nothing left behind.
	if code, out, _ := e.cli("scopes", "reconcile"); code != 0 || !strings.Contains(out, "No Work is left behind") {
		t.Fatalf("reconcile after settling printed %q", out)
	}
	for _, id := range []string{team, side} {
		if code, _, stderr := e.cli("work", "cancel", id); code != 0 {
			t.Fatalf("work cancel %s: %s", id, stderr)
		}
		e.waitWork(id, "cancelled", func(w work) bool { return w.State == "cancelled" })
	}
}
