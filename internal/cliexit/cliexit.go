// Package cliexit is how the commands of the two command-line programs,
// open-conduit and os, end: a command returns an error made here (Failf,
// Usagef, Silent) to choose its exit code, and Run executes the cobra
// command tree, prints the one message a failure carries, prefixed with the
// program's name, and returns the process's exit code.
//
// With RunOptions.JSON a failure is printed instead as the error envelope
// {"error":{"code","message"}} on one line, with the same exit code.
//
// It must never word a message itself beyond that prefix and the pointer
// to --help after cobra's own usage errors: what an error says, and what
// to do next, is each program's to write.
package cliexit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of both programs.
const (
	OK     = 0
	Failed = 1 // refused or failed
	Usage  = 2 // the command line itself is wrong
)

// The codes of failures a program finds itself, in the JSON envelope; a
// refusal a daemon sent keeps the daemon's code (Coded).
const (
	CodeFailed = "failed" // Failf
	CodeUsage  = "usage"  // Usagef and cobra's own usage errors
)

// exitError carries an exit code out of a command without printing twice.
type exitError struct {
	code int
	err  error
	// errCode is the stable code the JSON envelope carries.
	errCode string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Failf makes an error that exits 1 with a message for the person.
func Failf(format string, args ...any) error {
	return &exitError{code: Failed, err: fmt.Errorf(format, args...), errCode: CodeFailed}
}

// Coded makes an error that exits with exit and carries the stable code
// errCode (a daemon's refusal code, or the program's own) for the JSON
// envelope.
func Coded(exit int, errCode, format string, args ...any) error {
	return &exitError{code: exit, err: fmt.Errorf(format, args...), errCode: errCode}
}

// CodeOf returns the stable code of an error made here ("" for another).
func CodeOf(err error) string {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.errCode
	}
	return ""
}

// Usagef makes an error that exits 2: the command line itself is wrong.
func Usagef(format string, args ...any) error {
	return &exitError{code: Usage, err: fmt.Errorf(format, args...), errCode: CodeUsage}
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
	return RunWith(ctx, root, args, stderr, RunOptions{Describe: describe})
}

// RunOptions are Run's choices.
type RunOptions struct {
	// Describe words an error this package did not make (see Run).
	Describe func(error) (string, bool)
	// JSON, when set, is asked with the command that ran (the root when
	// cobra found none) whether its failure is printed as the JSON error
	// envelope instead of text.
	JSON func(*cobra.Command) bool
}

// RunWith is Run with options.
func RunWith(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer, opts RunOptions) int {
	describe := opts.Describe
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return Usagef("%v (see '%s --help')", err, c.CommandPath())
	})
	root.SetArgs(args)
	ran, err := root.ExecuteContextC(ctx)
	if err == nil {
		return OK
	}
	if ran == nil {
		ran = root
	}
	asJSON := opts.JSON != nil && opts.JSON(ran)
	name := root.Name()
	say := func(code, msg string) {
		if asJSON {
			writeEnvelope(stderr, code, msg)
			return
		}
		fmt.Fprintln(stderr, name+":", msg)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if msg := ee.err.Error(); msg != "" {
			say(ee.errCode, msg)
		}
		return ee.code
	}
	if describe != nil {
		if msg, ok := describe(err); ok {
			say(CodeFailed, msg)
			return Failed
		}
	}
	if asJSON {
		writeEnvelope(stderr, CodeUsage, fmt.Sprintf("%v (see '%s --help')", err, ran.CommandPath()))
		return Usage
	}
	fmt.Fprintln(stderr, name+":", err)
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
	return Usage
}

// writeEnvelope prints {"error":{"code","message"}} on one line; a
// message that starts with its own code (as a daemon's refusal is worded
// for text) loses that prefix.
func writeEnvelope(w io.Writer, code, msg string) {
	if code == "" {
		code = CodeFailed
	}
	msg = strings.TrimPrefix(msg, code+": ")
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{code, msg}})
	fmt.Fprintf(w, "%s\n", b)
}
