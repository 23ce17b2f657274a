package cli

import (
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// TestConfigSetCommand: config set changes one member through the daemon
// and says which generation it made; a wrong command line exits 2, a
// stale generation, a pointer that cannot be set and a value that does not
// validate exit 1 and echo no value.
func TestConfigSetCommand(t *testing.T) {
	serveStack(t)
	mustRun(t, 2, "config", "set", "/scopes/team/authorization/reads")
	if out := mustRun(t, 2, "config", "set", "/scopes/team/authorization/reads", "[work"); !strings.Contains(out, "not JSON") {
		t.Errorf("a value that is not JSON said %q", out)
	}
	if out := mustRun(t, 1, "config", "set", "/scopes/team/authorization/reads", `["work"]`, "--expected-generation", "4"); !strings.Contains(out, "no longer generation 4") {
		t.Errorf("a stale set said %q", out)
	}
	if out := mustRun(t, 2, "config", "set", "/scopes/nobody/authorization/reads", `["OC_VALUE_CANARY"]`); !strings.Contains(out, "/scopes/nobody does not exist") || strings.Contains(out, "OC_VALUE_CANARY") {
		t.Errorf("a set under a missing scope said %q", out)
	}
	if out := mustRun(t, 1, "config", "set", "/scopes/team/authorization/reads", `["OC_VALUE_CANARY"]`); !strings.Contains(out, "was not changed") || strings.Contains(out, "OC_VALUE_CANARY") {
		t.Errorf("an invalid set said %q", out)
	}
	if out := mustRun(t, 0, "config", "set", "/scopes/team/authorization/reads", `["work", "events"]`); !strings.Contains(out, "Set /scopes/team/authorization/reads: generation 2 (was 1), hash ") {
		t.Errorf("set said %q", out)
	}
	if out := mustRun(t, 0, "config", "get"); strings.Contains(out, mgmttest.CanaryReference) {
		t.Errorf("config get shows the secret reference: %q", out)
	}
}
