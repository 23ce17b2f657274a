package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/client"
)

// The records as the API shows them (only the fields the tests read).
type work struct {
	ID             string `json:"id"`
	Scope          string `json:"scope"`
	State          string `json:"state"`
	BlockedReason  string `json:"blocked_reason"`
	BlockedDetail  string `json:"blocked_detail"`
	OutcomeMessage string `json:"outcome_message"`
}

type execution struct {
	ID       string `json:"id"`
	Work     string `json:"work"`
	Epoch    int64  `json:"epoch"`
	Owner    string `json:"owner"`
	State    string `json:"state"`
	Result   string `json:"result"`
	ExitCode int    `json:"exit_code"`
}

type artifact struct {
	ID        string `json:"id"`
	Execution string `json:"execution"`
	Name      string `json:"name"`
	Size      int64  `json:"size"`
}

type page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func terminal(state string) bool {
	return state == "succeeded" || state == "failed" || state == "cancelled"
}

// do sends one API request through the client and decodes a body into
// out (when not nil).
func (e *env) do(method, path string, body any, opts *client.RequestOptions, out any) (*client.Response, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	c := e.client()
	defer c.CloseIdleConnections()
	resp, err := c.Do(ctx, method, path, body, opts)
	if err == nil && out != nil && len(resp.Body) > 0 {
		if jerr := json.Unmarshal(resp.Body, out); jerr != nil {
			e.t.Fatalf("%s %s answered %s: %v", method, path, resp.Body, jerr)
		}
	}
	return resp, err
}

// must is do that fails the test on a refusal.
func (e *env) must(method, path string, body any, opts *client.RequestOptions, out any) *client.Response {
	e.t.Helper()
	resp, err := e.do(method, path, body, opts, out)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func key() *client.RequestOptions {
	return &client.RequestOptions{IdempotencyKey: client.NewIdempotencyKey()}
}

// createWork creates Work through the API and returns it.
func (e *env) createWork(scope string) work {
	e.t.Helper()
	var out struct {
		Work work `json:"work"`
	}
	e.must("POST", "/v1/work", map[string]any{"scope": scope}, key(), &out)
	if out.Work.ID == "" {
		e.t.Fatal("work create returned no Work")
	}
	return out.Work
}

func (e *env) getWork(id string) work {
	e.t.Helper()
	var w work
	e.must("GET", "/v1/work/"+client.PathEscape(id), nil, nil, &w)
	return w
}

// waitWork polls the Work until cond holds.
func (e *env) waitWork(id, what string, cond func(work) bool) work {
	e.t.Helper()
	var w work
	until(e.t, "Work "+id+" "+what, func() bool {
		w = e.getWork(id)
		return cond(w)
	})
	return w
}

func (e *env) executions(workID string) []execution {
	e.t.Helper()
	var p page[execution]
	e.must("GET", "/v1/executions?work="+url.QueryEscape(workID), nil, nil, &p)
	return p.Items
}

func (e *env) artifacts(executionID string) []artifact {
	e.t.Helper()
	var p page[artifact]
	e.must("GET", "/v1/artifacts?execution="+url.QueryEscape(executionID), nil, nil, &p)
	return p.Items
}

// fifoJob writes a configuration (before the first start) whose job
// appends a mark, then blocks reading a fifo the test controls and exits
// with the status it reads. Nothing in it waits on a timer.
func (e *env) fifoJob(extraSecrets string, extraEnv string) (fifo, mark string) {
	e.t.Helper()
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		e.t.Fatal(err)
	}
	fifo, mark = filepath.Join(e.root, "fifo"), filepath.Join(e.root, "mark")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		e.t.Fatal(err)
	}
	script := `echo "started $$" >> "$MARK"; echo "secret length ${#CANARY}" >> "$MARK"; os call read_context > /dev/null && echo "context read" >> "$MARK"; read code < "$FIFO"; echo "released with $code"; exit "$code"`
	secrets, bindingSecrets := "{}", "{}"
	if extraSecrets != "" {
		secrets, bindingSecrets = `{"canary": "`+extraSecrets+`"}`, `{"CANARY": "canary"}`
	}
	cfg := `{
  "version": 1,
  "secrets": ` + secrets + `,
  "scopes": {
    "t": {
      "authorization": {"operations": ["declare_outcome", "read_context", "emit"], "reads": ["work", "events"]},
      "bindings": {"job": {
        "executor": "shell",
        "config": {"command": ["sh", "-c", ` + strconv.Quote(script) + `], "env": {"FIFO": ` + strconv.Quote(fifo) + `, "MARK": ` + strconv.Quote(mark) + extraEnv + `}},
        "operations": ["declare_outcome", "read_context", "emit"],
        "secrets": ` + bindingSecrets + `
      }}
    }
  }
}`
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return fifo, mark
}

// release writes a status into the fifo; the job reads it once.
func release(t *testing.T, fifo string, code int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(strconv.Itoa(code) + "\n")
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("nobody read the fifo")
	}
}

// marks returns the pids the job wrote into its mark file, one per run.
func marks(path string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if pid, ok := strings.CutPrefix(line, "started "); ok {
			out = append(out, pid)
		}
	}
	return out
}

// waitStarted waits until the job has run n times and returns the pid of
// the last run.
func waitStarted(t *testing.T, mark string, n int) int {
	t.Helper()
	until(t, "the job starting", func() bool { return len(marks(mark)) >= n })
	m := marks(mark)
	pid, err := strconv.Atoi(m[len(m)-1])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X'
}

// pgid is the process group of pid.
func pgid(t *testing.T, pid int) int {
	t.Helper()
	g, err := unix.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
