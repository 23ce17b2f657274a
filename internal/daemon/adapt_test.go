package daemon

import (
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
