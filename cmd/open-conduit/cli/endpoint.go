package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

// Environment variables the client commands read.
const (
	EnvState     = "OPEN_CONDUIT_STATE"
	EnvEndpoint  = "OPEN_CONDUIT_ENDPOINT"
	EnvTokenFile = "OPEN_CONDUIT_TOKEN_FILE"
)

func init() { rootHooks = append(rootHooks, addClientFlags) }

// addClientFlags puts the client commands' flags on the root, so they go
// anywhere on the command line.
func addClientFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.String("endpoint", "", "the daemon's management socket (default: $"+EnvEndpoint+", else <state>/management.sock)")
	pf.String("token-file", "", "the operator token file (default: $"+EnvTokenFile+", else <state>/private/operator.token)")
	pf.Bool("json", false, "print the API's JSON response as it came, instead of text for people")
}

// defaultStateDir is the state directory when none is given on the
// command line: $OPEN_CONDUIT_STATE, else $XDG_STATE_HOME/open-conduit
// (when XDG_STATE_HOME is an absolute path), else
// ~/.local/state/open-conduit.
func defaultStateDir() (string, error) {
	if d := os.Getenv(EnvState); d != "" {
		return d, nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "open-conduit"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("cannot find the state directory: set " + EnvState + " or HOME")
	}
	return filepath.Join(home, ".local", "state", "open-conduit"), nil
}

// target is where a client command talks to and with which token, and
// where each came from, so that errors can say what to change.
type target struct {
	socket, socketFrom  string
	tokenFile, fileFrom string
	// command is the command line's command, such as "open-conduit work
	// cancel", for messages that name what was refused.
	command string
}

// resolveTarget resolves the endpoint (--endpoint, $OPEN_CONDUIT_ENDPOINT,
// then <state>/management.sock) and the token file (--token-file,
// $OPEN_CONDUIT_TOKEN_FILE, then <state>/private/operator.token).
func resolveTarget(cmd *cobra.Command) (target, error) {
	t := target{command: cmd.CommandPath()}
	flags := cmd.Flags()
	endpoint, _ := flags.GetString("endpoint")
	tokenFile, _ := flags.GetString("token-file")
	switch {
	case endpoint != "":
		t.socket, t.socketFrom = endpoint, "--endpoint"
	case os.Getenv(EnvEndpoint) != "":
		t.socket, t.socketFrom = os.Getenv(EnvEndpoint), "$"+EnvEndpoint
	}
	switch {
	case tokenFile != "":
		t.tokenFile, t.fileFrom = tokenFile, "--token-file"
	case os.Getenv(EnvTokenFile) != "":
		t.tokenFile, t.fileFrom = os.Getenv(EnvTokenFile), "$"+EnvTokenFile
	}
	if t.socket == "" || t.tokenFile == "" {
		state, err := defaultStateDir()
		if err != nil {
			return t, failf("%v", err)
		}
		if t.socket == "" {
			t.socket, t.socketFrom = filepath.Join(state, statedir.SocketName), "the state directory "+state
		}
		if t.tokenFile == "" {
			t.tokenFile, t.fileFrom = statedir.OwnerTokenPath(state), "the state directory "+state
		}
	}
	t.socket = strings.TrimPrefix(t.socket, "unix://")
	if strings.Contains(t.socket, "://") {
		return t, usagef("the endpoint from %s is a URL; the endpoint is the path of the daemon's Unix socket (<state>/management.sock): pass that path instead", t.socketFrom)
	}
	return t, nil
}

// newClient resolves the target and returns a client for it.
func newClient(cmd *cobra.Command) (*client.Client, target, error) {
	t, err := resolveTarget(cmd)
	if err != nil {
		return nil, t, err
	}
	return client.New(t.socket, client.TokenFile(t.tokenFile)), t, nil
}
