package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// The run history (runs list|get|table|log) and the log commands (work
// logs, executions logs).

func init() { commands = append(commands, newRunsCmd) }

func newRunsCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "The run history: every attempt across Work, newest first",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("list, get ID, table, log ID"),
	}
	cmd.AddCommand(newRunsListCmd(s, false), newRunsListCmd(s, true), newRunsGetCmd(s),
		newLogCmd(s, "log EXECUTION [-f] [--tail N]", "Write one attempt's log (as executions logs does)", "execution ID", false))
	return cmd
}

// runFlags are the filters of runs list and runs table.
type runFlags struct {
	f     client.RunFilter
	since string
	lf    listFlags
}

func (rf *runFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&rf.f.Scope, "scope", "", "only attempts in this scope")
	cmd.Flags().StringVar(&rf.f.Binding, "binding", "", "only attempts of this binding")
	cmd.Flags().StringVar(&rf.f.Work, "work", "", "only the attempts of this Work")
	cmd.Flags().StringVar(&rf.f.State, "state", "", "only attempts in this state (running, parked, stopping, finished) or with this result (succeeded, failed, cancelled, lost)")
	cmd.Flags().StringVar(&rf.since, "since", "", "only attempts started since then: a duration back from now (90m, 24h) or a time (2026-01-02T15:04:05Z)")
	rf.lf.add(cmd)
	addWatchFlag(cmd)
}

// runVersion is what --watch compares of a run: all but its duration,
// which the daemon counts again at each read while the attempt runs.
func runVersion(r client.Run) string {
	r.DurationMS = 0
	b, _ := json.Marshal(r)
	return string(b)
}

// filter is the filter the flags say, with --since read against now.
func (rf *runFlags) filter(now time.Time) (client.RunFilter, error) {
	f := rf.f
	f.Page = rf.lf.page()
	if rf.since != "" {
		if d, err := time.ParseDuration(rf.since); err == nil && d > 0 {
			f.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, rf.since); err == nil {
			f.Since = t
		} else {
			return f, usagef("--since must be a duration back from now (90m, 24h) or a time in RFC 3339 form (2026-01-02T15:04:05Z)")
		}
	}
	return f, nil
}

func newRunsListCmd(s Streams, wide bool) *cobra.Command {
	var rf runFlags
	use, short, long := "list [--scope S] [--binding B] [--state STATE] [--since 24h]", "List attempts across Work, newest first",
		`List attempts (executions) across every Work, newest first: one row per
attempt with its Work, binding, the Event that started the Work, its result,
exit status and duration.

Examples:
  open-conduit runs list
  open-conduit runs list --state failed --since 24h
  open-conduit runs list --scope ops --binding nightly --limit 10`
	if wide {
		use, short, long = "table [--scope S] [--binding B] [--state STATE] [--since 24h]", "List attempts in a wide table for a terminal",
			`List attempts across every Work, newest first, in a wide table: every
column runs list has, and the scope, executor, trigger Event type, usage,
start time and the Work's outcome.

Examples:
  open-conduit runs table --since 2h
  open-conduit runs table --state running`
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := rf.filter(time.Now())
			if err != nil {
				return err
			}
			fetch := func(c *client.Client, ctx context.Context) (*client.List[client.Run], error) {
				return c.ListRuns(ctx, f)
			}
			extra := listExtra[client.Run]{version: runVersion}
			if wide {
				return runListWide(cmd, s, fetch, []string{"EXECUTION", "WORK", "SCOPE", "BINDING", "EXECUTOR", "TRIGGER", "TRIGGER TYPE", "STATE", "RESULT", "EXIT", "DURATION", "USAGE", "STARTED", "OUTCOME"},
					func(r client.Run) []string {
						e := client.Execution{Execution: r.Execution}
						return []string{e.ID, e.Work, e.Scope, e.Binding, e.Executor, r.TriggerEvent, or(r.TriggerType, "-"), e.State, or(e.Result, "-"), exitCode(e),
							duration(r.DurationMS), runUsage(r), when(e.CreatedAt), or(oneLine(r.Outcome), "-")}
					}, extra)
			}
			// -o wide adds what runs table has besides runs list's columns.
			extra.wideHeader = []string{"SCOPE", "EXECUTOR", "TRIGGER TYPE", "STATE", "USAGE", "OUTCOME"}
			extra.wideRow = func(r client.Run) []string {
				e := r.Execution
				return []string{e.Scope, e.Executor, or(r.TriggerType, "-"), e.State, runUsage(r), or(oneLine(r.Outcome), "-")}
			}
			return runListWide(cmd, s, fetch, []string{"EXECUTION", "WORK", "BINDING", "TRIGGER", "RESULT", "EXIT", "DURATION", "STARTED"},
				func(r client.Run) []string {
					e := client.Execution{Execution: r.Execution}
					return []string{e.ID, e.Work, e.Binding, r.TriggerEvent, runResult(r), exitCode(e), duration(r.DurationMS), when(e.CreatedAt)}
				}, extra)
		},
	}
	rf.add(cmd)
	return cmd
}

func newRunsGetCmd(s Streams) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   "get EXECUTION",
		Short: "Show one attempt of the run history",
		Long: `Show one attempt: its execution, Work, the Event that started the Work,
its result, exit status, duration, usage and the Work's outcome.

Example:
  open-conduit runs get exe_01J...`,
		Args: oneArg("execution ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			r, err := c.GetRun(cmd.Context(), args[0], nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if done, err := printAs(cmd, s.Out, r.Raw, r.Execution.ID); done {
				return err
			}
			e := client.Execution{Execution: r.Execution}
			rows := [][]string{
				{"execution", e.ID}, {"work", e.Work}, {"work state", r.WorkState}, {"scope", e.Scope}, {"binding", e.Binding},
				{"executor", e.Executor}, {"trigger", r.TriggerEvent + " (" + or(r.TriggerType, "-") + ")"},
				{"state", e.State}, {"result", or(e.Result, "-")}, {"exit code", exitCode(e)}, {"duration", duration(r.DurationMS)},
				{"usage", runUsage(*r)},
			}
			if h := r.WorkHold; h != nil {
				rows = append(rows, []string{"work held", h.Reason + ": " + h.Detail + " (by the " + h.By + ")"})
			}
			if e.Message != "" {
				rows = append(rows, []string{"message", e.Message})
			}
			if r.Outcome != "" {
				rows = append(rows, []string{"outcome", r.Outcome})
			}
			rows = append(rows, []string{"started", when(e.CreatedAt)}, []string{"updated", when(e.UpdatedAt)},
				[]string{"log", "open-conduit runs log " + e.ID})
			return printLines(s.Out, rows)
		},
	})
}

// runResult is a run's result, or its state while it has none.
func runResult(r client.Run) string {
	if r.Execution.Result != "" {
		return r.Execution.Result
	}
	return r.Execution.State
}

// runUsage shows what an attempt consumed (an agent's tokens in and out,
// and its cost estimate), the same in every runs command; "-" for none.
func runUsage(r client.Run) string {
	u := r.Execution.Usage
	if u == nil {
		return "-"
	}
	s := fmt.Sprintf("%d in/%d out", u.InputTokens, u.OutputTokens)
	if u.CostUSD > 0 {
		s += fmt.Sprintf(" $%.4f", u.CostUSD)
	}
	return s
}

// duration shows milliseconds as a short duration (1.5s, 2m3s).
func duration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// oneLine keeps a message's first line, shortened for a table cell.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

// newLogCmd is a log command: work logs WORK, executions logs EXECUTION,
// runs log EXECUTION.
func newLogCmd(s Streams, use, short, what string, work bool) *cobra.Command {
	var o client.LogOptions
	long := `Write an attempt's log to standard output as it is written: the live
output while the attempt runs, its stored log once it ended. -f follows it
until the attempt ends; --tail N starts at its last N lines.

Examples:
  open-conduit executions logs exe_01J... -f
  open-conduit runs log exe_01J... --tail 50`
	if work {
		long = `Write the logs of a Work's attempts to standard output, oldest first, each
after a "==> execution ID (result) <==" line when there are several. -f
follows the newest attempt until it ends; --tail N shows the newest
attempt's last N lines only.

Examples:
  open-conduit work logs wrk_01J... -f
  open-conduit work logs wrk_01J... --tail 100`
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long,
		Args: oneArg(what),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Tail < 0 {
				return usagef("--tail must be a whole number of lines, 1 or more")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			read := c.ExecutionLog
			if work {
				read = c.WorkLog
			}
			if _, err := read(cmd.Context(), args[0], o, s.Out); err != nil {
				return clientFailure(err, t)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "keep writing the log as it grows, until the attempt ends")
	cmd.Flags().IntVar(&o.Tail, "tail", 0, "start at the last N lines")
	return cmd
}
