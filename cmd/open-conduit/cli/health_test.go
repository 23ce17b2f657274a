package cli

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// health shows the daemon's state; --wait-ready asks again until the
// daemon says ready, and gives up (exit 1) when it stays starting.
func TestHealthWaitReady(t *testing.T) {
	var asked atomic.Int32
	serve(t, mgmttest.Options{Ready: func() bool { return asked.Add(1) > 3 }})
	code, out, errs := run(t, "health")
	if code != 0 || !strings.Contains(out, "starting") {
		t.Fatalf("health while starting: %d %q %q", code, out, errs)
	}
	code, out, errs = run(t, "health", "--wait-ready", "30s")
	if code != 0 || !strings.Contains(out, "ready") || asked.Load() != 4 {
		t.Fatalf("health --wait-ready: %d %q %q after %d answers, want ready on the fourth", code, out, errs, asked.Load())
	}
}

func TestHealthWaitReadyGivesUp(t *testing.T) {
	serve(t, mgmttest.Options{Ready: func() bool { return false }})
	code, _, errs := run(t, "health", "--wait-ready", "1ms")
	if code != 1 || !strings.Contains(errs, "still starting") {
		t.Fatalf("health --wait-ready on a daemon that stays starting: %d %q", code, errs)
	}
}
