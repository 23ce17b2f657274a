package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// newScopesReconcileCmd is 'scopes reconcile [SCOPE] [--dry-run]'.
func newScopesReconcileCmd(s Streams) *cobra.Command {
	var dry bool
	var key string
	cmd := &cobra.Command{
		Use:   "reconcile [SCOPE] [--dry-run]",
		Short: "Settle the Work a configuration change left behind",
		Long: `List the unfinished Work the active configuration leaves behind, in SCOPE
or every scope: Work of a scope the configuration removed, of a scope that
is not active, or on a binding its scope no longer has, with the keys each
owns. Without --dry-run each is settled, and the operator is recorded on a
core.scope.reconciled event for it: a removed scope's Work is cancelled
(its attempt stopped, its keys released); the others are held with
scope_reconciled (a running attempt goes on) until the configuration is
fixed or the Work rebound, and a retry releases them. --idempotency-key
retries a request whose answer was lost without acting twice.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("scopes reconcile takes at most one scope ID (see 'open-conduit scopes reconcile --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			req := client.ReconcileRequest{DryRun: dry}
			if len(args) == 1 {
				req.Scope = args[0]
			}
			res, err := c.ReconcileScopes(cmd.Context(), req, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			if len(res.Items) == 0 {
				fmt.Fprintf(s.Out, "No Work is left behind by configuration generation %d.\n", res.Generation)
				return nil
			}
			rows := [][]string{{"WORK", "SCOPE", "BINDING", "STATE", "PROBLEM", "ACTION", "KEYS"}}
			for _, it := range res.Items {
				action := it.Action
				switch {
				case res.DryRun:
					action = "would " + action
				case it.Existing:
					action += " (done before)"
				}
				rows = append(rows, []string{it.Work, it.Scope, it.Binding, it.State, it.Problem, action, or(strings.Join(it.Keys, ","), "-")})
			}
			if err := printLines(s.Out, rows); err != nil {
				return err
			}
			for _, it := range res.Items {
				fmt.Fprintf(s.Out, "%s: %s\n", it.Work, it.Detail)
			}
			if res.DryRun {
				fmt.Fprintln(s.Out, "(dry run: nothing was changed; run it again without --dry-run to settle them)")
			} else if res.Replayed {
				fmt.Fprintln(s.Out, "(an earlier request with the same idempotency key did it; nothing was done again)")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only list the Work and what would be done")
	keyFlag(cmd, &key)
	return cmd
}
