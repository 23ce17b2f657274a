package toolbelt_test

import (
	"testing"

	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

func TestToolbeltConformance(t *testing.T) {
	toolbelttest.Exercise(t, toolbelttest.Real)
}

// TestToolbeltNegativeControls runs each case against the control that
// breaks its rule: the case must fail, so it cannot pass vacuously.
func TestToolbeltNegativeControls(t *testing.T) {
	controls := toolbelttest.NegativeControls(toolbelttest.Real)
	for _, c := range toolbelttest.Cases() {
		h, ok := controls[c.Name]
		if !ok {
			t.Errorf("case %s has no negative control", c.Name)
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			err := toolbelttest.RunCase(t.TempDir(), h, c, false)
			if err == nil {
				t.Fatalf("case %s passed against %s; it must fail", c.Name, h.Name)
			}
			t.Logf("%s fails as it must: %v", h.Name, err)
		})
	}
}
