package codex

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/executor/proc"
)

// TestMain doubles as the supervisor: the executor under test starts this
// test binary as `<binary> supervise <dir>`, as the daemon starts
// `open-conduit supervise <dir>`.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "supervise" {
		code := 0
		if err := proc.Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		syscall.Exit(code) // not os.Exit: see the shell executor's TestMain
	}
	goleak.VerifyTestMain(m)
}
