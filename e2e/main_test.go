// Package e2e holds the end-to-end tests: they build the real open-conduit
// and os binaries once, start the real daemon as a child process on a
// temporary state directory, and drive it only through the CLI binary and
// the public client package, as an operator would.
//
// The tests must never reach into the daemon's internals, never wait on a
// timer for something to happen (they poll for a real event, with a
// generous bound as a failure guard), and always clean up every daemon and
// process they started, even when they fail.
package e2e

import (
	"fmt"
	"go.uber.org/goleak"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// bins holds the binaries TestMain built.
var bins struct {
	dir         string
	openConduit string
	os          string
	testDaemon  string // the real daemon with a test extension (testdaemon)
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "oce2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins.dir = dir
	bins.openConduit = filepath.Join(dir, "open-conduit")
	bins.os = filepath.Join(dir, "os")
	bins.testDaemon = filepath.Join(dir, "testdaemon")
	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The binaries are built without -race: only the test process runs
	// with it, which keeps the suite fast.
	for pkg, out := range map[string]string{"./cmd/open-conduit": bins.openConduit, "./cmd/os": bins.os, "./e2e/testdaemon": bins.testDaemon} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, b)
			return 1
		}
	}
	// The cluster tests' PostgreSQL (started on first use) stops here.
	code := pgtest.Wrap(m).Run()
	if code == 0 {
		// No test may leave a goroutine running in the test process.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}
