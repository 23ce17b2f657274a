package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

func init() { commands = append(commands, newAuthCmd) }

// openCredentials opens the operator credential store of a state
// directory, for `auth recover`, the one auth command that works on the
// host instead of through the daemon. The daemon's composition sets it
// (to the coordination storage under the state directory, or the
// PostgreSQL store --store names); the returned closer releases the
// store.
var openCredentials func(ctx context.Context, o daemon.StoreOptions) (management.Credentials, io.Closer, error)

func newAuthCmd(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Rotate, revoke, list and issue operator credentials",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("name a subcommand: rotate, revoke ID, operators, operators add NAME, recover (see 'open-conduit auth --help')")
		},
	}
	ops := newAuthOperatorsCmd(s)
	ops.AddCommand(newAuthOperatorsAddCmd(s))
	cmd.AddCommand(newAuthRotateCmd(s), newAuthRevokeCmd(s), ops, newAuthRecoverCmd(s))
	return cmd
}

func newAuthRotateCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "rotate",
		Short: "Replace your credential with a new one and write the new token to your token file",
		Long: `Rotate revokes the credential in your token file and issues a replacement
with the same name and role. The new token is written to the same token file
(atomically); the old one is refused from then on.

If the response is lost (the command fails after the daemon rotated), the
owner's way back is 'open-conduit auth recover' on the host, with the daemon
stopped. A named operator asks an admin for a new credential.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			is, err := c.Rotate(cmd.Context())
			if err != nil {
				return clientFailure(err, t)
			}
			if werr := statedir.WriteTokenFile(t.tokenFile, is.Token); werr != nil {
				// The old token is dead; this is the only copy of the new one.
				fmt.Fprintf(s.Out, "%s\n", is.Token)
				return failf("the credential was rotated, but the new token could not be written to %s: %v.\nThe new token (%s) is printed above, once: save it now, it will not be shown again", t.tokenFile, werr, is.TokenID)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, is.Raw)
			}
			fmt.Fprintf(s.Out, "Rotated: operator %s (role %s) now has credential %s.\nThe new token was written to %s; the old token no longer works.\n", is.Name, is.Role, is.TokenID, t.tokenFile)
			return nil
		},
	}
}

func newAuthRevokeCmd(s Streams) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke an operator credential or an execution token by its id (tok_…)",
		Long: `Revoke a credential by its token id: an execution token (operate role), your
own credential, or, with the admin role, any named operator's. The owner's
credential is revoked only by the owner, or by 'open-conduit auth recover'.
List operator credentials and their ids with 'open-conduit auth operators'.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("auth revoke takes exactly one TOKEN_ID, such as tok_01j… (see 'open-conduit auth operators' for ids)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			res, err := c.Revoke(cmd.Context(), args[0], &client.RequestOptions{IdempotencyKey: key})
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, res.Raw)
			}
			fmt.Fprintf(s.Out, "Revoked %s (%s token).\n", res.TokenID, res.Class)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "idempotency-key", "", "send this Idempotency-Key (reuse it to retry after a lost response); default: a fresh key")
	return cmd
}

func newAuthOperatorsCmd(s Streams) *cobra.Command {
	var lf listFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "operators [--all]",
		Short: "List active operator credentials, oldest first (names, roles, token ids; never tokens); --all adds revoked ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runList(cmd, s, func(c *client.Client, ctx context.Context) (*client.List[client.Operator], error) {
				return c.ListOperators(ctx, client.OperatorFilter{All: all, Page: lf.page()})
			}, []string{"NAME", "ROLE", "TOKEN ID", "STATE", "CREATED", "REVOKED"}, func(o client.Operator) []string {
				state, revoked := "active", "-"
				if !o.Active {
					state = "revoked"
				}
				if o.RevokedAt != nil {
					revoked = when(*o.RevokedAt)
				}
				name := o.Name
				if o.Owner {
					name += " (owner)"
				}
				return []string{name, o.Role, o.TokenID, state, when(o.CreatedAt), revoked}
			})
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "list revoked credentials too")
	return cmd
}

func newAuthOperatorsAddCmd(s Streams) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "add NAME [--role view|operate|admin]",
		Short: "Issue a credential for a named operator (admin); prints its token once",
		Long: `Issue a credential for a named operator. NAME is a lower-case letter followed
by up to 31 lower-case letters, digits or '-', and not 'local' (the owner).
A name has one active credential at a time. The role defaults to view.

The token is printed once and will not be shown again: hand it to the
operator, who keeps it in a file and passes it with --token-file.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("auth operators add takes exactly one NAME (see 'open-conduit auth operators add --help')")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if role != "" && role != "view" && role != "operate" && role != "admin" {
				return usagef("--role must be view, operate or admin")
			}
			c, t, err := newClient(cmd)
			if err != nil {
				return err
			}
			is, err := c.AddOperator(cmd.Context(), args[0], role)
			if err != nil {
				return clientFailure(err, t)
			}
			if wantJSON(cmd) {
				return printRaw(s.Out, is.Raw)
			}
			fmt.Fprintf(s.Out, "Issued credential %s for operator %s (role %s).\nToken (shown once; it will not be shown again, so save it now):\n%s\n", is.TokenID, is.Name, is.Role, is.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "view, operate or admin (default view)")
	return cmd
}

func newAuthRecoverCmd(s Streams) *cobra.Command {
	var stateFlag, store, storePassword string
	cmd := &cobra.Command{
		Use:   "recover [--state DIR] [--store URL --store-password REF]",
		Short: "On the host, with the daemon stopped: give the owner a fresh token",
		Long: `Recover is the owner's way back after a lost rotation response (or a lost
token file). It runs on the host, takes the state directory's lock (so it
works only while the daemon is stopped), revokes the owner's credential and
writes a fresh owner token to <state>/private/operator.token. Named
operators' credentials are untouched.

A daemon on a PostgreSQL store keeps its credentials there: pass the same
--store and --store-password as the daemon (or $OPEN_CONDUIT_STORE and
$OPEN_CONDUIT_STORE_PASSWORD). Other daemons on that store may go on
running, but the owner's token every one of them holds is revoked: copy
the fresh token file to each daemon's state directory that needs it. A
daemon that only lacks the owner's token file needs no recovery: copy the
file from a daemon that has it (see docs/storage.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			state := stateFlag
			if state == "" {
				var err error
				if state, err = defaultStateDir(); err != nil {
					return failf("%v", err)
				}
			}
			if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
				return failf("there is no state directory at %s; pass --state DIR (or set $%s) to the daemon's state directory", state, EnvState)
			}
			lock, err := statedir.AcquireLock(state)
			if err != nil {
				var held *statedir.LockHeldError
				if errors.As(err, &held) {
					who := "another process"
					if held.PID > 0 {
						who = fmt.Sprintf("process %d (the daemon?)", held.PID)
					}
					return failf("%s holds the lock on %s; auth recover works only with the daemon stopped: stop it, run 'open-conduit auth recover' again, then start the daemon", who, state)
				}
				return failf("%v", err)
			}
			defer lock.Close()
			if openCredentials == nil {
				return failf("auth recover needs the daemon's coordination storage, which this build cannot open")
			}
			so := storeOptions(state, store, storePassword)
			if err := so.Check(); err != nil {
				return failf("%v", err)
			}
			creds, closer, err := openCredentials(cmd.Context(), so)
			if err != nil {
				if so.URL != "" {
					return failf("cannot open the credential store on PostgreSQL: %v", err)
				}
				return failf("cannot open the credential store in %s: %v", state, err)
			}
			defer closer.Close()
			ops, err := management.NewOperators(creds, clock.System{}, clock.SystemEntropy())
			if err != nil {
				return failf("recovery failed: %v", err)
			}
			if err := management.RecoverOperator(cmd.Context(), lock, ops); err != nil {
				return failf("recovery failed: %v", err)
			}
			fmt.Fprintf(s.Out, "Recovered: a fresh owner token is in %s; every earlier owner token is revoked.\nStart the daemon again with 'open-conduit daemon'.\n", statedir.OwnerTokenPath(state))
			return nil
		},
	}
	cmd.Flags().StringVar(&stateFlag, "state", "", "the daemon's state directory (default: $"+EnvState+", else the XDG state directory)")
	storeFlags(cmd, &store, &storePassword)
	return cmd
}
