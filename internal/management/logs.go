package management

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/logfollow"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The log routes: an execution's log, and a Work's across its attempts,
// as plain text, followed while the attempt runs.

// LiveLogs says where a live segment of an execution writes its log; the
// daemon adapts its executors' executor.LiveLogger to it. ok is false
// when the execution's executor keeps no live log.
type LiveLogs interface {
	LiveLog(e storage.Execution) (path string, ok bool)
}

// MaxTail is the most lines tail= may ask for.
const MaxTail = 100000

// logQuery is the query of both log routes.
type logQuery struct {
	follow bool
	tail   int
}

func parseLogQuery(r *http.Request) (logQuery, error) {
	q, err := httpapi.Query(r, "follow", "tail")
	if err != nil {
		return logQuery{}, err
	}
	var lq logQuery
	switch q.Get("follow") {
	case "", "false":
	case "true":
		lq.follow = true
	default:
		return logQuery{}, httpapi.Errorf(httpapi.CodeInvalidRequest, "follow must be true or false")
	}
	if s := q.Get("tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxTail {
			return logQuery{}, httpapi.Errorf(httpapi.CodeInvalidRequest, "tail must be a whole number from 1 to %d", MaxTail)
		}
		lq.tail = n
	}
	return lq, nil
}

// streams ends the log streams still following when the server shuts
// down, so that a follower never holds a graceful stop.
type streams struct {
	once sync.Once
	stop chan struct{}
}

func newStreams() *streams { return &streams{stop: make(chan struct{})} }

func (s *streams) end() { s.once.Do(func() { close(s.stop) }) }

// EndStreams ends every log stream that is following: the daemon calls it
// before it shuts the management server down. Streams asked for later end
// at once, after what the log holds.
func (rs *Resources) EndStreams() { rs.streams.end() }

// executionLog serves GET /v1/executions/{id}/log.
func (rs *Resources) executionLog(r *http.Request) (any, error) {
	lq, err := parseLogQuery(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	e, err := rs.store.GetExecution(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "execution", id)
	}
	return &logStream{rs: rs, q: lq, exes: []storage.Execution{e}}, nil
}

// workLog serves GET /v1/work/{id}/log: every attempt's log, oldest
// first, each after a header line when there are several; tail= shows
// the newest attempt's last lines only, and follow= follows the newest.
func (rs *Resources) workLog(r *http.Request) (any, error) {
	lq, err := parseLogQuery(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	ctx := r.Context()
	if _, err := rs.store.GetWork(ctx, id); err != nil {
		return nil, notFound(err, "work", id)
	}
	var exes []storage.Execution
	var after *storage.Position
	for {
		page, err := rs.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: id, Page: storage.Page{After: after, Limit: storage.MaxLimit}})
		if err != nil {
			return nil, err
		}
		exes = append(exes, page...)
		if len(page) < storage.MaxLimit {
			break
		}
		last := page[len(page)-1]
		after = &storage.Position{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if lq.tail > 0 && len(exes) > 1 {
		exes = exes[len(exes)-1:]
	}
	return &logStream{rs: rs, q: lq, exes: exes, headers: len(exes) > 1, work: id}, nil
}

// firstAttempt waits, for a follow of a Work that has no attempt yet, for
// its first attempt: storage has no event to wait on, so it looks every
// recheck interval (logfollow.Recheck) until one exists, the Work
// finished without one, or the stream is stopped.
func (rs *Resources) firstAttempt(ctx context.Context, workID string) (storage.Execution, bool) {
	every := rs.logRecheck
	if every <= 0 {
		every = logfollow.Recheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		exes, err := rs.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: workID, Page: storage.Page{Limit: 1}})
		if err != nil {
			return storage.Execution{}, false
		}
		if len(exes) > 0 {
			return exes[0], true
		}
		if w, err := rs.store.GetWork(ctx, workID); err != nil || workTerminal(w) {
			return storage.Execution{}, false
		}
		select {
		case <-ctx.Done():
			return storage.Execution{}, false
		case <-rs.streams.stop:
			return storage.Execution{}, false
		case <-t.C:
		}
	}
}

// logStream writes the logs of exes in order; only the last is followed.
type logStream struct {
	rs      *Resources
	q       logQuery
	exes    []storage.Execution
	headers bool
	// work is the Work of a Work's log ("" for an execution's).
	work string
}

func (s *logStream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	// A live segment another daemon runs has its live log on that
	// daemon's host: what the store holds is written, and the owner named
	// in a header (a trailer, when the attempt was learnt of later).
	named := false
	if n := len(s.exes); n > 0 {
		if owner := s.rs.elsewhere(s.exes[n-1]); owner != "" {
			h.Set(api.LogOwnerHeader, owner)
			named = true
		}
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	flush := func() { _ = rc.Flush() }
	flush()
	if s.work != "" && s.q.follow && len(s.exes) == 0 {
		e, ok := s.rs.firstAttempt(r.Context(), s.work)
		if !ok {
			return
		}
		s.exes = []storage.Execution{e}
	}
	for i, e := range s.exes {
		if s.headers {
			fmt.Fprintf(w, "==> execution %s (%s) <==\n", e.ID, attemptWord(e))
		}
		last := i == len(s.exes)-1
		if owner := s.rs.elsewhere(e); owner != "" {
			if err := s.rs.writeStoredLog(r.Context(), w, e, s.q.tail, flush); err != nil {
				return
			}
			if last && !named {
				h.Set(http.TrailerPrefix+api.LogOwnerHeader, owner)
			}
			continue
		}
		if err := s.rs.writeLog(r.Context(), w, e, s.q.tail, s.q.follow && last, flush); err != nil {
			// The status is sent: the stream just ends. The reader sees
			// an end without the attempt's; nothing here is a secret.
			return
		}
	}
}

func attemptWord(e storage.Execution) string {
	if e.Result != storage.ResultNone {
		return string(e.Result)
	}
	return string(e.State)
}

// segmentOver reports whether an execution's segment has ended: it
// finished, or parked on a wait.
func segmentOver(e storage.Execution) bool {
	return e.State == storage.ExecutionFinished || e.State == storage.ExecutionParked
}

// writeLog writes one execution's log: the live file while its segment
// runs (followed when asked), the stored log artifact once it ended.
func (rs *Resources) writeLog(ctx context.Context, w io.Writer, e storage.Execution, tail int, follow bool, flush func()) error {
	if !segmentOver(e) {
		if path, ok := rs.liveLog(e); ok {
			err := logfollow.Follow(ctx, path, w, logfollow.Options{
				Tail: tail, Follow: follow, Flush: flush, Stop: rs.streams.stop, Recheck: rs.logRecheck,
				Ended: func() bool {
					cur, err := rs.store.GetExecution(ctx, e.ID)
					return err != nil || segmentOver(cur)
				},
			})
			return err
		}
	}
	return rs.writeStoredLog(ctx, w, e, tail, flush)
}

// elsewhere is the owner of an execution whose segment runs on another
// daemon ("" when it runs here, or ended): another owner, and no live log
// of it on this host (a live log here is this daemon's previous process's,
// whose segment it adopts).
func (rs *Resources) elsewhere(e storage.Execution) string {
	if rs.owner == "" || e.Owner == "" || e.Owner == rs.owner || segmentOver(e) {
		return ""
	}
	if path, ok := rs.liveLog(e); ok {
		if _, err := os.Stat(path); err == nil {
			return ""
		}
	}
	return e.Owner
}

func (rs *Resources) liveLog(e storage.Execution) (string, bool) {
	if rs.live == nil {
		return "", false
	}
	return rs.live.LiveLog(e)
}

// writeStoredLog writes the execution's stored log artifact (the newest
// one named log), or, when none was stored, what its live file holds.
func (rs *Resources) writeStoredLog(ctx context.Context, w io.Writer, e storage.Execution, tail int, flush func()) error {
	arts, err := rs.store.ListArtifacts(ctx, &storage.ListArtifactsParams{Execution: e.ID, Page: storage.Page{Desc: true, Limit: storage.MaxLimit}})
	if err != nil {
		return err
	}
	for _, a := range arts {
		if a.Name != "log" {
			continue
		}
		_, f, err := rs.artifacts.Open(ctx, a.ID)
		if err != nil {
			return err
		}
		defer f.Close()
		return logfollow.Copy(f, w, tail, flush)
	}
	if path, ok := rs.liveLog(e); ok {
		return logfollow.Follow(ctx, path, w, logfollow.Options{Tail: tail, Flush: flush})
	}
	return nil
}
