package daemon

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/statedir"
)

// A state directory too deep for its management socket is refused before
// anything is created: no directory, no lock, no database.
func TestTooLongStateDirectoryCreatesNothing(t *testing.T) {
	base := t.TempDir()
	state := filepath.Join(base, "a", strings.Repeat("d", statedir.MaxSocketPath))
	_, err := New(context.Background(), options(t, state, io.Discard))
	if err == nil || !strings.Contains(err.Error(), "longer than") || !strings.Contains(err.Error(), "--state") {
		t.Fatalf("New on a too-long state directory: %v, want the socket path refused", err)
	}
	left, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("a refused start left %v behind in %s", left, base)
	}
}
