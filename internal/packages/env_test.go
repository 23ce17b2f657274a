package packages

import (
	"slices"
	"testing"
)

// The environment is the inherited variables and the manifest's, never
// the rest of the daemon's; the manifest's win.
func TestProcessEnv(t *testing.T) {
	got := ProcessEnv([]string{"PATH=/bin", "OPEN_CONDUIT_TEST_SECRETISH=x", "HOME=/h"}, Run{Env: map[string]string{"HOME": "/pkg", "A": "1"}})
	if want := []string{"PATH=/bin", "HOME=/pkg", "A=1"}; !slices.Equal(got, want) {
		t.Fatalf("ProcessEnv %q, want %q", got, want)
	}
}
