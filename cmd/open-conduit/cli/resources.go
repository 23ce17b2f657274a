package cli

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// Shared pieces of the resource commands (work, events, executions,
// waits, artifacts, scopes, emit, config get|validate|apply, toolbelt).

// keyFlag adds --idempotency-key to a command that changes something.
func keyFlag(cmd *cobra.Command, key *string) {
	cmd.Flags().StringVar(key, "idempotency-key", "", "send this Idempotency-Key (reuse it to retry after a lost response); default: a fresh key for each run")
}

func keyOpts(key string) *client.RequestOptions { return &client.RequestOptions{IdempotencyKey: key} }

// oneArg checks that a command got exactly one argument, naming it.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usagef("%s takes exactly one %s (see '%s --help')", cmd.CommandPath(), what, cmd.CommandPath())
		}
		return nil
	}
}

// noArgs refuses arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) != 0 {
		return usagef("%s takes no arguments (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

// subcommandNeeded is the RunE of a command group.
func subcommandNeeded(names string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		return usagef("name a subcommand: %s (see '%s --help')", names, cmd.CommandPath())
	}
}

// jsonObject reads a JSON object given as the JSON itself, @FILE, or - for
// standard input.
func jsonObject(s Streams, flag, v string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	var b []byte
	var err error
	switch {
	case v == "-":
		b, err = io.ReadAll(io.LimitReader(s.In, 1<<20+1))
	case strings.HasPrefix(v, "@"):
		b, err = os.ReadFile(v[1:])
	default:
		b = []byte(v)
	}
	if err != nil {
		return nil, failf("cannot read %s: %v", flag, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, usagef("%s must be a JSON object, such as '{\"key\":\"value\"}' (or @FILE, or - for standard input)", flag)
	}
	return b, nil
}

// readDocument reads a configuration file for validate and apply.
func readDocument(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, failf("cannot read the configuration file %s: %v", path, err)
	}
	return b, nil
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func joinOr(list []string, dflt string) string {
	if len(list) == 0 {
		return dflt
	}
	return strings.Join(list, ", ")
}
