package proc

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the supervisor: the executor under test starts this
// test binary as `<binary> supervise <dir>`, exactly as the daemon starts
// `open-conduit supervise <dir>`.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "supervise" {
		code := 0
		if err := Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		// syscall.Exit, not os.Exit: under -race, os.Exit(0) waits a
		// second for the race detector's final report, which would make
		// every segment a second long. Races are still reported when they
		// happen.
		syscall.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
