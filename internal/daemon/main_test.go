package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/cmd/os/oscli"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
	"github.com/open-conduit/open-conduit/internal/reaper"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// TestMain lets the test binary stand in for the open-conduit binary, as
// the daemon uses it: `<binary> supervise <dir>` is the shell executor's
// supervisor, `<binary> reap -- <command>` runs a cmd: secret, and the
// binary invoked as os (through <state>/bin/os) is the in-execution CLI.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "os" {
		syscall.Exit(oscli.Main(context.Background(), os.Args[1:], oscli.Streams{}))
	}
	if len(os.Args) == 3 && os.Args[1] == "supervise" {
		code := 0
		if err := shell.Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		// syscall.Exit: under -race os.Exit waits for the race report.
		syscall.Exit(code)
	}
	if len(os.Args) > 2 && os.Args[1] == "reap" && os.Args[2] == "--" {
		code, err := reaper.Run(os.Args[3:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		syscall.Exit(code)
	}
	// The PostgreSQL tests' cluster is stopped before the leak check.
	goleak.VerifyTestMain(pgtest.Wrap(m))
}
