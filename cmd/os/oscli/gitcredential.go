package oscli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/open-conduit/open-conduit/osclient"
	"github.com/spf13/cobra"
)

func newGitCredentialCmd(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "git-credential get|store|erase",
		Short: "Answer git's credential requests from the toolbelt",
		Long: `A git credential helper. Configure it as

    git config credential.helper '!os git-credential'

For get, it asks the toolbelt which granted operation serves git.credential,
calls the first with the protocol, host, path and username git sent, and
prints the username and password. When no granted operation serves it, git
sent no host, or os runs outside an execution, it prints nothing on standard
output, says why on standard error and exits 0, so git asks its next
helper; a refused call is reported and exits 1. store and erase (and any
action git adds later) do nothing.`,
		Args: args(1, "one action: get, store or erase"),
		RunE: func(cmd *cobra.Command, args []string) error {
			attrs, err := readCredentialRequest(s.In)
			if err != nil {
				return err
			}
			if args[0] != "get" {
				return nil // store, erase: the host keeps no credentials
			}
			return gitCredentialGet(cmd, s, attrs)
		},
	}
}

func gitCredentialGet(cmd *cobra.Command, s Streams, attrs map[string]string) error {
	in := osclient.GitCredentialInput{
		Protocol: attrs["protocol"], Host: attrs["host"], Path: attrs["path"], Username: attrs["username"],
	}
	if (in.Protocol == "" || in.Host == "") && attrs["url"] != "" {
		if u, err := url.Parse(attrs["url"]); err == nil {
			in.Protocol, in.Host = u.Scheme, u.Host
			if in.Path == "" {
				in.Path = strings.TrimPrefix(u.Path, "/")
			}
			if in.Username == "" && u.User != nil {
				in.Username = u.User.Username()
			}
		}
	}
	if in.Protocol == "" || in.Host == "" {
		// Nothing to answer; git asks its next helper.
		fmt.Fprintln(s.Err, "os git-credential: git sent no protocol and host (nor a url); no credential offered")
		return nil
	}
	c, err := client(s)
	if err != nil {
		if osclient.CodeOf(err) == osclient.CodeEnvironmentUnset {
			fmt.Fprintln(s.Err, "os git-credential: not inside an Open Conduit execution (OS_ENDPOINT or OS_TOKEN_FILE is unset); no credential offered")
			return nil
		}
		return err
	}
	defer c.Close()
	serving, err := c.Serving(cmd.Context(), osclient.CapabilityGitCredential)
	if err != nil {
		return err
	}
	if len(serving.Operations) == 0 {
		fmt.Fprintln(s.Err, "os git-credential: no operation granted to this execution serves git.credential; no credential offered (grant one to its binding, or let git use another helper)")
		return nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	op := serving.Operations[0]
	resp, err := c.Call(cmd.Context(), osclient.CallRequest{Operation: op, Input: raw})
	if err != nil {
		return err
	}
	var cred osclient.GitCredential
	if err := json.Unmarshal(resp.Result, &cred); err != nil || cred.Password == "" {
		return &osclient.Error{Code: osclient.CodeBadResponse, Message: fmt.Sprintf("%s did not answer with a username and password", op)}
	}
	if strings.ContainsAny(cred.Username+cred.Password, "\n\x00") {
		return &osclient.Error{Code: osclient.CodeBadResponse, Message: fmt.Sprintf("%s answered with a value git cannot take (a line break or NUL)", op)}
	}
	if cred.Username == "" {
		cred.Username = in.Username
	}
	_, err = fmt.Fprintf(s.Out, "username=%s\npassword=%s\n", cred.Username, cred.Password)
	return err
}

// readCredentialRequest reads git's key=value lines until a blank line or
// the end of input. Array keys (capability[]) and unknown keys are read and
// ignored; for a repeated key the last value counts.
func readCredentialRequest(r io.Reader) (map[string]string, error) {
	attrs := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasSuffix(k, "[]") {
			continue
		}
		attrs[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("git-credential: read the request from standard input: %v", err)
	}
	return attrs, nil
}
