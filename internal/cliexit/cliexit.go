// Package cliexit is how the commands of the two command-line programs,
// open-conduit and os, end: a command returns an error made here (Failf,
// Usagef, Silent) to choose its exit code, and Run executes the cobra
// command tree, prints the one message a failure carries, prefixed with the
// program's name, and returns the process's exit code.
//
// It must never word a message itself beyond that prefix and the pointer
// to --help after cobra's own usage errors: what an error says, and what
// to do next, is each program's to write.
package cliexit

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit codes of both programs.
const (
	OK     = 0
	Failed = 1 // refused or failed
	Usage  = 2 // the command line itself is wrong
)

// exitError carries an exit code out of a command without printing twice.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Failf makes an error that exits 1 with a message for the person.
func Failf(format string, args ...any) error {
	return &exitError{code: Failed, err: fmt.Errorf(format, args...)}
}

// Usagef makes an error that exits 2: the command line itself is wrong.
func Usagef(format string, args ...any) error {
	return &exitError{code: Usage, err: fmt.Errorf(format, args...)}
}

// Silent exits with code after the command already said what it had to.
func Silent(code int) error { return &exitError{code: code, err: errors.New("")} }

// Run executes root with args and returns the exit code. It is the one
// place a failure is printed: cobra prints neither usage nor errors, and a
// bad flag is a usage error that points at the command's --help.
//
// An error made by this package prints its message (none for Silent) after
// "<name>: ", where name is root's, and exits with its code. Any other
// error goes to describe, when given: a message it returns is printed the
// same way and exits 1. What remains is cobra's own (an unknown command, a
// wrong argument count): a usage error, printed with a pointer to --help.
func Run(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer, describe func(error) (string, bool)) int {
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return Usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return OK
	}
	name := root.Name()
	var ee *exitError
	if errors.As(err, &ee) {
		if msg := ee.err.Error(); msg != "" {
			fmt.Fprintln(stderr, name+":", msg)
		}
		return ee.code
	}
	if describe != nil {
		if msg, ok := describe(err); ok {
			fmt.Fprintln(stderr, name+":", msg)
			return Failed
		}
	}
	fmt.Fprintln(stderr, name+":", err)
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	return Usage
}
