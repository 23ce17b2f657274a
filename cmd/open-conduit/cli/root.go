// Package cli holds the open-conduit commands, one file per command, each
// writing to injected streams so that tests can run them in process.
//
// It must never talk to coordination storage or the daemon's internals:
// every command but `daemon` and the offline `config check` goes through the
// public client package.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	ExitOK     = 0
	ExitFailed = 1 // refused or failed
	ExitUsage  = 2 // the command line itself is wrong
)

// Streams are the command's standard streams.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// exitError carries an exit code out of a command without printing twice.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// failf makes an error that exits 1 with a message for the person.
func failf(format string, args ...any) error {
	return &exitError{code: ExitFailed, err: fmt.Errorf(format, args...)}
}

// usagef makes an error that exits 2.
func usagef(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// silent exits with code after the command already said what it had to.
func silent(code int) error { return &exitError{code: code, err: errors.New("")} }

// NewRoot builds the command tree.
func NewRoot(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "open-conduit",
		Short:         "Run and steer the Open Conduit daemon",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	for _, hook := range rootHooks {
		hook(root)
	}
	for _, add := range commands {
		root.AddCommand(add(s))
	}
	return root
}

// rootHooks adjust the root command (persistent flags); a command file
// adds one in an init function.
var rootHooks []func(*cobra.Command)

// commands are the top-level commands; each command file adds itself in an
// init function, so that files stay independent of each other.
var commands []func(Streams) *cobra.Command

// Main runs the CLI with args and returns the process exit code.
func Main(ctx context.Context, args []string, s Streams) int {
	root := NewRoot(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if msg := ee.err.Error(); msg != "" {
			fmt.Fprintln(s.Err, "open-conduit:", msg)
		}
		return ee.code
	}
	// Cobra's own errors (unknown command, wrong argument count) are usage
	// errors.
	fmt.Fprintln(s.Err, "open-conduit:", err)
	fmt.Fprintln(s.Err, "Run 'open-conduit --help' for usage.")
	return ExitUsage
}
