// Command open-conduit is the operator's CLI and, as `open-conduit daemon`,
// the daemon itself. The commands live in package cli.
//
// Invoked under the name os (the daemon copies this binary to <state>/bin/os
// and puts that directory first on every execution's PATH), it is
// the in-execution CLI, package oscli, so that one binary is all a
// `go run ./cmd/open-conduit daemon` needs.
//
// It must never hold logic of its own: it picks the command tree by its
// name and hands it the process's streams, signals and exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/open-conduit/open-conduit/cmd/open-conduit/cli"
	"github.com/open-conduit/open-conduit/cmd/os/oscli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt)
	var code int
	if filepath.Base(os.Args[0]) == "os" {
		code = oscli.Main(ctx, os.Args[1:], oscli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	} else {
		code = cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	}
	stop()
	if code != 0 {
		select {
		case <-interrupted:
			// A command cut short by Ctrl-C exits as a shell reports an
			// interrupted program; one that finished its work (the daemon's
			// graceful stop) keeps its own status.
			code = 128 + int(syscall.SIGINT)
		default:
		}
	}
	os.Exit(code)
}
