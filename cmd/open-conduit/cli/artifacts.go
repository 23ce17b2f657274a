package cli

import (
	"context"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
)

func init() { commands = append(commands, newArtifactsCmd) }

func newArtifactsCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "artifacts",
		Short: "List, show and read artifacts (logs and other output of executions)",
		Args:  cobra.NoArgs,
		RunE:  subcommandNeeded("list, get ID, cat ID"),
	}
	cmd.AddCommand(newArtifactsListCmd(s), newArtifactsGetCmd(s), newArtifactsCatCmd(s))
	return cmd
}

func newArtifactsListCmd(s Streams) *cobra.Command {
	var f client.ArtifactFilter
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list [--work W] [--execution E]",
		Short: "List artifacts, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runListWide(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Artifact], error) {
				f.Page = lf.page()
				return c.ListArtifacts(ctx, f)
			}, []string{"ID", "NAME", "TYPE", "SIZE", "EXECUTION", "WORK", "CREATED"}, func(a client.Artifact) []string {
				return []string{a.ID, a.Name, a.MediaType, itoa(a.Size), a.Execution, a.Work, when(a.CreatedAt)}
			}, listExtra[client.Artifact]{wideHeader: []string{"SHA256"}, wideRow: func(a client.Artifact) []string { return []string{a.SHA256} }})
		},
	}
	cmd.Flags().StringVar(&f.Work, "work", "", "only the artifacts of this Work")
	cmd.Flags().StringVar(&f.Execution, "execution", "", "only the artifacts of this execution")
	lf.add(cmd)
	return cmd
}

func newArtifactsGetCmd(s Streams) *cobra.Command {
	return withOutput(&cobra.Command{
		Use:   "get ID",
		Short: "Show one artifact's metadata",
		Args:  oneArg("artifact ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			a, err := c.GetArtifact(cmd.Context(), args[0], nil)
			if err != nil {
				return clientFailure(err, t)
			}
			if done, err := printAs(cmd, s.Out, a.Raw, a.ID); done {
				return err
			}
			return printLines(s.Out, [][]string{
				{"artifact", a.ID}, {"name", a.Name}, {"type", a.MediaType}, {"size", itoa(a.Size)}, {"sha256", a.SHA256},
				{"execution", a.Execution}, {"work", a.Work}, {"created", when(a.CreatedAt)},
			})
		},
	})
}

// byteRange is what --range accepts: a-b, a- or -n.
var byteRange = regexp.MustCompile(`^([0-9]+-[0-9]*|-[0-9]+)$`)

func newArtifactsCatCmd(s Streams) *cobra.Command {
	var rng string
	cmd := &cobra.Command{
		Use:   "cat ID [--range a-b|a-|-n]",
		Short: "Write an artifact's bytes (a log, say) to standard output",
		Long: `Write an artifact's bytes to standard output as they arrive. --range reads
one byte range: a-b (bytes a to b, counted from 0, both included), a-
(from byte a to the end) or -n (the last n bytes).

Given an execution's ID instead (exe_…), it writes that execution's log as
it exists now: what a running attempt has written so far, or its stored log
once it ended (open-conduit executions logs ID -f follows it).`,
		Args: oneArg("artifact ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.HasPrefix(args[0], "exe_") {
				if rng != "" {
					return usagef("--range reads a stored artifact; for an execution's log use: open-conduit executions logs %s --tail N", args[0])
				}
				c, t, err := newClient(cmd)
				if err != nil {
					return err
				}
				if _, err := c.ExecutionLog(cmd.Context(), args[0], client.LogOptions{}, s.Out); err != nil {
					return clientFailure(err, t)
				}
				return nil
			}
			if rng != "" && !byteRange.MatchString(rng) {
				return usagef("--range must be a-b, a- or -n (byte positions counted from 0), such as --range 0-1023 or --range -4096")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			if _, err := c.ArtifactContent(cmd.Context(), args[0], rng, s.Out); err != nil {
				return clientFailure(err, t)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&rng, "range", "", "one byte range: a-b, a- or -n")
	return cmd
}
