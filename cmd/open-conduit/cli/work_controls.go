package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// The Work-level controls: work hold, release, rebind and attach.

func workControlCmds(s Streams) []*cobra.Command {
	return []*cobra.Command{newWorkHoldCmd(s), newWorkReleaseCmd(s), newWorkRebindCmd(s), newWorkAttachCmd(s)}
}

// controlled prints a control's answer: the JSON body, or its line and
// whether an earlier request with the same key did it.
func controlled(cmd *cobra.Command, s Streams, res *client.Controlled, line string) error {
	if wantJSON(cmd) {
		return printRaw(s.Out, res.Raw)
	}
	fmt.Fprintln(s.Out, line)
	if res.Existing || res.Replayed {
		fmt.Fprintln(s.Out, "(an earlier request with the same idempotency key did it; nothing was done again)")
	}
	return nil
}

func newWorkHoldCmd(s Streams) *cobra.Command {
	var reason, key string
	var stop bool
	cmd := &cobra.Command{
		Use:   "hold ID --reason TEXT [--stop]",
		Short: "Hold a Work: no new attempt of it starts until it is released",
		Long: `Hold a Work: no new attempt of it starts, and a parked one is not
resumed, until 'work release'. A running attempt goes on unless --stop,
which fences and stops it as 'execution cancel' does. A held Work can
still be cancelled, and its running attempt can still finish it.

Example:
  open-conduit work hold wrk_01J... --reason "freeze during the migration"`,
		Args: oneArg("Work ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usagef("work hold needs --reason TEXT: say why no attempt may start")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.HoldWork(cmd.Context(), args[0], client.HoldRequest{Reason: reason, Stop: stop}, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			line := fmt.Sprintf("Work %s is held (event %s); release it with: open-conduit work release %s", res.Work.ID, res.Event.ID, res.Work.ID)
			if res.Execution != nil {
				line += fmt.Sprintf("\nIts attempt %s is %s.", res.Execution.ID, res.Execution.State)
			}
			return controlled(cmd, s, res, line)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why the Work is held (required; shown in work get)")
	cmd.Flags().BoolVar(&stop, "stop", false, "also fence and stop the Work's live attempt")
	keyFlag(cmd, &key)
	return cmd
}

func newWorkReleaseCmd(s Streams) *cobra.Command {
	return controlCmd(s, "release ID [--reason R]", "Release an operator's hold of a Work",
		`Release a Work an operator held ('work hold', or 'execution cancel'): it
may be claimed, resumed or recovered again. A hold the system set
(secret_unavailable, attempt_lost, binding_unavailable, ...) is refused
with system_hold: fix its cause, then 'work retry' it.`, "Work ID",
		(*client.Client).ReleaseWork,
		func(r *client.Controlled) string {
			return fmt.Sprintf("Work %s is released and %s (event %s).", r.Work.ID, r.Work.State, r.Event.ID)
		})
}

func newWorkRebindCmd(s Streams) *cobra.Command {
	var binding, reason, key string
	var grants []string
	cmd := &cobra.Command{
		Use:   "rebind ID --binding B [--grant G]... [--reason R]",
		Short: "Move a Work that is not running to another binding of its scope",
		Long: `Move a Work with no live attempt to another binding of its scope: its
next attempt runs there, with that binding's grants. The Work keeps its
grants unless --grant names the new ones (--grant "" for none); each must
be one of the new binding's. Refused with attempt_live while an attempt
is running, stopping or parked, and for a binding the scope does not have.

Example:
  open-conduit work rebind wrk_01J... --binding nightly-large`,
		Args: oneArg("Work ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if binding == "" {
				return usagef("work rebind needs --binding B: one of the Work's scope's bindings")
			}
			req := client.RebindRequest{Binding: binding, Reason: reason}
			if cmd.Flags().Changed("grant") {
				g := []string{}
				for _, x := range grants {
					if x != "" {
						g = append(g, x)
					}
				}
				req.Grants = &g
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.RebindWork(cmd.Context(), args[0], req, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			return controlled(cmd, s, res, fmt.Sprintf("Work %s is on binding %s (event %s).", res.Work.ID, res.Work.Binding, res.Event.ID))
		},
	}
	cmd.Flags().StringVar(&binding, "binding", "", "the binding to move the Work to (required)")
	cmd.Flags().StringArrayVar(&grants, "grant", nil, "a grant of the new binding for the Work to take (repeat; replaces its grants)")
	cmd.Flags().StringVar(&reason, "reason", "", "a short note recorded on the control event")
	keyFlag(cmd, &key)
	return cmd
}

func newWorkAttachCmd(s Streams) *cobra.Command {
	var event, corr, reason, key string
	cmd := &cobra.Command{
		Use:   "attach ID [--event EVENT] [--key K] [--reason R]",
		Short: "Queue an accepted Event as a Work's input, or give it a correlation key",
		Long: `Queue an accepted Event of the Work's scope as its input, as a route's
queue would (--event), and/or give the Work ownership of a correlation
key so that later Events on it route to the Work (--key). Refused for an
Event of another scope or one already its input, and for a key another
unfinished Work owns.

Examples:
  open-conduit work attach wrk_01J... --event evt_01J...
  open-conduit work attach wrk_01J... --key pr/42`,
		Args: oneArg("Work ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if event == "" && corr == "" {
				return usagef("work attach needs --event EVENT, --key K or both")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.AttachWork(cmd.Context(), args[0], client.AttachRequest{Event: event, CorrelationKey: corr, Reason: reason}, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			line := fmt.Sprintf("Work %s", res.Work.ID)
			if event != "" {
				line += fmt.Sprintf(" has event %s as input %d", event, res.Work.InputCount)
			}
			if corr != "" {
				if event != "" {
					line += " and"
				}
				line += fmt.Sprintf(" owns key %q", corr)
			}
			return controlled(cmd, s, res, fmt.Sprintf("%s (event %s).", line, res.Event.ID))
		},
	}
	cmd.Flags().StringVar(&event, "event", "", "an accepted Event of the Work's scope to queue as its input")
	cmd.Flags().StringVar(&corr, "key", "", "a correlation key for the Work to own")
	cmd.Flags().StringVar(&reason, "reason", "", "a short note recorded on the control event")
	keyFlag(cmd, &key)
	return cmd
}
