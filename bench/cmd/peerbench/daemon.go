package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/osclient"
)

// The project: the real open-conduit daemon, built from the repository's
// cmd/open-conduit and started on a fresh state directory, driven only
// through its two public clients (client over the management socket,
// osclient over each execution's own toolbelt socket).

// emitterScript is the emitting binding's job: it writes the toolbelt
// endpoint and token file its execution was given (as an execution's own
// program would read them) into the control directory, then sleeps until
// the benchmark cancels its Work.
const emitterScript = `f="$CTL/$OPEN_CONDUIT_EXECUTION_ID"
printf '%s\n%s\n' "$OS_ENDPOINT" "$OS_TOKEN_FILE" > "$f.tmp" && mv "$f.tmp" "$f.env" || exit 99
exec sleep 100000`

// daemonConfig is the configuration of the first start: a scope whose
// binding emits, one whose binding runs shell true, and one without
// bindings that the events are seeded into. running is max_running.
func daemonConfig(ctl string, running int) []byte { return daemonConfigWith(ctl, running, false) }

// daemonConfigWith is daemonConfig, with noop also the scope schedNoop
// whose binding runs the no-op package's executor (installed first).
func daemonConfigWith(ctl string, running int, noop bool) []byte {
	cfg := map[string]any{
		"version": 1,
		"limits":  map[string]any{"causal_per_minute": 100000, "max_running": running},
		"scopes": map[string]any{
			"emit": map[string]any{
				"authorization": map[string]any{"operations": []string{"emit"}},
				"bindings": map[string]any{"emitter": map[string]any{
					"executor":   "shell",
					"config":     map[string]any{"command": []string{"sh", "-c", emitterScript}, "env": map[string]string{"CTL": ctl}},
					"operations": []string{"emit"},
				}},
			},
			"sched": map[string]any{
				"bindings": map[string]any{"noop": map[string]any{
					"executor": "shell",
					"config":   map[string]any{"command": []string{"true"}},
				}},
			},
			"seed": map[string]any{},
		},
	}
	if noop {
		cfg["scopes"].(map[string]any)[schedNoop] = map[string]any{
			"bindings": map[string]any{"noop": map[string]any{"executor": noopExecutor}},
		}
		cfg["extensions"] = map[string]any{noopPackageName: map[string]any{"enabled": true}}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// buildDaemon builds the open-conduit binary from the repository at repo
// into dir, with the repository's own go.mod (not this module's).
func buildDaemon(repo, dir string) (string, error) {
	bin := filepath.Join(dir, "open-conduit")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/open-conduit")
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building open-conduit in %s: %w", repo, err)
	}
	return bin, nil
}

// daemon is a running daemon on its own state directory.
type daemon struct {
	root, state, ctl string
	cmd              *exec.Cmd
	exited           chan struct{}
	c                *client.Client
	logPath          string
}

// startDaemon starts bin on a fresh state directory under root and waits
// until it is ready.
// profile, when not empty, is the new file the daemon writes its CPU
// profile to (its hidden --cpu-profile).
func startDaemon(ctx context.Context, bin, root string, running int, profile string) (*daemon, error) {
	d := &daemon{root: root, state: filepath.Join(root, "s"), ctl: filepath.Join(root, "c"), exited: make(chan struct{})}
	for _, dir := range []string{d.state, d.ctl} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(d.state, "config.json"), daemonConfig(d.ctl, running), 0o600); err != nil {
		return nil, err
	}
	args := []string{}
	if profile != "" {
		args = append(args, "--cpu-profile", profile)
	}
	if err := d.launch(ctx, bin, args...); err != nil {
		return nil, err
	}
	return d, nil
}

// launch starts bin's daemon on d's state directory with args added, its
// output in <root>/daemon.log and no OPEN_CONDUIT_ or PG variable of this
// process's environment, and waits until it is ready (stopping it when it
// does not get there).
func (d *daemon) launch(ctx context.Context, bin string, args ...string) error {
	d.logPath = filepath.Join(d.root, "daemon.log")
	logf, err := os.Create(d.logPath)
	if err != nil {
		return err
	}
	d.cmd = exec.Command(bin, append([]string{"daemon", "--state", d.state, "--log-level", "warn"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPEN_CONDUIT_") && !strings.HasPrefix(kv, "PG") {
			d.cmd.Env = append(d.cmd.Env, kv)
		}
	}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	go func() {
		d.cmd.Wait()
		logf.Close()
		close(d.exited)
	}()
	d.c = client.New(filepath.Join(d.state, "management.sock"), client.TokenFile(filepath.Join(d.state, "private", "operator.token")))
	err = poll(ctx, "the daemon ready", time.Minute, func() (bool, error) {
		select {
		case <-d.exited:
			return false, fmt.Errorf("the daemon exited; its log is %s", d.logPath)
		default:
		}
		h, err := d.c.Health(ctx)
		return err == nil && h.State == api.HealthReady, nil
	})
	if err != nil {
		d.stop()
		return err
	}
	return nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop stops the daemon (SIGTERM, then SIGKILL) and ends every execution
// process group it left.
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	killExecutions(d.state)
}

// killExecutions ends the process group of every supervisor the shell
// executor recorded under state, so that no sleeping job outlives a round.
func killExecutions(state string) {
	files, _ := filepath.Glob(filepath.Join(state, "executions", "*", "supervisor.json"))
	for _, path := range files {
		var rec struct {
			PID int `json:"pid"`
		}
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 1 {
			_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		}
	}
}

// profilePath is round i's CPU profile of what (daemon, inproc) under dir,
// or "" for none.
func profilePath(dir string, i int, what string) string {
	if dir == "" {
		return ""
	}
	abs, err := filepath.Abs(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", what, i+1)))
	if err != nil {
		return ""
	}
	return abs
}

// poll calls cond every 20 ms until it holds, it fails, or bound passes.
func poll(ctx context.Context, what string, bound time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(bound)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not happen within %s", what, bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// emitResult is one round of the toolbelt emit.
type emitResult struct {
	calls      int
	elapsed    time.Duration
	latencies  []time.Duration
	serverCPU  time.Duration
	throughput float64
	threads0   int // daemon threads with no execution
	threadsN   int // daemon threads with the executions live and sleeping
}

// runEmit starts executions shell executions that sleep, then calls emit
// perExec times on each one's own socket, all executions at once.
func (d *daemon) runEmit(ctx context.Context, executions, perExec int) (*emitResult, error) {
	r := &emitResult{}
	var err error
	if r.threads0, err = threads(d.pid()); err != nil {
		return nil, err
	}
	var works []string
	for range executions {
		w, err := d.c.CreateWork(ctx, client.CreateWorkRequest{Scope: "emit"}, nil)
		if err != nil {
			return nil, fmt.Errorf("creating emitting Work: %w", err)
		}
		works = append(works, w.Work.ID)
	}
	defer func() {
		for _, id := range works {
			_, _ = d.c.CancelWork(ctx, id, "benchmark round over", nil)
		}
		// The next phase starts with no attempt of this one left.
		_ = poll(ctx, "the emitting attempts ended", time.Minute, func() (bool, error) {
			for _, st := range []string{"running", "stopping"} {
				l, err := d.c.ListExecutions(ctx, client.ExecutionFilter{Scope: "emit", State: st, Page: client.Page{Limit: 1}})
				if err != nil || len(l.Items) > 0 {
					return false, err
				}
			}
			return true, nil
		})
	}()
	// Each execution writes its endpoint and token file once it runs.
	var envs []string
	err = poll(ctx, "every emitting execution running", 2*time.Minute, func() (bool, error) {
		envs, _ = filepath.Glob(filepath.Join(d.ctl, "*.env"))
		return len(envs) >= executions, nil
	})
	if err != nil {
		return nil, err
	}
	clients := make([]*osclient.Client, 0, executions)
	for _, path := range envs {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			return nil, fmt.Errorf("%s: want the endpoint and the token file", path)
		}
		c, err := osclient.New(lines[0], lines[1])
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients = append(clients, c)
	}
	if r.threadsN, err = threads(d.pid()); err != nil {
		return nil, err
	}
	cpu0, err := cpuTime(d.pid())
	if err != nil {
		return nil, err
	}
	lat := make([][]time.Duration, len(clients))
	errs := make(chan error, len(clients))
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perExec {
				input := fmt.Sprintf(`{"type":"bench.emitted","data":{"n":%d,"note":"peerbench"}}`, n)
				t0 := time.Now()
				resp, err := c.Call(ctx, osclient.CallRequest{Operation: "emit", Input: json.RawMessage(input)})
				if err != nil {
					errs <- fmt.Errorf("emit: %w", err)
					return
				}
				if resp.Replayed {
					errs <- errors.New("emit was replayed")
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	cpu1, err := cpuTime(d.pid())
	if err != nil {
		return nil, err
	}
	r.calls = len(clients) * perExec
	r.serverCPU = cpu1 - cpu0
	r.throughput = float64(r.calls) / r.elapsed.Seconds()
	for _, l := range lat {
		r.latencies = append(r.latencies, l...)
	}
	return r, nil
}

// The scheduling scopes: shell true, and the no-op package's executor.
const (
	schedShell = "sched"
	schedNoop  = "schednoop"
)

// runSched creates n Work in scope (schedShell or schedNoop), each by its
// own POST /v1/work (one transaction), from creators at once, and waits
// until none is left unfinished.
func (d *daemon) runSched(ctx context.Context, scope string, n, creators int) (*schedResult, error) {
	commits0, err := d.commits(ctx)
	if err != nil {
		return nil, err
	}
	cpu0, err := cpuTime(d.pid())
	if err != nil {
		return nil, err
	}
	children0 := descendantsCPU(d.pid())
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	errs := make(chan error, creators)
	var wg sync.WaitGroup
	start := time.Now()
	for range creators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				if _, err := d.c.CreateWork(ctx, client.CreateWorkRequest{Scope: scope}, nil); err != nil {
					errs <- fmt.Errorf("creating Work: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	err = poll(ctx, "every Work finished", 10*time.Minute, func() (bool, error) {
		for _, st := range []string{api.WorkReady, api.WorkRunning, api.WorkWaiting} {
			l, err := d.c.ListWork(ctx, client.WorkFilter{Scope: scope, State: st, Page: client.Page{Limit: 1}})
			if err != nil {
				return false, err
			}
			if len(l.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	noticed := time.Since(start)
	elapsed, err := finishedSpan(ctx, d.c, scope, start, n)
	if err != nil {
		return nil, err
	}
	cpu1, err := cpuTime(d.pid())
	if err != nil {
		return nil, err
	}
	children1 := descendantsCPU(d.pid())
	commits1, err := d.commits(ctx)
	if err != nil {
		return nil, err
	}
	for _, st := range []string{api.WorkFailed, api.WorkCancelled} {
		l, err := d.c.ListWork(ctx, client.WorkFilter{Scope: scope, State: st, Page: client.Page{Limit: 1}})
		if err != nil {
			return nil, err
		}
		if len(l.Items) > 0 {
			return nil, fmt.Errorf("a Work of scope %s ended %s; the daemon's log is %s", scope, st, d.logPath)
		}
	}
	return &schedResult{n: n, elapsed: elapsed, lag: noticed - elapsed, perSec: float64(n) / elapsed.Seconds(), cpu: cpu1 - cpu0, commits: commits1 - commits0, children: children1 - children0}, nil
}

// finishedSpan is the time from start to the last recorded finish of the
// n Work of scope created since start, read through c once all of them
// have finished. A round ends there, as River's ends at its last job's
// completion event: the poll that notices the end runs every 20 ms, and
// its lag would otherwise count against the project (about a tenth of a
// 300-Work round). A Work's updated_at is its finish, written in the
// transaction that finishes it.
func finishedSpan(ctx context.Context, c *client.Client, scope string, start time.Time, n int) (time.Duration, error) {
	start = start.Round(0) // wall clock, as the daemon's timestamps
	var last time.Time
	seen := 0
	page := client.Page{Limit: 500}
	for {
		l, err := c.ListWork(ctx, client.WorkFilter{Scope: scope, State: api.WorkSucceeded, Page: page})
		if err != nil {
			return 0, err
		}
		for _, w := range l.Items {
			if w.CreatedAt.Before(start) {
				continue
			}
			seen++
			if w.UpdatedAt.After(last) {
				last = w.UpdatedAt
			}
		}
		if l.NextCursor == "" {
			break
		}
		page.Cursor = l.NextCursor
	}
	if seen != n {
		return 0, fmt.Errorf("%d Work of scope %s succeeded in the round, want %d", seen, scope, n)
	}
	return last.Sub(start), nil
}

// commitsMetric is the daemon's count of committed write transactions:
// on both engines one per batch of group commit.
const commitsMetric = "open_conduit_store_commit_seconds_count"

// commits reads commitsMetric from the daemon's GET /metrics.
func (d *daemon) commits(ctx context.Context) (float64, error) {
	token, err := os.ReadFile(filepath.Join(d.state, "private", "operator.token"))
	if err != nil {
		return 0, err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", filepath.Join(d.state, "management.sock"))
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://daemon/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, commitsMetric+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("GET /metrics has no %s", commitsMetric)
}

// countFsyncs runs the scheduling workload of n Work with strace counting
// fsync and fdatasync calls of the daemon and every process it starts.
// It returns the count, or ok false when strace is missing.
func (d *daemon) countFsyncs(ctx context.Context, n, creators int) (calls int, ok bool, err error) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		return 0, false, nil
	}
	out := filepath.Join(d.root, "strace.txt")
	cmd := exec.Command(strace, "-q", "-f", "-c", "-o", out, "-e", "trace=fsync,fdatasync", "-p", strconv.Itoa(d.pid()))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, true, err
	}
	// strace announces nothing on its output when -o is given; wait for
	// its attachment to show in the daemon's status (TracerPid).
	if err := poll(ctx, "strace attached", time.Minute, func() (bool, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid()))
		return err == nil && !strings.Contains(string(b), "TracerPid:\t0\n"), nil
	}); err != nil {
		_ = cmd.Process.Kill()
		cmd.Wait()
		return 0, true, err
	}
	_, runErr := d.runSched(ctx, schedShell, n, creators)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil && runErr == nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return 0, true, err
		}
	}
	if runErr != nil {
		return 0, true, runErr
	}
	calls, err = straceCalls(out)
	return calls, true, err
}

// straceCalls sums the calls column of strace -c's summary for fsync and
// fdatasync.
func straceCalls(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 5 {
			continue
		}
		name := fs[len(fs)-1]
		if name != "fsync" && name != "fdatasync" {
			continue
		}
		// % time, seconds, usecs/call, calls, [errors], syscall
		n, err := strconv.Atoi(fs[3])
		if err != nil {
			return 0, fmt.Errorf("strace summary line %q: %w", sc.Text(), err)
		}
		total += n
	}
	return total, sc.Err()
}
