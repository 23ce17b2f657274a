package storagetest

import (
	"strings"
	"testing"
)

// TestEveryCaseNamesAControl checks the registry without an engine: every
// case has a name, an area, a body and a negative control that says what
// it breaks, and no two cases share a name. CheckNegativeControls, run by
// each engine's tests, proves every case fails its control.
func TestEveryCaseNamesAControl(t *testing.T) {
	cases := Cases()
	if len(cases) == 0 {
		t.Fatal("the registry is empty")
	}
	seen := map[string]bool{}
	areas := map[string]int{}
	for _, c := range cases {
		switch {
		case c.Name == "" || strings.ContainsAny(c.Name, " /"):
			t.Errorf("case %q has no usable name", c.Name)
		case seen[c.Name]:
			t.Errorf("two cases are named %s", c.Name)
		case c.Area == "" || c.Run == nil:
			t.Errorf("case %s has no area or no body", c.Name)
		case c.Control.Name == "" || c.Control.New == nil || c.Control.Breaks == "":
			t.Errorf("case %s has no negative control", c.Name)
		case c.Control.New() == nil:
			t.Errorf("the control of case %s makes no wrapper", c.Name)
		}
		seen[c.Name] = true
		areas[c.Area]++
	}
	for _, a := range []string{"events", "work", "executions", "waits", "tokens", "replay", "calls", "operators", "idempotency", "generations", "cursorkey", "artifacts", "approvals", "egress", "duties"} {
		if areas[a] == 0 {
			t.Errorf("area %s has no case", a)
		}
	}
	t.Logf("%d cases in %d areas", len(cases), len(areas))
}
