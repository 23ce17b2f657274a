// Package cli holds the open-conduit commands, one file per command, each
// writing to injected streams so that tests can run them in process.
//
// It must never talk to coordination storage or the daemon's internals:
// every command but `daemon`, the offline `config check` and `doctor`
// (which reads the state directory itself) goes through the public client
// package.
package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/cliexit"
)

// Exit codes shared by every command.
const (
	ExitOK     = cliexit.OK
	ExitFailed = cliexit.Failed // refused or failed
	ExitUsage  = cliexit.Usage  // the command line itself is wrong
)

// Streams are the command's standard streams.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// failf makes an error that exits 1 with a message for the person.
func failf(format string, args ...any) error { return cliexit.Failf(format, args...) }

// usagef makes an error that exits 2.
func usagef(format string, args ...any) error { return cliexit.Usagef(format, args...) }

// silent exits with code after the command already said what it had to.
func silent(code int) error { return cliexit.Silent(code) }

// NewRoot builds the command tree.
func NewRoot(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "open-conduit",
		Short: "Run and steer the Open Conduit daemon",
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	for _, hook := range rootHooks {
		hook(root)
	}
	for _, add := range commands {
		root.AddCommand(add(s))
	}
	finishTree(root)
	return root
}

// rootHooks adjust the root command (persistent flags); a command file
// adds one in an init function.
var rootHooks []func(*cobra.Command)

// commands are the top-level commands; each command file adds itself in an
// init function, so that files stay independent of each other.
var commands []func(Streams) *cobra.Command

// Main runs the CLI with args and returns the process exit code; every
// failure prints one message after "open-conduit: " (see cliexit.Run), or,
// when the command was asked for JSON (--json, -o json), the error
// envelope {"error":{"code","message"}} on the error stream.
func Main(ctx context.Context, args []string, s Streams) int {
	return cliexit.RunWith(ctx, NewRoot(s), args, s.Err, cliexit.RunOptions{JSON: wantJSON})
}
