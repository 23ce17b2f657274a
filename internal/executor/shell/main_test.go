package shell

import (
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

// dial connects to addr, says ping, and prints what comes back; 3 when it
// cannot connect.
func dial(addr string) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Println("dial-refused")
		return 3
	}
	defer c.Close()
	io.WriteString(c, "ping\n")
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	fmt.Printf("dial-got:%s", b)
	return 0
}

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
	// Inside a sandbox the test binary, mounted as the os binary, is also
	// sandbox-init and a small TCP client (dial ADDR).
	if len(os.Args) >= 2 && os.Args[1] == sandbox.InitCommand {
		args, bridge := os.Args[2:], ""
		if len(args) >= 2 && args[0] == "--bridge" {
			bridge, args = args[1], args[2:]
		}
		code, err := sandbox.Init(bridge, args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		syscall.Exit(code)
	}
	if len(os.Args) == 3 && os.Args[1] == "dial" {
		syscall.Exit(dial(os.Args[2]))
	}
	goleak.VerifyTestMain(m)
}
