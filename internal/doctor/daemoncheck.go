package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
)

// The finding codes of what the daemon knows.
const (
	CodeDaemonReady       = "daemon_ready"
	CodeDaemonStarting    = "daemon_starting"
	CodeDaemonNotRunning  = "daemon_not_running"
	CodeDaemonNotAsked    = "daemon_not_asked"
	CodeDaemonToken       = "daemon_token_unreadable"
	CodeDaemonRefused     = "daemon_unauthorized"
	CodeDaemonFailed      = "daemon_unhealthy"
	CodeWorkHeld          = "work_held"
	CodeWorkHeldMore      = "work_held_more"
	CodeWorkNoneHeld      = "work_none_held"
	CodeWorkUnlisted      = "work_unlisted"
	daemonRequestDeadline = 10 * time.Second
)

// checkDaemon asks the daemon for its health and active generation and
// reports whether it answered.
func (r *run) checkDaemon(ctx context.Context) bool {
	if r.opts.Daemon == nil {
		r.add(SeverityInfo, CodeDaemonNotAsked, "--offline: the daemon was not asked; its health and held Work are not checked", "")
		return false
	}
	ctx, cancel := r.withTimeout(ctx, daemonRequestDeadline)
	defer cancel()
	h, err := r.opts.Daemon.Health(ctx)
	if err != nil {
		r.daemonFailure(err)
		return false
	}
	if h.State != api.HealthReady {
		r.add(SeverityWarning, CodeDaemonStarting, "the daemon on "+r.opts.Socket+" answers but is still "+h.State+" (adopting what an earlier daemon left, or its first round)",
			"open-conduit health --wait-ready 60s")
	} else {
		r.add(SeverityOK, CodeDaemonReady, fmt.Sprintf("the daemon on %s is ready: version %s, configuration generation %d", r.opts.Socket, h.Version, h.Generation), "")
	}
	if c, err := r.opts.Daemon.Config(ctx, nil); err == nil {
		r.activeHash, r.activeGen = c.Hash, c.Generation
	}
	return true
}

// daemonFailure reports why the daemon could not be asked.
func (r *run) daemonFailure(err error) {
	var te *client.TokenError
	var ae *client.APIError
	switch {
	case client.IsUnreachable(err):
		r.add(SeverityInfo, CodeDaemonNotRunning, "no daemon answers on "+r.opts.Socket+"; only the offline checks ran", "open-conduit daemon --state "+r.state())
	case errors.As(err, &te):
		if _, serr := os.Lstat(r.opts.Socket); errors.Is(serr, fs.ErrNotExist) {
			r.add(SeverityInfo, CodeDaemonNotRunning, "no daemon listens on "+r.opts.Socket+"; only the offline checks ran", "open-conduit daemon --state "+r.state())
			return
		}
		if fi, serr := os.Stat(te.Path); serr == nil && fi.Mode().Perm()&0o077 != 0 {
			// The client refuses a token file others may read; the mode
			// finding above says what to do.
			r.add(SeverityInfo, CodeDaemonToken, "the daemon was not asked: the token file "+te.Path+" is refused while other users may read it", "chmod 600 "+te.Path+" && open-conduit auth rotate")
			return
		}
		r.add(SeverityError, CodeDaemonToken, "the operator token file "+te.Path+" cannot be read ("+errText(te.Err)+"), so the daemon cannot be asked",
			"stop the daemon, then: open-conduit auth recover --state "+r.state()+" (or pass --token-file with a valid operator token)")
	case errors.As(err, &ae) && ae.Code == "unauthorized":
		r.add(SeverityError, CodeDaemonRefused, "the daemon on "+r.opts.Socket+" refuses the operator token (unauthorized)",
			"stop the daemon, then: open-conduit auth recover --state "+r.state()+" (or pass --token-file with a valid operator token)")
	case errors.As(err, &ae):
		r.add(SeverityError, CodeDaemonFailed, "the daemon on "+r.opts.Socket+" refused its health question: "+ae.Code, "open-conduit health")
	default:
		r.add(SeverityError, CodeDaemonFailed, "the daemon on "+r.opts.Socket+" did not answer its health question: "+errText(err), "open-conduit health; then read the daemon's log")
	}
}

// heldFixes say, by hold reason, what to do before the retry that
// releases the Work.
var heldFixes = map[string]string{
	"operator_cancelled":   "release it for a new attempt, or give up on it with: open-conduit work cancel {id}; to release: ",
	"secret_unavailable":   "make its binding's secret resolve (see the secret findings), then release it: ",
	"toolbelt_unavailable": "make its toolbelt socket fit (see the socket findings), then release it: ",
	"binding_unavailable":  "apply a configuration that has its binding again (or give up on it with: open-conduit work cancel {id}), then release it: ",
	"attempt_lost":         "check the attempt's log (open-conduit work logs {id}), then release it: ",
}

// checkHeldWork lists the held Work of a daemon that answered, with the
// command that releases each.
func (r *run) checkHeldWork(ctx context.Context) {
	if !r.daemonUp {
		return
	}
	ctx, cancel := r.withTimeout(ctx, daemonRequestDeadline)
	defer cancel()
	var held []client.Work
	for _, state := range []string{api.WorkReady, api.WorkRunning, api.WorkWaiting} {
		cursor := ""
		for page := 0; page < maxWorkPages; page++ {
			l, err := r.opts.Daemon.ListWork(ctx, client.WorkFilter{State: state, Page: client.Page{Limit: api.MaxPageSize, Cursor: cursor}})
			if err != nil {
				r.add(SeverityWarning, CodeWorkUnlisted, "the daemon did not list its "+state+" Work ("+errText(err)+"), so held Work is not checked", "open-conduit work list --state "+state)
				return
			}
			for _, w := range l.Items {
				if w.Held() {
					held = append(held, w)
				}
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
	}
	if len(held) == 0 {
		r.add(SeverityOK, CodeWorkNoneHeld, "the daemon holds no Work", "")
		return
	}
	for i, w := range held {
		if i == MaxHeldWork {
			r.add(SeverityWarning, CodeWorkHeldMore, strconv.Itoa(len(held)-MaxHeldWork)+" more Work are held", "open-conduit work list")
			break
		}
		msg := "Work " + w.ID + " (scope " + w.Scope + ", binding " + w.Binding + ") is held: " + w.BlockedReason
		if w.BlockedDetail != "" {
			msg += ": " + w.BlockedDetail
		}
		fix := "open-conduit work retry " + w.ID
		if lead, ok := heldFixes[w.BlockedReason]; ok {
			fix = strings.ReplaceAll(lead, "{id}", w.ID) + fix
		}
		r.add(SeverityWarning, CodeWorkHeld, msg, fix)
	}
}
