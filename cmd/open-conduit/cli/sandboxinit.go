package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/cliexit"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

func init() { commands = append(commands, newSandboxInitCmd) }

// newSandboxInitCmd is the first program inside an execution's sandbox
// (see package sandbox): `open-conduit sandbox-init [--bridge SOCKET] --
// COMMAND [ARG]...` bridges the sandbox's proxy port to the egress socket
// and runs the command, exiting with its status. It is hidden because only
// the sandbox runs it.
func newSandboxInitCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:                sandbox.InitCommand + " [--bridge SOCKET] -- COMMAND [ARG]...",
		Short:              "Run a command inside an execution's sandbox (started by the daemon)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			var bridge string
			if len(args) >= 2 && args[0] == "--bridge" {
				bridge, args = args[1], args[2:]
			}
			if len(args) == 0 || args[0] != "--" {
				return usagef("%s: give the command after --", sandbox.InitCommand)
			}
			code, err := sandbox.Init(bridge, args[1:])
			if err != nil {
				// Its own status (125 no proxy port, 126 not started, 127
				// not found), so that the log says why.
				fmt.Fprintf(s.Err, "open-conduit: %s: %v\n", sandbox.InitCommand, err)
				return cliexit.Silent(code)
			}
			if code != 0 {
				return cliexit.Silent(code)
			}
			return nil
		},
	}
}
