package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newExecutionsCmd, newExecutionCmd) }

func newExecutionsCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "executions",
		Short: "List, show and cancel executions (the attempts of Work)",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("list, get ID, cancel ID, logs ID, egress ID"),
	}
	cmd.AddCommand(newExecutionsListCmd(s), newExecutionsGetCmd(s), newExecutionCancelCmd(s), newExecutionsEgressCmd(s),
		newLogCmd(s, "logs EXECUTION [-f] [--tail N]", "Write one execution's log, following it while it runs", "execution ID", false))
	return cmd
}

func newExecutionsListCmd(s Streams) *cobra.Command {
	var f client.ExecutionFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list [--work W] [--scope S] [--state STATE]",
		Short: "List executions, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Execution], error) {
				f.Page = lf.page()
				return c.ListExecutions(ctx, f)
			}, []string{"ID", "WORK", "SCOPE", "STATE", "RESULT", "EXIT", "EPOCH", "CREATED"}, func(e client.Execution) []string {
				return []string{e.ID, e.Work, e.Scope, e.State, or(e.Result, "-"), exitCode(e), itoa(e.Epoch), when(e.CreatedAt)}
			}, listExtra[client.Execution]{[]string{"BINDING", "EXECUTOR", "GENERATION", "DEADLINE", "UPDATED"}, func(e client.Execution) []string {
				return []string{e.Binding, e.Executor, itoa(e.Generation), when(e.Deadline), when(e.UpdatedAt)}
			}, func(e client.Execution) time.Time { return e.CreatedAt }, nil})
		},
	}
	cmd.Flags().StringVar(&f.Work, "work", "", "only the attempts of this Work")
	cmd.Flags().StringVar(&f.Scope, "scope", "", "only executions of this scope")
	cmd.Flags().StringVar(&f.State, "state", "", "only executions in this state: running, parked, stopping or finished")
	lf.addMain(cmd)
	return cmd
}

func newExecutionsGetCmd(s Streams) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   "get ID",
		Short: "Show one execution",
		Args:  oneArg("execution ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			e, err := c.GetExecution(cmd.Context(), args[0], nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if done, err := printAs(cmd, s.Out, e.Raw, e.ID); done {
				return err
			}
			rows := [][]string{
				{"execution", e.ID}, {"work", e.Work}, {"scope", e.Scope}, {"binding", e.Binding}, {"executor", e.Executor},
				{"generation", itoa(e.Generation)}, {"epoch", itoa(e.Epoch)}, {"state", e.State}, {"result", or(e.Result, "-")},
			}
			if e.State == "finished" || e.ExitCode != nil {
				rows = append(rows, []string{"exit code", exitCode(*e)})
			}
			if e.Message != "" {
				rows = append(rows, []string{"message", e.Message})
			}
			rows = append(rows, agentRows(*e)...)
			rows = append(rows, []string{"owner", e.Owner}, []string{"lease expires", when(e.LeaseExpiresAt)},
				[]string{"deadline", when(e.Deadline)}, []string{"created", when(e.CreatedAt)}, []string{"updated", when(e.UpdatedAt)})
			return printLines(s.Out, rows)
		},
	})
}

// exitCode shows the exit code the daemon observed, or "-" when it
// observed none (a stop it confirmed on its own, a lost segment, an
// executor error, an attempt that never started).
func exitCode(e client.Execution) string {
	if e.ExitCode == nil {
		return "-"
	}
	return itoa(int64(*e.ExitCode))
}

// agentRows show an agent execution's session and usage, when it has
// them.
func agentRows(e client.Execution) [][]string {
	var rows [][]string
	if e.Session != "" {
		rows = append(rows, []string{"session", e.Session})
	}
	if u := e.Usage; u != nil {
		rows = append(rows,
			[]string{"tokens", fmt.Sprintf("%d input, %d output, %d cache read, %d cache creation", u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens)},
			[]string{"turns", itoa(u.Turns)},
			[]string{"cost", strconv.FormatFloat(u.CostUSD, 'f', 4, 64) + " USD (the agent's estimate)"})
	}
	return rows
}

// newExecutionCmd is `open-conduit execution cancel ID`, kept as an alias
// of `executions cancel`.
func newExecutionCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "execution",
		Short: "Cancel one execution (as executions cancel)",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("cancel ID"),
	}
	cmd.AddCommand(newExecutionCancelCmd(s))
	return cmd
}

// newExecutionCancelCmd is the cancel of executions and execution.
func newExecutionCancelCmd(s Streams) *cobra.Command {
	return controlCmd(s, "cancel ID [--reason R]", "Stop one attempt and hold its Work until a retry",
		`Cancel one execution: its attempt is fenced (the daemon stops the process)
and its Work is held (operator_cancelled) until 'open-conduit work retry'
starts a new attempt.`, "execution ID",
		func(c *client.Client, ctx context.Context, id, reason string, opts *client.RequestOptions) (*client.Controlled, error) {
			return c.CancelExecution(ctx, id, reason, opts)
		},
		func(r *client.Controlled) string {
			if r.Execution == nil {
				return fmt.Sprintf("Work %s is held until: open-conduit work retry %s", r.Work.ID, r.Work.ID)
			}
			return fmt.Sprintf("Execution %s is %s; Work %s is held until: open-conduit work retry %s", r.Execution.ID, r.Execution.State, r.Work.ID, r.Work.ID)
		})
}
