package github

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSamplesAreWhatDeliveriesWouldSend(t *testing.T) {
	ing := (&Extension{}).Ingress().(ingress)
	cfg := json.RawMessage(`{"repositories": {"Octo/Zeta": {"scope": "ops"}, "Octo/Alpha": {"scope": "ops"}, "octo/other": {"scope": "dev"}}, "installations": {"42": {"scope": "bots"}}}`)

	got := ing.Samples(cfg, "ops")
	if len(got) != len(sampleDeliveries) {
		t.Fatalf("%d samples, want %d: %+v", len(got), len(sampleDeliveries), got)
	}
	byName := map[string]int{}
	for i, s := range got {
		byName[s.Name] = i
		if !strings.HasPrefix(s.Type, EventPrefix) || !json.Valid(s.Data) {
			t.Errorf("sample %s: type %q, data %s", s.Name, s.Type, s.Data)
		}
		// The scope's first repository in name order, as configured.
		if !strings.Contains(string(s.Data), `"repository":"Octo/Alpha"`) {
			t.Errorf("sample %s is not about Octo/Alpha: %s", s.Name, s.Data)
		}
	}
	if len(byName) != len(got) {
		t.Errorf("sample names repeat: %+v", got)
	}
	for name, want := range map[string][2]string{
		"github-issue-opened":     {"github.issues.opened", "Octo/Alpha#1"},
		"github-checks-completed": {"github.check_suite.completed", "Octo/Alpha#2"},
		"github-push":             {"github.push", "Octo/Alpha@refs/heads/main"},
	} {
		i, ok := byName[name]
		if !ok || got[i].Type != want[0] || got[i].CorrelationKey != want[1] {
			t.Errorf("sample %s = %+v, want type %s key %s", name, got[i], want[0], want[1])
		}
	}

	// A scope with only an installation gets the placeholder repository;
	// a scope the config does not name gets none.
	if inst := ing.Samples(cfg, "bots"); len(inst) == 0 || !strings.Contains(string(inst[0].Data), placeholderRepository) {
		t.Errorf("installation-only samples: %+v", inst)
	}
	if none := ing.Samples(cfg, "elsewhere"); len(none) != 0 {
		t.Errorf("a scope the config does not name got %+v", none)
	}
}
