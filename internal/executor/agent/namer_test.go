package agent

import "testing"

func TestNamerNamesTheConfigsPlaybook(t *testing.T) {
	n := Namer{Spec: testSpec}
	if got := n.PlaybookName([]byte(`{"model": "m", "prompt": "p", "playbook": "answer-issue"}`)); got != "answer-issue" {
		t.Errorf("PlaybookName = %q", got)
	}
	if got := n.PlaybookName([]byte(`{"model": "m", "playbook": "answer-issue"}`)); got != "" {
		t.Errorf("PlaybookName of a config that does not parse = %q, want none", got)
	}
}
