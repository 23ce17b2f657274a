package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/cliexit"
)

// wantJSON reports whether --json (or -o json) was given.
func wantJSON(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	if o, err := cmd.Flags().GetString("output"); err == nil && o == "json" {
		return true
	}
	return v
}

// printRaw writes the API's response body as it came, ending in a newline.
func printRaw(w io.Writer, body []byte) error {
	if _, err := w.Write(body); err != nil {
		return err
	}
	if len(body) == 0 || body[len(body)-1] != '\n' {
		_, err := io.WriteString(w, "\n")
		return err
	}
	return nil
}

// newTable returns a writer that aligns tab-separated columns; Flush it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// when formats a time for people; the zero time is "-".
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// usageCodes are the daemon's refusal codes that mean the request itself
// is wrong (a flag's value, a filter, the data given): the command exits
// 2 on them, as on a usage error it finds itself. A cursor the daemon
// refuses (invalid_cursor, cursor_mismatch, cursor_expired) is not among
// them: it is the daemon's own token and may simply have expired.
var usageCodes = map[string]bool{
	"invalid_request":          true,
	"payload_too_large":        true,
	"idempotency_key_required": true,
}

// roleNeeded reads the role a forbidden_role refusal names and the
// credential's own.
var roleNeeded = regexp.MustCompile(`needs the (\w+) role; this credential's role is (\w+)`)

// Stable codes of the client's own failures in the JSON error envelope.
const (
	codeUnreachable = "unreachable"
	codeTokenFile   = "token_file_unreadable"
)

// codeLogElsewhere: a log whose attempt another daemon of the store runs
// (client.LogElsewhereError).
const codeLogElsewhere = "log_elsewhere"

// clientFailure turns an error from the client into an error that says
// what happened and what to do next: exit 2 for a refusal of the request
// as invalid (usageCodes), 1 otherwise; it carries the daemon's code for
// the JSON envelope.
func clientFailure(err error, t target) error {
	var te *client.TokenError
	if errors.As(err, &te) {
		hint := "pass --token-file FILE or set $" + EnvTokenFile
		reason := te.Err.Error()
		var pe *fs.PathError
		if errors.As(te.Err, &pe) {
			reason = pe.Err.Error()
		}
		if errors.Is(te.Err, fs.ErrNotExist) {
			reason = "it does not exist"
			if t.fileFrom != "--token-file" && t.fileFrom != "$"+EnvTokenFile {
				hint = "the daemon writes the owner's token there when it first starts; is it running on this state directory? Otherwise " + hint
			}
		}
		return cliexit.Coded(ExitFailed, codeTokenFile, "cannot read the token file %s (from %s): %s; %s", te.Path, t.fileFrom, reason, hint)
	}
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
			return cliexit.Coded(ExitFailed, codeUnreachable, "cannot reach the daemon at %s (from %s): nothing is listening there; is the daemon running? Start it with `open-conduit daemon`, or pass --endpoint with its socket", ue.Socket, t.socketFrom)
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return cliexit.Coded(ExitFailed, codeUnreachable, "cannot reach the daemon at %s: permission denied; the socket is its owner's alone, so run this command as the user who runs the daemon", ue.Socket)
		}
		return cliexit.Coded(ExitFailed, codeUnreachable, "cannot reach the daemon at %s (from %s): %v", ue.Socket, t.socketFrom, ue.Err)
	}
	var le *client.LogElsewhereError
	if errors.As(err, &le) {
		return cliexit.Coded(ExitFailed, codeLogElsewhere, "%v", le)
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		switch ae.Code {
		case "unauthorized":
			return cliexit.Coded(ExitFailed, ae.Code, "%s (token file %s).\nIf the token was rotated or revoked, use the new one. If you are the owner and lost a rotation's response, stop the daemon and run `open-conduit auth recover`", ae.Message, t.tokenFile)
		case "forbidden_role":
			if m := roleNeeded.FindStringSubmatch(ae.Message); m != nil && t.command != "" {
				return cliexit.Coded(ExitFailed, ae.Code, "forbidden_role: `%s` needs the %s role; this credential's role is %s (ask an admin for a credential with that role)", t.command, m[1], m[2])
			}
			return cliexit.Coded(ExitFailed, ae.Code, "forbidden_role: %s", ae.Message)
		}
		exit := ExitFailed
		if usageCodes[ae.Code] {
			exit = ExitUsage
		}
		return cliexit.Coded(exit, ae.Code, "%s: %s", ae.Code, ae.Message)
	}
	return failf("%v", err)
}

// printLines writes tab-separated rows as an aligned table.
func printLines(w io.Writer, rows [][]string) error {
	tw := newTable(w)
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
