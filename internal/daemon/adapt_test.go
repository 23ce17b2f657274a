package daemon

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// The kernel's causal default is the configuration's: an embedder or test
// that passes zero limits gets what an operator who sets none gets.
func TestKernelCausalDefaultIsTheConfigurations(t *testing.T) {
	if got := causalOf(config.DefaultLimits()); got != kernel.DefaultCausalLimits {
		t.Fatalf("the configuration's default causal limits %+v, the kernel's %+v: they must agree", got, kernel.DefaultCausalLimits)
	}
}

// activeOnly is a configuration source that only has an active snapshot.
type activeOnly struct{ snap *config.Snapshot }

func (a *activeOnly) Active() *config.Snapshot { return a.snap }
func (a *activeOnly) Snapshot(context.Context, int64) (*config.Snapshot, error) {
	return a.snap, nil
}
func (a *activeOnly) OnApply(func(*config.Snapshot)) {}

// The toolbelt's emit rule is the active snapshot's authorization.emit,
// read on every call: an apply that narrows it applies to the next one.
func TestEmitAllowedFollowsTheActiveConfiguration(t *testing.T) {
	validate := func(emit string) *config.Snapshot {
		t.Helper()
		doc := `{"version": 1, "scopes": {"team": {"authorization": {"operations": ["emit"]` + emit + `}}}}`
		snap, res := config.Validate([]byte(doc), config.NewRegistry())
		if !res.Valid() {
			t.Fatalf("invalid: %v", res.Diagnostics)
		}
		return snap
	}
	src := &activeOnly{snap: validate("")}
	allowed := emitAllowed(src)
	if !allowed("team", "b", "deploy.done") || !allowed("team", "b", "ci.passed") {
		t.Fatal("without authorization.emit every family is allowed")
	}
	src.snap = validate(`, "emit": ["deploy"]`)
	if !allowed("team", "b", "deploy.done") || allowed("team", "b", "ci.passed") || allowed("elsewhere", "b", "deploy.done") {
		t.Fatal("the narrowed rule is not the one applied")
	}
}
