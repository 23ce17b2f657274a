package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/cliexit"
)

func init() { commands = append(commands, newWorkCmd) }

// waitInterval is how often `work create --wait` reads the Work again. It
// waits on the daemon's progress, not on a deadline; tests shorten it.
var waitInterval = 500 * time.Millisecond

// reconnectFor is how long `work create --wait` keeps trying a daemon that
// stopped answering (a restart) before it gives up.
var reconnectFor = 2 * time.Minute

// restarting reports whether err says nothing listens on the socket now:
// the daemon stopped, and may be starting again.
func restarting(err error) bool {
	var ue *client.UnreachableError
	return errors.As(err, &ue) && (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED))
}

func newWorkCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "work",
		Short: "List, show, create, cancel, retry, wake, hold, release, rebind and attach Work",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("list, get ID, create, cancel ID, retry ID, wake ID, hold ID, release ID, rebind ID, attach ID, logs ID"),
	}
	cmd.AddCommand(newWorkListCmd(s), newWorkGetCmd(s), newWorkCreateCmd(s), newWorkCancelCmd(s), newWorkRetryCmd(s), newWorkWakeCmd(s),
		newLogCmd(s, "logs WORK [-f] [--tail N]", "Write the logs of a Work's attempts, following the newest while it runs", "Work ID", true))
	cmd.AddCommand(workControlCmds(s)...)
	return cmd
}

func newWorkListCmd(s Streams) *cobra.Command {
	var f client.WorkFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list [--scope S] [--state STATE] [--parent WORK]",
		Short: "List Work, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Work], error) {
				f.Page = lf.page()
				return c.ListWork(ctx, f)
			}, []string{"ID", "SCOPE", "BINDING", "STATE", "HELD", "ATTEMPTS", "CREATED"}, func(w client.Work) []string {
				return []string{w.ID, w.Scope, w.Binding, w.State, or(w.BlockedReason, "-"), itoa(int64(w.Attempts)), when(w.CreatedAt)}
			}, listExtra[client.Work]{[]string{"WAITING ON", "PARENT", "INPUTS", "CREATED EVENT", "UPDATED"}, func(w client.Work) []string {
				return []string{or(w.WaitReason, "-"), or(w.Parent, "-"), itoa(w.InputCount), w.CreatedEvent, when(w.UpdatedAt)}
			}, func(w client.Work) time.Time { return w.CreatedAt }, nil})
		},
	}
	cmd.Flags().StringVar(&f.Scope, "scope", "", "only Work of this scope")
	cmd.Flags().StringVar(&f.State, "state", "", "only Work in this state: ready, running, waiting, succeeded, failed or cancelled")
	cmd.Flags().StringVar(&f.Parent, "parent", "", "only the children of this Work")
	lf.addMain(cmd)
	return cmd
}

func printWork(w io.Writer, wk *client.Work) error {
	rows := [][]string{
		{"work", wk.ID},
		{"scope", wk.Scope},
		{"binding", wk.Binding},
		{"state", wk.State},
	}
	if wk.Held() {
		held := wk.BlockedReason + ": " + wk.BlockedDetail
		if wk.Hold != nil {
			held += " (by the " + wk.Hold.By + ")"
		}
		rows = append(rows, []string{"held", held})
	}
	if wk.WaitReason != "" {
		rows = append(rows, []string{"waiting on", wk.WaitReason})
	}
	if wk.Parent != "" {
		rows = append(rows, []string{"parent", wk.Parent})
	}
	if len(wk.Grants) > 0 {
		rows = append(rows, []string{"grants", strings.Join(wk.Grants, ", ")})
	}
	if wk.OutcomeMessage != "" {
		rows = append(rows, []string{"outcome", wk.OutcomeMessage})
	}
	if len(wk.OutcomeData) > 0 {
		rows = append(rows, []string{"outcome data", string(wk.OutcomeData)})
	}
	rows = append(rows,
		[]string{"attempts", itoa(int64(wk.Attempts))},
		[]string{"inputs", fmt.Sprintf("%d (%d acknowledged)", wk.InputCount, wk.InputWatermark)},
		[]string{"created", when(wk.CreatedAt)},
		[]string{"updated", when(wk.UpdatedAt)},
	)
	return printLines(w, rows)
}

func newWorkGetCmd(s Streams) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   "get ID",
		Short: "Show one Work",
		Args:  oneArg("Work ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			w, err := c.GetWork(cmd.Context(), args[0], nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if done, err := printAs(cmd, s.Out, w.Raw, w.ID); done {
				return err
			}
			return printWork(s.Out, w)
		},
	})
}

func newWorkCreateCmd(s Streams) *cobra.Command {
	var req client.CreateWorkRequest
	var typ, data, key string
	var wait bool
	cmd := &cobra.Command{
		Use:   "create --scope S [--binding B] [--type T] [--data JSON|@FILE|-] [--wait]",
		Short: "Create a Work by hand; --wait follows it until it finishes",
		Long: `Create a ready Work in a scope. The scheduler starts it; nothing runs
directly. --binding may be left out when the scope has exactly one binding.
--type and --data give the Work's first input (type manual.input when only
--data is given); --correlation-key lets the Work own a key besides its id;
--grant names one of the binding's grants (repeatable).

Each run sends a fresh Idempotency-Key unless --idempotency-key is given;
the Work's id is derived from the key, so running the command again with
the same key returns the same Work instead of creating another.

With --wait the command follows the Work until it finishes, then prints
its outcome and how to read its log. It exits 0 when the Work succeeded,
and 1 when it failed, was cancelled or is held (a retry releases it).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Scope == "" {
				return usagef("work create needs --scope (open-conduit scopes lists them)")
			}
			obj, err := jsonObject(s, "--data", data)
			if err != nil {
				return err
			}
			if typ != "" || obj != nil {
				req.Input = &client.Input{Type: typ, Data: obj}
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			out, err := c.CreateWork(cmd.Context(), req, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) && !wait {
				return printCreated(s.Out, out.Raw, nil)
			}
			w := out.Work
			if !wantJSON(cmd) {
				verb := "Created"
				if out.Existing || out.Replayed {
					verb = "Found (created earlier under the same idempotency key)"
				}
				fmt.Fprintf(s.Out, "%s Work %s in scope %s (binding %s).\n", verb, w.ID, w.Scope, w.Binding)
			}
			if !wait {
				fmt.Fprintf(s.Out, "Follow it with: open-conduit work get %s\n", w.ID)
				return nil
			}
			return followWork(cmd, s, c, t, w.ID, out.Raw)
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Scope, "scope", "", "the scope the Work runs in (required)")
	f.StringVar(&req.Binding, "binding", "", "the binding that runs it (default: the scope's only binding)")
	f.StringVar(&typ, "type", "", "the type of the Work's first input (default manual.input)")
	f.StringVar(&data, "data", "", "the data of the Work's first input: a JSON object, @FILE or - for standard input")
	f.StringVar(&req.CorrelationKey, "correlation-key", "", "a correlation key the Work owns besides its id")
	f.StringSliceVar(&req.Grants, "grant", nil, "a grant of the binding the Work takes (repeatable)")
	f.BoolVar(&wait, "wait", false, "follow the Work until it finishes; exit 1 if it failed, was cancelled or is held")
	keyFlag(cmd, &key)
	return cmd
}

// printCreated prints work create's one JSON shape: the API's answer to
// the create (work, created_event, input_event, existing), with work
// replaced by final when --wait followed it to its end, so that --json
// prints the same members with and without --wait.
func printCreated(w io.Writer, created, final []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(created, &doc); err != nil {
		return failf("the daemon's answer to work create is not a JSON object: %v", err)
	}
	if final != nil {
		doc["work"] = json.RawMessage(final)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return failf("cannot encode work create's answer: %v", err)
	}
	return printRaw(w, b)
}

// followWork reads the Work every waitInterval (sending its last ETag, so
// an unchanged Work costs no body) until it has finished or is held, then
// prints the outcome and how to read its log (with --json, created, the
// create's answer, with the final Work in it).
func followWork(cmd *cobra.Command, s Streams, c *client.Client, t target, id string, created []byte) error {
	ctx := cmd.Context()
	etag, state := "", ""
	var w *client.Work
	var lost time.Time // when the daemon stopped answering
	for {
		got, err := c.GetWork(ctx, id, &client.RequestOptions{IfNoneMatch: etag})
		if err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return failf("stopped following Work %s; it goes on: open-conduit work get %s", id, id)
			}
			if !restarting(err) || (!lost.IsZero() && time.Since(lost) > reconnectFor) {
				return clientFailure(err, t)
			}
			if lost.IsZero() {
				lost = time.Now()
				if !wantJSON(cmd) {
					fmt.Fprintf(s.Err, "%s  the daemon stopped answering; reconnecting for up to %s\n", lost.Format("15:04:05"), reconnectFor)
				}
			}
			select {
			case <-ctx.Done():
				return failf("stopped following Work %s; it goes on: open-conduit work get %s", id, id)
			case <-time.After(waitInterval):
			}
			continue
		}
		if !lost.IsZero() {
			lost = time.Time{}
			if !wantJSON(cmd) {
				fmt.Fprintf(s.Err, "%s  reconnected\n", time.Now().Format("15:04:05"))
			}
		}
		if !got.NotModified {
			w, etag = got, got.ETag
			if w.State != state && !wantJSON(cmd) {
				fmt.Fprintf(s.Err, "%s  %s\n", time.Now().Format("15:04:05"), w.State)
			}
			state = w.State
		}
		if w.Terminal() || w.Held() {
			break
		}
		select {
		case <-ctx.Done():
			return failf("stopped following Work %s; it goes on: open-conduit work get %s", id, id)
		case <-time.After(waitInterval):
		}
	}
	if wantJSON(cmd) {
		if err := printCreated(s.Out, created, w.Raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(s.Out)
		if err := printWork(s.Out, w); err != nil {
			return err
		}
		printLogHint(ctx, s, c, w.ID)
	}
	switch {
	case w.State == "succeeded":
		return nil
	case w.Held():
		return cliexit.Coded(ExitFailed, "work_held", "Work %s is held (%s): %s; release it with: open-conduit work retry %s", w.ID, w.BlockedReason, w.BlockedDetail, w.ID)
	default:
		return cliexit.Coded(ExitFailed, "work_"+w.State, "Work %s %s", w.ID, w.State)
	}
}

// printLogHint names the commands that read the Work's artifacts.
func printLogHint(ctx context.Context, s Streams, c *client.Client, work string) {
	arts, err := c.ListArtifacts(ctx, client.ArtifactFilter{Work: work, Page: client.Page{Limit: 20}})
	if err != nil || len(arts.Items) == 0 {
		fmt.Fprintf(s.Out, "\nIts artifacts (logs) are listed by: open-conduit artifacts list --work %s\n", work)
		return
	}
	fmt.Fprintln(s.Out, "\nRead its log:")
	for _, a := range arts.Items {
		fmt.Fprintf(s.Out, "  open-conduit artifacts cat %s   # %s, %d bytes\n", a.ID, a.Name, a.Size)
	}
}

// controlCmd builds cancel, retry and execution cancel: one ID, an
// optional --reason and an Idempotency-Key.
func controlCmd(s Streams, use, short, long, what string, do func(c *client.Client, ctx context.Context, id, reason string, opts *client.RequestOptions) (*client.Controlled, error), done func(*client.Controlled) string) *cobra.Command {
	var reason, key string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  oneArg(what),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := do(c, cmd.Context(), args[0], reason, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			fmt.Fprintln(s.Out, done(res))
			if res.Existing || res.Replayed {
				fmt.Fprintln(s.Out, "(an earlier request with the same idempotency key did it; nothing was done again)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "a short note recorded on the control event")
	keyFlag(cmd, &key)
	return cmd
}

func newWorkCancelCmd(s Streams) *cobra.Command {
	return controlCmd(s, "cancel ID [--reason R]", "Cancel a Work and stop its attempt",
		`Cancel a Work: a core.work.cancelled event, the fencing of its running
attempt (the daemon stops the process) and the Work's end, together.`, "Work ID",
		(*client.Client).CancelWork,
		func(r *client.Controlled) string {
			return fmt.Sprintf("Work %s is %s (event %s).", r.Work.ID, r.Work.State, r.Event.ID)
		})
}

func newWorkRetryCmd(s Streams) *cobra.Command {
	return controlCmd(s, "retry ID [--reason R]", "Retry a failed or cancelled Work, or release a held one",
		`Retry a Work: a held Work (for example after 'execution cancel', or a
secret that was unavailable) is released; a failed or cancelled Work
becomes ready again and its next attempt starts. A succeeded Work is not
retried.`, "Work ID",
		(*client.Client).RetryWork,
		func(r *client.Controlled) string {
			return fmt.Sprintf("Work %s is %s again (event %s).", r.Work.ID, r.Work.State, r.Event.ID)
		})
}

func newWorkWakeCmd(s Streams) *cobra.Command {
	var typ, data, key string
	cmd := &cobra.Command{
		Use:   "wake ID [--type T] [--data JSON|@FILE|-]",
		Short: "Send an event on a Work's own key, waking it if it waits for one",
		Args:  oneArg("Work ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := jsonObject(s, "--data", data)
			if err != nil {
				return err
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.WakeWork(cmd.Context(), args[0], client.WakeRequest{Type: typ, Data: obj}, keyOpts(key))
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			if res.Matched {
				fmt.Fprintf(s.Out, "Woke Work %s (event %s).\n", args[0], res.Event.ID)
			} else {
				fmt.Fprintf(s.Out, "Event %s matched no wait: %s.\n", res.Event.ID, res.Decision.Detail)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "the event's type (default core.manual.wake)")
	cmd.Flags().StringVar(&data, "data", "", "the event's data: a JSON object, @FILE or - for standard input")
	keyFlag(cmd, &key)
	return cmd
}
