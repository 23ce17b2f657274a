package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/client"
)

// This file holds the helpers of the toolbelt, operator and client tests:
// an "agent" job the test steers command by command, and raw calls on an
// execution's own toolbelt socket.

// agentScript is the job of the agent binding. It makes a control
// directory named after its execution, with a fifo, then runs each command
// line the test writes into the fifo (through eval, so `os …` runs as the
// shell process itself, with its own environment), recording its output
// and status, until a command exits. Nothing in it waits on a timer: it
// blocks on the fifo the test controls.
const agentScript = `d="$CTL/$OPEN_CONDUIT_EXECUTION_ID"
mkdir "$d" && mkfifo "$d/in" && echo "$$" > "$d/pid" && : > "$d/ready" || exit 99
n=0
while :; do
  cmd=$(cat "$d/in") || exit 98
  n=$((n+1))
  eval "$cmd" > "$d/$n.out" 2> "$d/$n.err"
  echo "$?" > "$d/$n.tmp" && mv "$d/$n.tmp" "$d/$n.status"
done`

// agentOps are the operations the agent binding is granted by default.
var agentOps = []string{"declare_outcome", "emit", "read_context", "wait"}

// agentConfig is a configuration with one scope, t, whose binding agent
// runs agentScript with the control directory ctl; ops is both the
// scope's ceiling and the binding's operations.
func agentConfig(ctl string, ops []string) []byte {
	cfg := map[string]any{
		"version": 1,
		"scopes": map[string]any{
			"t": map[string]any{
				"authorization": map[string]any{"operations": ops, "reads": []string{"work", "events"}},
				"bindings": map[string]any{"agent": map[string]any{
					"executor":   "shell",
					"config":     map[string]any{"command": []string{"sh", "-c", agentScript}, "env": map[string]string{"CTL": ctl}},
					"operations": ops,
				}},
			},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// writeAgentConfig writes agentConfig as the configuration of the first
// start and returns the control directory.
func (e *env) writeAgentConfig(ops []string) string {
	e.t.Helper()
	ctl := filepath.Join(e.root, "c")
	for _, dir := range []string{e.state, ctl} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), agentConfig(ctl, ops), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return ctl
}

// agent is one running agent job, steered through its fifo.
type agent struct {
	t   *testing.T
	exe string
	dir string
	n   int
}

// agentOf waits until the agent of execution exe is ready for commands.
func agentOf(t *testing.T, ctl, exe string) *agent {
	t.Helper()
	a := &agent{t: t, exe: exe, dir: filepath.Join(ctl, exe)}
	until(t, "the agent of "+exe+" getting ready", func() bool {
		_, err := os.Stat(filepath.Join(a.dir, "ready"))
		return err == nil
	})
	return a
}

// send writes one command line into the agent's fifo, once the agent
// reads it (opening without blocking, so a dead agent fails the test
// instead of hanging it).
func (a *agent) send(cmd string) {
	a.t.Helper()
	fifo := filepath.Join(a.dir, "in")
	var fd int
	until(a.t, "the agent reading its fifo", func() bool {
		var err error
		fd, err = unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err == nil
	})
	f := os.NewFile(uintptr(fd), fifo)
	defer f.Close()
	if _, err := f.WriteString(cmd + "\n"); err != nil {
		a.t.Fatal(err)
	}
}

// sh runs one command line in the agent's shell and returns its status,
// standard output and standard error.
func (a *agent) sh(cmd string) (code int, stdout, stderr string) {
	a.t.Helper()
	a.send(cmd)
	a.n++
	base := filepath.Join(a.dir, strconv.Itoa(a.n))
	var status []byte
	until(a.t, "the agent running "+cmd, func() bool {
		var err error
		status, err = os.ReadFile(base + ".status")
		return err == nil
	})
	code, err := strconv.Atoi(strings.TrimSpace(string(status)))
	if err != nil {
		a.t.Fatalf("status %q: %v", status, err)
	}
	out, _ := os.ReadFile(base + ".out")
	errOut, _ := os.ReadFile(base + ".err")
	return code, string(out), string(errOut)
}

// mustSh is sh that fails the test unless the command exits 0.
func (a *agent) mustSh(cmd string) string {
	a.t.Helper()
	code, out, errOut := a.sh(cmd)
	if code != 0 {
		a.t.Fatalf("agent: %s: exit %d\n%s%s", cmd, code, out, errOut)
	}
	return out
}

// exit ends the agent's shell with status code.
func (a *agent) exit(code int) { a.send("exit " + strconv.Itoa(code)) }

// runningExecution waits until Work has a running execution other than
// those in not, and returns it.
func (e *env) runningExecution(workID string, not ...string) execution {
	e.t.Helper()
	var out execution
	until(e.t, "Work "+workID+" running", func() bool {
		for _, x := range e.executions(workID) {
			if x.State == "running" && !contains(not, x.ID) {
				out = x
				return true
			}
		}
		return false
	})
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// runDir is an execution's run directory.
func (e *env) runDir(executionID string) string {
	return filepath.Join(e.state, "runs", runKey(executionID))
}

func (e *env) execSocket(executionID string) string {
	return filepath.Join(e.runDir(executionID), "toolbelt.sock")
}

func (e *env) execTokenFile(executionID string) string {
	return filepath.Join(e.runDir(executionID), "token", "token")
}

// execToken reads an execution's current token from its run directory
// (the test is the host's owner).
func (e *env) execToken(executionID string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.execTokenFile(executionID))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// osEnv is the environment the os binary needs to act for an execution.
func (e *env) osEnv(executionID string) []string {
	return []string{"OS_ENDPOINT=" + e.execSocket(executionID), "OS_TOKEN_FILE=" + e.execTokenFile(executionID)}
}

// sockReply is one answer of a raw call on a Unix socket.
type sockReply struct {
	Status int
	Code   string // the envelope's error code, if any
	Body   []byte
}

// sockDo sends one HTTP request over a Unix socket (the management socket
// or an execution's) with token as its bearer ("" for none), as any HTTP
// client would.
func sockDo(t *testing.T, socket, method, path, token string, header map[string]string, body string) sockReply {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, socket, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &env)
	return sockReply{Status: resp.StatusCode, Code: env.Error.Code, Body: b}
}

// wantRefusal fails the test unless r is the refusal status/code.
func wantRefusal(t *testing.T, what string, r sockReply, status int, code string) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Errorf("%s: %d %s, want %d %s", what, r.Status, bytes.TrimSpace(r.Body), status, code)
	}
}

// ownerToken is the owner's current operator token.
func (e *env) ownerToken() string {
	e.t.Helper()
	b, err := os.ReadFile(e.tokenFile())
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The records as the API shows them, with the fields these tests read.
type workRecord struct {
	ID             string `json:"id"`
	State          string `json:"state"`
	CreatedEvent   string `json:"created_event"`
	OutcomeMessage string `json:"outcome_message"`
}

type eventRecord struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Source         string          `json:"source"`
	Scope          string          `json:"scope"`
	Work           string          `json:"work"`
	Execution      string          `json:"execution"`
	CorrelationKey string          `json:"correlation_key"`
	Parent         string          `json:"parent"`
	Root           string          `json:"root"`
	Actor          string          `json:"actor"`
	Data           json.RawMessage `json:"data"`
}

type toolbeltCall struct {
	Kind      string `json:"kind"`
	Operation string `json:"operation"`
	Execution string `json:"execution"`
	Epoch     int64  `json:"epoch"`
	TokenID   string `json:"token_id"`
	Result    string `json:"result"`
}

type waitRecord struct {
	ID         string   `json:"id"`
	Work       string   `json:"work"`
	Types      []string `json:"types"`
	OnWorkKeys bool     `json:"on_work_keys"`
	State      string   `json:"state"`
}

// workRecordOf reads a Work with the fields above.
func (e *env) workRecordOf(id string) workRecord {
	e.t.Helper()
	var w workRecord
	e.must("GET", "/v1/work/"+client.PathEscape(id), nil, nil, &w)
	return w
}

func (e *env) event(id string) eventRecord {
	e.t.Helper()
	var ev eventRecord
	e.must("GET", "/v1/events/"+client.PathEscape(id), nil, nil, &ev)
	return ev
}

// toolbeltCalls lists the toolbelt's call records under the query q.
func (e *env) toolbeltCalls(q url.Values) []toolbeltCall {
	e.t.Helper()
	var p page[toolbeltCall]
	e.must("GET", "/v1/toolbelt/calls?"+q.Encode()+"&limit=500", nil, nil, &p)
	return p.Items
}

// startTestDaemon starts the test daemon (the real daemon with the e2ecred
// extension) on the env's state directory and waits until it serves.
func (e *env) startTestDaemon(extraEnv ...string) *daemon {
	e.t.Helper()
	logs := &syncBuffer{}
	e.logs = append(e.logs, logs)
	cmd := exec.Command(bins.testDaemon, "--state", e.state, "--executable", bins.openConduit, "--log-format", "json")
	cmd.Env = e.environ(extraEnv...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	d := &daemon{e: e, cmd: cmd, logs: logs, exited: make(chan struct{})}
	go func() {
		d.err = cmd.Wait()
		close(d.exited)
	}()
	e.t.Cleanup(d.kill)
	d.waitReady()
	return d
}

// exitCode is the exit status of a finished command's error.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// within bounds a context for one step of a test.
func within() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), guard)
}

// untilServedAgain waits until an adopting daemon has finished adopting
// executionID: its token file holds a token other than old and its socket
// takes connections. Adoption commits the new epoch before it writes the
// rotated token and serves the socket, so a test that asserts either
// waits for it, not for the epoch alone.
func (e *env) untilServedAgain(executionID, old string) string {
	e.t.Helper()
	var current string
	until(e.t, "the rotated token and the served socket of "+executionID, func() bool {
		b, err := os.ReadFile(e.execTokenFile(executionID))
		if err != nil {
			return false
		}
		current = strings.TrimSpace(string(b))
		if current == "" || current == old {
			return false
		}
		c, err := net.Dial("unix", e.execSocket(executionID))
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return current
}
