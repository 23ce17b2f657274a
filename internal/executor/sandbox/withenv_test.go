package sandbox

import (
	"slices"
	"testing"
)

// WithEnv keeps what the command was given but what the sandbox sets, and
// sets that.
func TestWithEnv(t *testing.T) {
	got := WithEnv([]string{"PATH=/bin", "HTTPS_PROXY=http://elsewhere", "HOME=/root"}, map[string]string{"HTTPS_PROXY": ProxyURL, "HOME": "/tmp"})
	if want := []string{"HOME=/tmp", "HTTPS_PROXY=" + ProxyURL, "PATH=/bin"}; !slices.Equal(got, want) {
		t.Fatalf("WithEnv = %q, want %q", got, want)
	}
}
