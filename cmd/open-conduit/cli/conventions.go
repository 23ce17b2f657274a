package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// What every command has, set once over the whole tree after the command
// files built it (finishTree), so that each file stays as it was: an
// example in its help, typo suggestions at every level, and shell
// completion of ids, scopes and bindings from the daemon.

// examples are the commands' Example texts, by command path. A command
// without one (a command added later) gets its usage line as its example.
var examples = map[string]string{
	"open-conduit":                    "open-conduit work list\nopen-conduit work create --scope setup --wait",
	"open-conduit act":                "open-conduit act github.rerun --scope ops --work wrk_01J... --input '{\"job\":\"build\"}'",
	"open-conduit actions":            "open-conduit actions\nopen-conduit actions --json",
	"open-conduit actions list":       "open-conduit actions list -o name",
	"open-conduit approvals":          "open-conduit approvals list --state pending",
	"open-conduit approvals approve":  "open-conduit approvals approve apr_01J...",
	"open-conduit approvals deny":     "open-conduit approvals deny apr_01J...",
	"open-conduit approvals list":     "open-conduit approvals list --scope ops --state pending",
	"open-conduit artifacts":          "open-conduit artifacts list --work wrk_01J...",
	"open-conduit artifacts cat":      "open-conduit artifacts cat art_01J...\nopen-conduit artifacts cat art_01J... --range -4096",
	"open-conduit artifacts get":      "open-conduit artifacts get art_01J...",
	"open-conduit artifacts list":     "open-conduit artifacts list --work wrk_01J...\nopen-conduit artifacts list --execution exe_01J... -o name",
	"open-conduit auth":               "open-conduit auth operators",
	"open-conduit auth operators":     "open-conduit auth operators\nopen-conduit auth operators --all",
	"open-conduit auth operators add": "open-conduit auth operators add alice --role operate > alice.token",
	"open-conduit auth recover":       "open-conduit auth recover --state ~/.local/state/open-conduit",
	"open-conduit auth revoke":        "open-conduit auth revoke tok_01J...",
	"open-conduit auth rotate":        "open-conduit auth rotate > new.token",
	"open-conduit config":             "open-conduit config check ./config.json\nopen-conduit config apply ./config.json",
	"open-conduit config apply":       "open-conduit config apply ./config.json\nopen-conduit config apply ./config.json --expected-generation 4",
	"open-conduit config check":       "open-conduit config check ./config.json --json",
	"open-conduit config diff":        "open-conduit config diff ./config.json\nopen-conduit config get > config.json && open-conduit config diff config.json",
	"open-conduit config get":         "open-conduit config get > config.json",
	"open-conduit config set":         "open-conduit config set /scopes/ops/authorization/reads '[\"work\"]'",
	"open-conduit config validate":    "open-conduit config validate ./config.json",
	"open-conduit daemon":             "open-conduit daemon\nopen-conduit daemon --log-level debug --log-format json",
	"open-conduit doctor":             "open-conduit doctor\nopen-conduit doctor --offline --json",
	"open-conduit emit":               "open-conduit emit deploy.requested --scope ops --data '{\"ref\":\"main\"}'",
	"open-conduit events":             "open-conduit events list --scope ops --since 1h",
	"open-conduit events chain":       "open-conduit events chain evt_01J...",
	"open-conduit events get":         "open-conduit events get evt_01J...",
	"open-conduit events list":        "open-conduit events list --scope ops --since 1h\nopen-conduit events list --type github.push --all --reverse --json",
	"open-conduit execution":          "open-conduit execution cancel exe_01J...",
	"open-conduit execution cancel":   "open-conduit execution cancel exe_01J... --reason 'stuck'",
	"open-conduit executions":         "open-conduit executions list --work wrk_01J...",
	"open-conduit executions cancel":  "open-conduit executions cancel exe_01J... --reason 'stuck'",
	"open-conduit executions get":     "open-conduit executions get exe_01J...",
	"open-conduit executions list":    "open-conduit executions list --state running\nopen-conduit executions list --work wrk_01J... -o wide",
	"open-conduit executions logs":    "open-conduit executions logs exe_01J... -f",
	"open-conduit health":             "open-conduit health\nopen-conduit health --json",
	"open-conduit route":              "open-conduit route --scope ops --trace github.push --data @push.json\nopen-conduit route --scope ops --samples",
	"open-conduit runs":               "open-conduit runs list --since 24h",
	"open-conduit runs get":           "open-conduit runs get exe_01J...",
	"open-conduit runs list":          "open-conduit runs list --state failed --since 24h",
	"open-conduit runs log":           "open-conduit runs log exe_01J... --tail 50",
	"open-conduit runs table":         "open-conduit runs table --scope ops",
	"open-conduit scopes":             "open-conduit scopes\nopen-conduit scopes ops",
	"open-conduit toolbelt":           "open-conduit toolbelt calls --execution exe_01J...",
	"open-conduit toolbelt calls":     "open-conduit toolbelt calls --execution exe_01J... --kind toolbelt.rejected",
	"open-conduit waits":              "open-conduit waits --work wrk_01J...\nopen-conduit waits --state active -o wide",
	"open-conduit waits list":         "open-conduit waits list --state active",
	"open-conduit work":               "open-conduit work list --state failed\nopen-conduit work create --scope setup --wait",
	"open-conduit work cancel":        "open-conduit work cancel wrk_01J... --reason 'not needed'",
	"open-conduit work create":        "open-conduit work create --scope setup --wait\nopen-conduit work create --scope ops --binding deploy --data '{\"ref\":\"main\"}' --json",
	"open-conduit work get":           "open-conduit work get wrk_01J...\nopen-conduit work get wrk_01J... -o json | jq .state",
	"open-conduit work list":          "open-conduit work list --state failed --since 24h\nopen-conduit work list --scope ops -o name | xargs -n1 open-conduit work retry",
	"open-conduit work logs":          "open-conduit work logs wrk_01J... -f",
	"open-conduit work retry":         "open-conduit work retry wrk_01J...",
	"open-conduit work wake":          "open-conduit work wake wrk_01J... --data '{\"approved\":true}'",
}

// workIDCommands and executionIDCommands take a Work's or an execution's
// id as their argument; completion offers the newest.
var (
	workIDCommands      = []string{"work get", "work cancel", "work retry", "work wake", "work logs"}
	executionIDCommands = []string{"executions get", "executions cancel", "executions logs", "execution cancel", "runs get", "runs log"}
)

// finishTree gives every command of root what conventions.go is about.
func finishTree(root *cobra.Command) {
	ids := map[string]cobra.CompletionFunc{}
	for _, p := range workIDCommands {
		ids[root.Name()+" "+p] = completeWork
	}
	for _, p := range executionIDCommands {
		ids[root.Name()+" "+p] = completeExecutions
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			if ex, ok := examples[c.CommandPath()]; ok {
				c.Example = indent(ex)
			} else {
				c.Example = indent(exampleOf(c))
			}
		}
		c.SuggestionsMinimumDistance = 2
		if c.HasSubCommands() && c.HasParent() {
			// The root's own check (cobra's) suggests already.
			c.Args = suggesting(c.Args)
		}
		if f, ok := ids[c.CommandPath()]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = f
		}
		if c.Flags().Lookup("scope") != nil {
			_ = c.RegisterFlagCompletionFunc("scope", completeScopes)
		}
		if c.Flags().Lookup("binding") != nil {
			_ = c.RegisterFlagCompletionFunc("binding", completeBindings)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// exampleOf is a command's usage line, for a command examples lacks.
func exampleOf(c *cobra.Command) string {
	path := c.CommandPath()
	if c.HasParent() {
		path = c.Parent().CommandPath() + " " + c.Use
	}
	return path
}

func indent(ex string) string {
	return "  " + strings.ReplaceAll(ex, "\n", "\n  ")
}

// suggesting makes a command group's argument check say which subcommand
// a mistyped one is close to, as cobra does for the root's.
func suggesting(next cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				return usagef("unknown command %q for %q; did you mean %s? (see '%s --help')", args[0], cmd.CommandPath(), strings.Join(s, " or "), cmd.CommandPath())
			}
		}
		if next == nil {
			return nil
		}
		return next(cmd, args)
	}
}

// completeWork offers the newest Work's ids, with their state and scope.
func completeWork(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
		l, err := c.ListWork(ctx, client.WorkFilter{Page: client.Page{Limit: 100, Desc: true}})
		if err != nil {
			return nil, err
		}
		var out []cobra.Completion
		for _, w := range l.Items {
			out = append(out, cobra.CompletionWithDesc(w.ID, fmt.Sprintf("%s in %s", w.State, w.Scope)))
		}
		return out, nil
	})
}

// completeExecutions offers the newest executions' ids.
func completeExecutions(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
		l, err := c.ListExecutions(ctx, client.ExecutionFilter{Page: client.Page{Limit: 100, Desc: true}})
		if err != nil {
			return nil, err
		}
		var out []cobra.Completion
		for _, e := range l.Items {
			out = append(out, cobra.CompletionWithDesc(e.ID, fmt.Sprintf("%s, Work %s", e.State, e.Work)))
		}
		return out, nil
	})
}

// completeScopes offers the active configuration's scopes.
func completeScopes(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
		l, err := c.Scopes(ctx, client.Page{Limit: 500})
		if err != nil {
			return nil, err
		}
		var out []cobra.Completion
		for _, s := range l.Items {
			out = append(out, s.ID)
		}
		return out, nil
	})
}

// completeBindings offers the bindings of the --scope given, else of
// every scope.
func completeBindings(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	scope, _ := cmd.Flags().GetString("scope")
	return completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]cobra.Completion, error) {
		l, err := c.Scopes(ctx, client.Page{Limit: 500})
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		var out []cobra.Completion
		for _, s := range l.Items {
			if scope != "" && s.ID != scope {
				continue
			}
			for _, b := range s.Bindings {
				if !seen[b.ID] {
					seen[b.ID] = true
					out = append(out, b.ID)
				}
			}
		}
		return out, nil
	})
}

// completeFrom asks the daemon through list; a daemon that cannot be
// asked completes nothing, silently, as shells expect.
func completeFrom(cmd *cobra.Command, list func(context.Context, *client.Client) ([]cobra.Completion, error)) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, _, err := newClient(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := list(ctx, c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
