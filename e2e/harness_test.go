package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
)

// guard bounds every wait for a real event; it only turns a hang into a
// failure, nothing is timed against it.
const guard = 60 * time.Second

// poll is the interval between two looks at an external state.
const poll = 25 * time.Millisecond

// syncBuffer collects a child's output while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a test's world: a short, fresh directory holding the state
// directory, and every daemon log collected so far.
type env struct {
	t     *testing.T
	root  string
	state string
	logs  []*syncBuffer
}

// newEnv makes a short temporary directory (socket paths must stay under
// 100 bytes) with the state directory inside, not yet created.
func newEnv(t *testing.T) *env {
	t.Helper()
	root, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, root: root, state: filepath.Join(root, "s")}
	t.Cleanup(func() {
		killExecutions(e.state)
		os.RemoveAll(root)
	})
	return e
}

func (e *env) socket() string    { return filepath.Join(e.state, "management.sock") }
func (e *env) tokenFile() string { return filepath.Join(e.state, "private", "operator.token") }

// client is a client with the owner's token file.
func (e *env) client() *client.Client { return client.New(e.socket(), client.TokenFile(e.tokenFile())) }

// environ is the environment of every child: the test's, with the CLI
// pointed at this state directory.
func (e *env) environ(extra ...string) []string {
	out := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OPEN_CONDUIT_") {
			continue
		}
		out = append(out, kv)
	}
	return append(append(out, "OPEN_CONDUIT_STATE="+e.state), extra...)
}

// daemon is a running open-conduit daemon child process.
type daemon struct {
	e      *env
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	err    error
}

// start starts the daemon and waits until its health says ready.
func (e *env) start(extraEnv ...string) *daemon {
	e.t.Helper()
	d := e.spawn(extraEnv...)
	d.waitReady()
	return d
}

// spawn starts the daemon without waiting for it.
func (e *env) spawn(extraEnv ...string) *daemon {
	e.t.Helper()
	logs := &syncBuffer{}
	e.logs = append(e.logs, logs)
	cmd := exec.Command(bins.openConduit, "daemon", "--state", e.state, "--log-format", "json")
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
	return d
}

// waitReady polls the socket's health until it says ready: start-up
// adoption (the rotated tokens of adopted attempts written) and the first
// round and sweep are done. The daemon exiting first fails the test.
func (d *daemon) waitReady() {
	t := d.e.t
	t.Helper()
	c := d.e.client()
	deadline := time.Now().Add(guard)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h, err := c.Health(ctx)
		cancel()
		if err == nil && h.State == api.HealthReady {
			return
		}
		if err == nil {
			err = fmt.Errorf("health says %s", h.State)
		}
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited before it was ready (%v):\n%s", d.err, d.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never answered health (%v):\n%s", err, d.logs)
		}
		time.Sleep(poll)
	}
}

// wait waits for the daemon to exit and returns its exit code.
func (d *daemon) wait() int {
	d.e.t.Helper()
	select {
	case <-d.exited:
	case <-time.After(guard):
		d.e.t.Fatalf("the daemon did not exit:\n%s", d.logs)
	}
	var ee *exec.ExitError
	if errors.As(d.err, &ee) {
		return ee.ExitCode()
	}
	if d.err != nil {
		d.e.t.Fatal(d.err)
	}
	return 0
}

// stop asks the daemon to shut down gracefully and waits for it.
func (d *daemon) stop() int {
	d.e.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	return d.wait()
}

// kill ends the daemon at once, as kill -9 does.
func (d *daemon) kill() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Kill()
	select {
	case <-d.exited:
	case <-time.After(guard):
	}
}

// cli runs the open-conduit binary against the env's state directory.
func (e *env) cli(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	return e.run(bins.openConduit, nil, args...)
}

// run runs a binary with the env's environment plus extra.
func (e *env) run(bin string, extra []string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = e.environ(extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return code, out.String(), errb.String()
}

// cliJSON runs a CLI command with --json, requires exit 0 and decodes its
// output into out.
func (e *env) cliJSON(out any, args ...string) {
	e.t.Helper()
	code, stdout, stderr := e.cli(append(args, "--json")...)
	if code != 0 {
		e.t.Fatalf("open-conduit %v: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		e.t.Fatalf("open-conduit %v printed %q: %v", args, stdout, err)
	}
}

// allLogs is every daemon log line of the env so far.
func (e *env) allLogs() string {
	var b strings.Builder
	for _, l := range e.logs {
		b.WriteString(l.String())
	}
	return b.String()
}

// until polls cond until it holds; what names it for the failure.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
		time.Sleep(poll)
	}
}

// supervisorRecord is what the shell executor records of a supervisor.
type supervisorRecord struct {
	PID int `json:"pid"`
}

// killExecutions ends the process group of every shell execution under
// state, so that a failed test leaves nothing running.
func killExecutions(state string) {
	dirs, _ := filepath.Glob(filepath.Join(state, "executions", "*", "supervisor.json"))
	for _, path := range dirs {
		var rec supervisorRecord
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 1 {
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		}
	}
}

// groupAlive reports whether any live (not zombie) process is in group
// pgid. Zombies are skipped: this machine's init may not reap them.
func groupAlive(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		// f[0] state, f[1] ppid, f[2] pgrp
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// noSecrets is the canary search of an extension's end-to-end test: no
// canary (by what it is) in a response the test kept, in the responses to
// paths it reads now, in a daemon log line, or in any file under the
// env's root (the database, artifacts, run and control directories) but a
// live execution's own token file, where the token belongs. It returns
// the logs it searched.
func (e *env) noSecrets(canaries map[string]string, responses []string, paths ...string) string {
	e.t.Helper()
	for _, p := range paths {
		responses = append(responses, string(e.must("GET", p, nil, nil, nil).Body))
	}
	logs := e.allLogs()
	for what, c := range canaries {
		for _, r := range responses {
			if strings.Contains(r, c) {
				e.t.Fatalf("a response carries %s: %s", what, r)
			}
		}
		if strings.Contains(logs, c) {
			e.t.Fatalf("the logs carry %s", what)
		}
	}
	files := 0
	err := filepath.WalkDir(e.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if filepath.Base(filepath.Dir(path)) == "token" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for what, c := range canaries {
			if bytes.Contains(b, []byte(c)) {
				e.t.Errorf("%s holds %s", path, what)
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if files == 0 {
		e.t.Fatal("the canary search found no file to search")
	}
	return logs
}
