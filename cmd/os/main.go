// Command os is the program an Open Conduit execution runs to reach its
// toolbelt: call, emit, wait, outcome, guidance, mcp and git-credential. It
// reads OS_ENDPOINT and OS_TOKEN_FILE. The commands live in package oscli.
//
// It must never print, log or pass on the token it reads.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/open-conduit/open-conduit/cmd/os/oscli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := oscli.Main(ctx, os.Args[1:], oscli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
