package toolbeltint_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/scheduler/toolbeltint"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestToolbeltConformanceScheduled runs every toolbelt conformance case,
// shared and scheduled, on attempts the real scheduler claims, recovers,
// adopts, resumes and completes, on a persistent SQLite file and across
// reopens of it.
func TestToolbeltConformanceScheduled(t *testing.T) {
	if !toolbeltint.Harness.Scheduled() {
		t.Fatal("the harness runs no scheduler")
	}
	toolbelttest.Exercise(t, toolbeltint.Harness)
}

// TestToolbeltNegativeControlsScheduled runs each case against the control
// that breaks its rule, on the same scheduled harness: the case must fail,
// so it cannot pass vacuously.
func TestToolbeltNegativeControlsScheduled(t *testing.T) {
	controls := toolbelttest.NegativeControls(toolbeltint.Harness)
	for _, c := range toolbelttest.CasesFor(toolbeltint.Harness) {
		h, ok := controls[c.Name]
		if !ok {
			t.Errorf("case %s has no negative control", c.Name)
			continue
		}
		mustFail(t, c, h)
	}
}

// TestToolbeltScheduledNegativeControls runs the shared cases against the
// controls only their scheduled part catches (what Complete applied).
func TestToolbeltScheduledNegativeControls(t *testing.T) {
	controls := toolbelttest.ScheduledNegativeControls(toolbeltint.Harness)
	if len(controls) == 0 {
		t.Fatal("no scheduled controls")
	}
	for _, c := range toolbelttest.Cases() {
		if h, ok := controls[c.Name]; ok {
			mustFail(t, c, h)
			delete(controls, c.Name)
		}
	}
	for name := range controls {
		t.Errorf("a scheduled control names %s, which is no shared case", name)
	}
}

func mustFail(t *testing.T, c toolbelttest.Case, h toolbelttest.Harness) {
	t.Helper()
	t.Run(c.Name, func(t *testing.T) {
		if !h.Scheduled() {
			t.Fatalf("control %s lost the scheduled driver", h.Name)
		}
		err := toolbelttest.RunCase(t.TempDir(), h, c, false)
		if err == nil {
			t.Fatalf("case %s passed against %s; it must fail", c.Name, h.Name)
		}
		t.Logf("%s fails as it must: %v", h.Name, err)
	})
}
