package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newScopesCmd) }

func newScopesCmd(s Streams) *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "scopes [ID]",
		Short: "List the scopes of the active configuration, or show one",
		Long: `Without an ID, list the scopes of the active configuration generation by
id: each one's parent, whether it is active, its bindings and routes.
--limit and --cursor page the list; a cursor from before a configuration
change is refused, so start again without it. With an ID, show the scope's
effective authority: its ceiling, each binding's executor, operations,
grants and secret names, and its routes in order. Secret references are
never shown.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("scopes takes at most one scope ID (see 'open-conduit scopes --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return runList(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Scope], error) {
					return c.Scopes(ctx, lf.page())
				}, []string{"ID", "PARENT", "STATE", "BINDINGS", "ROUTES"}, scopeRow)
			}
			if cmd.Flags().Changed("limit") || cmd.Flags().Changed("cursor") {
				return usagef("--limit and --cursor page the list of scopes; leave them out when naming a scope ID")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			sc, err := c.Scope(cmd.Context(), args[0], nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, sc.Raw)
			}
			return printScope(s, sc)
		},
	}
	lf.add(cmd)
	cmd.AddCommand(newScopesReconcileCmd(s))
	return cmd
}

// scopeRow is a scope's row in the list of scopes.
func scopeRow(sc client.Scope) []string {
	var bindings, routes []string
	for _, b := range sc.Bindings {
		bindings = append(bindings, b.ID+" ("+b.Executor+")")
	}
	for _, r := range sc.Routes {
		routes = append(routes, r.ID)
	}
	return []string{sc.ID, or(sc.Parent, "-"), scopeState(sc), or(strings.Join(bindings, ", "), "-"), or(strings.Join(routes, ", "), "-")}
}

func scopeState(sc client.Scope) string {
	switch {
	case sc.Removed:
		return "removed"
	case sc.Active:
		return "active"
	case !sc.Enabled:
		return "disabled"
	}
	return "inactive"
}

func printScope(s Streams, sc *client.Scope) error {
	rows := [][]string{
		{"scope", sc.ID},
		{"parent", or(sc.Parent, "-")},
		{"state", scopeState(*sc)},
		{"generation", itoa(sc.Generation)},
		{"operations", or(strings.Join(sc.Authorization.Operations, ", "), "-")},
		{"reads", or(strings.Join(sc.Authorization.Reads, ", "), "-")},
	}
	if err := printLines(s.Out, rows); err != nil {
		return err
	}
	for _, b := range sc.Bindings {
		fmt.Fprintf(s.Out, "\nbinding %s (executor %s)\n", b.ID, b.Executor)
		rows := [][]string{{"  operations", or(strings.Join(b.Operations, ", "), "-")}}
		grants := make([]string, 0, len(b.Grants))
		for g := range b.Grants {
			grants = append(grants, g)
		}
		sort.Strings(grants)
		for _, g := range grants {
			rows = append(rows, []string{"  grant " + g, or(strings.Join(b.Grants[g], ", "), "-")})
		}
		envs := make([]string, 0, len(b.Secrets))
		for env := range b.Secrets {
			envs = append(envs, env)
		}
		sort.Strings(envs)
		for _, env := range envs {
			rows = append(rows, []string{"  secret " + env, b.Secrets[env]})
		}
		if len(b.Requires) > 0 {
			rows = append(rows, []string{"  requires", strings.Join(b.Requires, ", ")})
		}
		if b.Playbook != "" {
			rows = append(rows, []string{"  playbook", b.Playbook})
		}
		if err := printLines(s.Out, rows); err != nil {
			return err
		}
	}
	if len(sc.Routes) > 0 {
		fmt.Fprintln(s.Out, "\nroutes, in order:")
		rows := [][]string{{"  ID", "MATCH", "EFFECT", "BINDING"}}
		for _, r := range sc.Routes {
			match := r.MatchType
			if r.MatchSource != "" {
				match += " from " + r.MatchSource
			}
			rows = append(rows, []string{"  " + r.ID, match, r.Effect, or(r.Binding, "-")})
		}
		return printLines(s.Out, rows)
	}
	return nil
}
