package config

import "testing"

func TestRouteWarnings(t *testing.T) {
	for _, c := range []struct {
		m    Match
		fire bool
	}{
		{Match{Type: "deploy.*", Source: "core.manual"}, true},
		{Match{Type: "deploy.requested"}, true},
		{Match{Type: "github.*", Source: "github"}, true},
		{Match{Type: "note.added", Source: "execution"}, true},
		{Match{Type: "core.work.finished"}, true},
		{Match{Type: "core.work.*", Source: "core.host"}, true},
		{Match{Type: "core.*"}, true},
		{Match{Type: "core.manual.wake", Source: "core.manual"}, true},
		// Never produced, or never routed.
		{Match{Type: "core.manual"}, false},
		{Match{Type: "core.manual", Source: "core.manual"}, false},
		{Match{Type: "core.work.created"}, false},
		{Match{Type: "core.action"}, false},
		{Match{Type: "core.work.finished", Source: "core.manual"}, false},
		{Match{Type: "deploy.*", Source: "core.host"}, false},
		{Match{Type: "deploy.*", Source: "core.action"}, false},
	} {
		if got := canFire(c.m); got != c.fire {
			t.Errorf("canFire(%+v) = %v, want %v", c.m, got, c.fire)
		}
	}

	text := `{"version": 1, "scopes": {
		"a": {"bindings": {"b": {"executor": "shell"}}, "routes": [
			{"id": "never", "match": {"type": "core.manual"}, "binding": "b"},
			{"id": "fine", "match": {"type": "a.*", "source": "core.manual"}, "binding": "b"}]},
		"off": {"enabled": false, "bindings": {"b": {"executor": "shell"}}, "routes": [{"id": "never", "match": {"type": "core.manual"}, "binding": "b"}]}}}`
	snap, res := Validate([]byte(text), testRegistry(t))
	if !res.Valid() {
		t.Fatal(res.Diagnostics)
	}
	if len(res.Warnings) != 1 || res.Warnings[0].Code != WarnRouteNeverFires || res.Warnings[0].Pointer != "/scopes/a/routes/0/match" {
		t.Fatalf("warnings %v, want one route_never_fires at /scopes/a/routes/0/match", res.Warnings)
	}
	if got := RouteWarnings(snap); len(got) != 1 {
		t.Fatalf("RouteWarnings = %v", got)
	}
}
