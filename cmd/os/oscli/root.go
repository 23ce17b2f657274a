// Package oscli holds the os commands, the only program an execution needs
// to reach its toolbelt: call, emit, wait, outcome, guidance, an MCP server
// (mcp) and a git credential helper (git-credential). One file per command;
// each writes to injected streams so tests run them in process. The wire
// protocol is docs/toolbelt.md, spoken through package osclient.
//
// It must never print, log or pass on a command line the execution's
// token, and never talk to anything but the socket OS_ENDPOINT names.
package oscli

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/open-conduit/open-conduit/internal/cliexit"
	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

// Exit codes.
const (
	ExitOK     = cliexit.OK
	ExitFailed = cliexit.Failed // refused or failed
	ExitUsage  = cliexit.Usage  // the command line itself is wrong
)

// Streams are the command's standard streams and environment.
type Streams struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Getenv reads the environment (OS_ENDPOINT, OS_TOKEN_FILE); os.Getenv
	// when nil.
	Getenv func(string) string
}

func (s Streams) getenv(k string) string {
	if s.Getenv == nil {
		return os.Getenv(k)
	}
	return s.Getenv(k)
}

// usagef makes an error that exits 2.
func usagef(format string, args ...any) error { return cliexit.Usagef(format, args...) }

// NewRoot builds the command tree.
func NewRoot(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "os",
		Short: "Reach this execution's Open Conduit toolbelt",
		Long: `os calls the toolbelt of the Open Conduit execution it runs in, on the
socket OS_ENDPOINT names, with the token in OS_TOKEN_FILE (re-read on every
call, since the host rotates it). Exit status: 0 ok, 1 refused or failed,
2 usage.`,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.AddCommand(
		newCallCmd(s),
		newEmitCmd(s),
		newWaitCmd(s),
		newOutcomeCmd(s),
		newGuidanceCmd(s),
		newMCPCmd(s),
		newGitCredentialCmd(s),
	)
	return root
}

// Main runs the CLI with args and returns the process exit code; every
// failure prints one message after "os: " (see cliexit.Run).
func Main(ctx context.Context, args []string, s Streams) int {
	if s.In == nil {
		s.In = os.Stdin
	}
	if s.Out == nil {
		s.Out = os.Stdout
	}
	if s.Err == nil {
		s.Err = os.Stderr
	}
	return cliexit.Run(ctx, NewRoot(s), args, s.Err, failure)
}

// failure words the errors the commands return as they come, both exit 1:
// a toolbelt refusal or transport failure, and an interrupted call.
func failure(err error) (string, bool) {
	var oe *osclient.Error
	if errors.As(err, &oe) {
		return describe(oe), true
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted; if the call may have landed, repeat it with the same --request-id to learn its result", true
	}
	return "", false
}

// describe renders a toolbelt refusal or transport failure: its code, its
// message and what to do next.
func describe(e *osclient.Error) string {
	msg := e.Error()
	if hint := nextStep(e); hint != "" {
		msg += "\n" + hint
	}
	return msg
}

// nextStep says what to do about an error, by code.
func nextStep(e *osclient.Error) string {
	switch e.Code {
	case osclient.CodeAuthorityReleased:
		return "This run already declared a wait or an outcome, and that declaration landed. It may not call the toolbelt again: exit now, and the host resumes or finishes the Work."
	case osclient.CodeForbidden:
		return "This execution's token does not allow the call, or its attempt is no longer the live one. Run 'os guidance' to see the operations it may call; repeating the same call will not help."
	case osclient.CodeUnauthorized:
		return "The token in OS_TOKEN_FILE was not accepted. The host rotates it on every resume and revokes it when the attempt ends; if this run is still live, retry once with the same --request-id."
	case osclient.CodeWrongCredentialClass:
		return "OS_ENDPOINT leads to a socket that does not take execution tokens (the daemon's management socket?). Point it at the execution's own toolbelt.sock, as the host sets it."
	case osclient.CodeNotFound:
		return "The toolbelt has no such route or thing. Run 'os guidance' to see the operations this execution may call."
	case osclient.CodeRequestConflict:
		return "This request ID was already used with a different body. Repeat the original body to get its result again, or use a new --request-id for a new request."
	case osclient.CodeInvalidRequest:
		return "Fix the request; 'os guidance' shows each operation's input schema."
	case osclient.CodeEnvironmentUnset:
		return "os runs inside an Open Conduit execution whose executor uses the toolbelt; the host sets both for it."
	case osclient.CodeTokenUnavailable:
		return "The host writes the token there before the run starts and replaces it on every resume; if the file is gone, the attempt has ended."
	case osclient.CodeEndpointUnreachable:
		return "The daemon may be restarting, or this attempt has ended. Retry shortly with the same --request-id, so a call that did land is replayed instead of repeated."
	case osclient.CodeBadResponse:
		return "OS_ENDPOINT may not lead to an Open Conduit toolbelt, or this os is older than the daemon; use the os binary from the host's toolbelt directory."
	}
	if e.Status == 422 {
		return "The operation refused the request; its message says why."
	}
	return ""
}

// args checks a command's positional arguments: exactly n, named what.
func args(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) == n {
			return nil
		}
		if n == 0 {
			return usagef("%s takes no arguments (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())
		}
		return usagef("%s needs %s (see '%s --help')", cmd.CommandPath(), what, cmd.CommandPath())
	}
}

// client returns the toolbelt client the environment configures.
func client(s Streams) (*osclient.Client, error) {
	return osclient.FromEnv(s.getenv)
}
