package config

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/reaper"
)

// TestMain lets the test binary stand in for `open-conduit reap`, under
// which the reaper tests run cmd: secrets, and fails the package's tests
// when any of them leaves a goroutine running.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "reap" && os.Args[2] == "--" {
		code, err := reaper.Run(os.Args[3:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		// syscall.Exit: under -race os.Exit waits for the race report.
		syscall.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
