package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/open-conduit/open-conduit/api"
)

// ---- the run history and logs ----

// Run is one attempt in the run history: the execution with its Work's
// state and outcome, the Event that started the Work and its duration.
type Run struct {
	api.Run
	Read `json:"-"`
}

// RunFilter filters the run history. State is an execution state
// (running, parked, stopping, finished) or a result (succeeded, failed,
// cancelled, lost); Since, when set, keeps attempts created at or after
// it.
type RunFilter struct {
	Work, Scope, Binding, State string
	Since                       time.Time
	Page
}

// ListRuns lists attempts across Work, newest first.
func (c *Client) ListRuns(ctx context.Context, f RunFilter) (*List[Run], error) {
	q := url.Values{"work": {f.Work}, "scope": {f.Scope}, "binding": {f.Binding}, "state": {f.State}}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	f.Page.add(q)
	return list[Run](ctx, c, query("/v1/runs", q))
}

// GetRun reads one attempt of the run history by its execution id.
func (c *Client) GetRun(ctx context.Context, id string, opts *RequestOptions) (*Run, error) {
	var out Run
	rd, err := get(ctx, c, "/v1/runs/"+PathEscape(id), opts, &out)
	out.Read = rd
	return &out, err
}

// LogOptions say how much of a log to read. Tail, above zero, starts at
// the last Tail lines; Follow keeps reading while the attempt runs and
// returns when it ends.
type LogOptions struct {
	Tail   int
	Follow bool
}

// ExecutionLog copies an execution's log to w as it arrives: the live
// output while the attempt runs, its stored log once it ended. With
// Follow it returns when the attempt ends (or ctx does).
func (c *Client) ExecutionLog(ctx context.Context, id string, o LogOptions, w io.Writer) (int64, error) {
	return c.streamLog(ctx, "/v1/executions/"+PathEscape(id)+"/log", o, w)
}

// WorkLog copies the logs of a Work's attempts to w, oldest first, each
// after a header line when there are several; with Follow the newest
// attempt is followed until it ends. Tail shows the newest attempt's last
// lines only.
func (c *Client) WorkLog(ctx context.Context, id string, o LogOptions, w io.Writer) (int64, error) {
	return c.streamLog(ctx, "/v1/work/"+PathEscape(id)+"/log", o, w)
}

func (c *Client) streamLog(ctx context.Context, path string, o LogOptions, w io.Writer) (int64, error) {
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.Tail > 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	resp, err := c.send(ctx, http.MethodGet, query(path, q), nil, nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("reading the log from the daemon failed after %d bytes: %w", n, err)
	}
	owner := resp.Header.Get(api.LogOwnerHeader)
	if owner == "" {
		owner = resp.Trailer.Get(api.LogOwnerHeader)
	}
	if owner != "" {
		return n, &LogElsewhereError{Owner: owner}
	}
	return n, nil
}

// LogElsewhereError is returned by ExecutionLog and WorkLog, after what
// the store holds was copied, when the attempt's segment runs on another
// daemon of the same store: only that daemon, Owner, has its live log, so
// nothing live was written and nothing was followed.
type LogElsewhereError struct {
	// Owner is the owner id of the daemon that runs the attempt.
	Owner string
}

func (e *LogElsewhereError) Error() string {
	return "the attempt runs on daemon " + e.Owner + ", whose host alone has its live log: only what the store holds was written; ask that daemon, or read the log again once the attempt ended"
}
