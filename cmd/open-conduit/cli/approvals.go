package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

// The approvals commands are built on the human extension's operator
// actions (human.list, human.approve, human.deny): the daemon's core knows
// nothing of approvals. An action is taken in a scope, so without --scope
// the commands ask every active scope the extension is enabled for.

func init() { commands = append(commands, newApprovalsCmd) }

// approval is an approval as the human extension answers it.
type approval struct {
	ID        string `json:"id"`
	Scope     string `json:"scope"`
	Work      string `json:"work"`
	Binding   string `json:"binding,omitempty"`
	Kind      string `json:"kind"`
	Operation string `json:"operation,omitempty"`
	State     string `json:"state"`
	Actor     string `json:"actor,omitempty"`
	Note      string `json:"note,omitempty"`
	CreatedAt string `json:"created_at"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

func newApprovalsCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide the human extension's approvals",
		Long: `The human extension holds a call to an operation its configuration lists, and
a listed binding's Work before its first attempt, until an operator decides.
'approvals list' shows them; 'approvals approve ID' lets the held call pass
once (or the Work start); 'approvals deny ID --reason TEXT' makes it fail
with approval_denied and the reason. Deciding needs the operate role and is
recorded with you as its actor.`,
	}
	cmd.AddCommand(newApprovalsListCmd(s), newApprovalsDecideCmd(s, "approve"), newApprovalsDecideCmd(s, "deny"))
	return cmd
}

// humanScopes are the scopes to ask: the one given, or every active one.
func humanScopes(ctx context.Context, c *client.Client, scope string) ([]string, error) {
	if scope != "" {
		return []string{scope}, nil
	}
	var out []string
	p := client.Page{Limit: 200}
	for {
		l, err := c.Scopes(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, sc := range l.Items {
			if sc.Active {
				out = append(out, sc.ID)
			}
		}
		if l.NextCursor == "" {
			return out, nil
		}
		p.Cursor = l.NextCursor
	}
}

// notServed reports an action the extension does not serve in a scope.
func notServed(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && (ae.Code == "action_not_found" || ae.Code == "not_found")
}

func listApprovals(ctx context.Context, c *client.Client, scopes []string, input map[string]any) ([]approval, error) {
	out := []approval{}
	raw, _ := json.Marshal(input)
	for _, sc := range scopes {
		res, err := c.Act(ctx, "human.list", client.ActRequest{Scope: sc, Input: raw}, nil)
		if notServed(err) && len(scopes) > 1 {
			continue
		}
		if err != nil {
			return nil, err
		}
		var body struct {
			Approvals []approval `json:"approvals"`
		}
		if err := json.Unmarshal(res.Result, &body); err != nil {
			return nil, fmt.Errorf("the human extension answered a list that does not decode: %w", err)
		}
		out = append(out, body.Approvals...)
	}
	return out, nil
}

func newApprovalsListCmd(s Streams) *cobra.Command {
	var scope, state string
	cmd := &cobra.Command{
		Use:   "list [--scope S] [--state STATE] [--json]",
		Short: "List approvals, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			scopes, err := humanScopes(cmd.Context(), c, scope)
			if err != nil {
				return clientFailure(err, t)
			}
			in := map[string]any{}
			if state != "" {
				in["state"] = state
			}
			list, err := listApprovals(cmd.Context(), c, scopes, in)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				body, _ := json.Marshal(map[string]any{"approvals": list})
				return printRaw(s.Out, body)
			}
			w := tabwriter.NewWriter(s.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSCOPE\tWORK\tKIND\tOPERATION\tSTATE\tBY\tCREATED")
			for _, a := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, a.Scope, a.Work, a.Kind, dash(a.Operation), a.State, dash(a.Actor), a.CreatedAt)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&scope, "scope", "", "only this scope's approvals (default: every active scope)")
	cmd.Flags().StringVar(&state, "state", "", "only approvals in this state: pending, approved, denied or expired")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newApprovalsDecideCmd(s Streams, verb string) *cobra.Command {
	var scope, note, key string
	use, short := "approve ID [--note TEXT]", "Approve a pending approval: the held call passes once"
	if verb == "deny" {
		use, short = "deny ID --reason TEXT", "Deny a pending approval: the held call fails with the reason"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: oneArg("approval ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if verb == "deny" && note == "" {
				return usagef("deny needs --reason: the held call fails with it")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if scope == "" {
				// Find the approval's scope.
				scopes, err := humanScopes(ctx, c, "")
				if err != nil {
					return clientFailure(err, t)
				}
				list, err := listApprovals(ctx, c, scopes, map[string]any{})
				if err != nil {
					return clientFailure(err, t)
				}
				for _, a := range list {
					if a.ID == args[0] {
						scope = a.Scope
					}
				}
				if scope == "" {
					return usagef("no approval %s in any active scope ('open-conduit approvals list' shows them)", args[0])
				}
			}
			in := map[string]any{"approval": args[0]}
			action := "human.approve"
			if verb == "deny" {
				action, in["reason"] = "human.deny", note
			} else if note != "" {
				in["note"] = note
			}
			raw, _ := json.Marshal(in)
			res, err := c.Act(ctx, action, client.ActRequest{Scope: scope, Input: raw}, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Result)
			}
			var body struct {
				Approval approval `json:"approval"`
			}
			if err := json.Unmarshal(res.Result, &body); err != nil {
				return fmt.Errorf("the human extension answered a decision that does not decode: %w", err)
			}
			a := body.Approval
			fmt.Fprintf(s.Out, "Approval %s of Work %s is %s by %s (recorded as event %s).\n", a.ID, a.Work, a.State, a.Actor, res.Event.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scope, "scope", "", "the approval's scope (default: found by listing every active scope)")
	if verb == "deny" {
		f.StringVar(&note, "reason", "", "why: the held call fails with it (required)")
	} else {
		f.StringVar(&note, "note", "", "a note recorded with the approval")
	}
	keyFlag(cmd, &key)
	return cmd
}
