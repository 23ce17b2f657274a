package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// logJobs writes a configuration (before the first start) with two
// bindings in scope t: job prints two lines, blocks reading a fifo the
// test controls, prints the status it read and exits with it; quick
// prints one line and exits 0. Nothing in them waits on a timer.
func (e *env) logJobs() (fifo string) {
	e.t.Helper()
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		e.t.Fatal(err)
	}
	fifo = filepath.Join(e.root, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		e.t.Fatal(err)
	}
	job := `echo "line one"; echo "line two"; read code < "$FIFO"; echo "after $code"; exit "$code"`
	cfg := `{
  "version": 1,
  "scopes": {
    "t": {
      "bindings": {
        "job": {"executor": "shell", "config": {"command": ["sh", "-c", ` + strconv.Quote(job) + `], "env": {"FIFO": ` + strconv.Quote(fifo) + `}}},
        "quick": {"executor": "shell", "config": {"command": ["sh", "-c", "echo quick"]}}
      }
    }
  }
}`
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return fifo
}

func (e *env) createBound(scope, binding string) work {
	e.t.Helper()
	var out struct {
		Work work `json:"work"`
	}
	e.must("POST", "/v1/work", map[string]any{"scope": scope, "binding": binding}, key(), &out)
	return out.Work
}

// attempt waits for the Work's first attempt and returns it.
func (e *env) attempt(workID string) execution {
	e.t.Helper()
	var exes []execution
	until(e.t, "Work "+workID+"'s first attempt", func() bool {
		exes = e.executions(workID)
		return len(exes) > 0
	})
	return exes[0]
}

func (e *env) waitFinished(workID string) execution {
	e.t.Helper()
	var exe execution
	until(e.t, "Work "+workID+"'s attempt finishing", func() bool {
		exes := e.executions(workID)
		if len(exes) == 0 {
			return false
		}
		exe = exes[len(exes)-1]
		return exe.State == "finished"
	})
	return exe
}

// `work logs -f` shows the lines a running shell job prints before it
// ends, and ends when the attempt ends; the run history then lists a
// mixed history (succeeded, failed, cancelled) newest first, by its
// filters, and runs get and runs log show one attempt.
func TestWorkLogsFollowAndRunHistory(t *testing.T) {
	e := newEnv(t)
	fifo := e.logJobs()
	e.start()

	// 1. A followed log shows the job's lines while it is blocked.
	w1 := e.createBound("t", "job")
	exe1 := e.attempt(w1.ID)
	cmd := exec.Command(bins.openConduit, "work", "logs", w1.ID, "-f")
	cmd.Env = e.environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("work logs -f ended early (stderr %q)", stderr.String())
			}
			return l
		case <-time.After(guard):
			t.Fatal("work logs -f showed no line")
		}
		return ""
	}
	if a, b := next(), next(); a != "line one" || b != "line two" {
		t.Fatalf("followed lines %q %q", a, b)
	}
	// The job is still blocked on the fifo nobody has written: the lines
	// came before it ended.
	if w := e.getWork(w1.ID); w.State != "running" {
		t.Fatalf("Work %s is %s while its job blocks", w1.ID, w.State)
	}
	// What exists so far, through artifacts cat of the live attempt.
	if code, out, errOut := e.cli("artifacts", "cat", exe1.ID); code != 0 || out != "line one\nline two\n" {
		t.Fatalf("artifacts cat of the live log: exit %d %q %q", code, out, errOut)
	}
	release(t, fifo, 0)
	if l := next(); l != "after 0" {
		t.Fatalf("last line %q", l)
	}
	select {
	case _, ok := <-lines:
		if ok {
			t.Fatal("work logs -f went on after the last line")
		}
	case <-time.After(guard):
		t.Fatal("work logs -f did not end when the attempt ended")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("work logs -f: %v (stderr %q)", err, stderr.String())
	}
	e.waitWork(w1.ID, "succeeding", func(w work) bool { return w.State == "succeeded" })

	// 2. A failed attempt, a cancelled one and a quick one.
	w2 := e.createBound("t", "job")
	release(t, fifo, 3)
	exe2 := e.waitFinished(w2.ID)
	w3 := e.createBound("t", "job")
	exe3 := e.attempt(w3.ID)
	until(t, "the third job printing", func() bool {
		_, out, _ := e.cli("executions", "logs", exe3.ID)
		return out == "line one\nline two\n"
	})
	if code, _, errOut := e.cli("work", "cancel", w3.ID); code != 0 {
		t.Fatalf("work cancel: %d %s", code, errOut)
	}
	exe3 = e.waitFinished(w3.ID)
	w4 := e.createBound("t", "quick")
	exe4 := e.waitFinished(w4.ID)

	// 3. The run history.
	type run struct {
		Execution struct {
			ID        string    `json:"id"`
			Work      string    `json:"work"`
			Binding   string    `json:"binding"`
			Result    string    `json:"result"`
			ExitCode  *int      `json:"exit_code"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"execution"`
		WorkState    string `json:"work_state"`
		TriggerEvent string `json:"trigger_event"`
		TriggerType  string `json:"trigger_type"`
		DurationMS   int64  `json:"duration_ms"`
	}
	runs := func(args ...string) (ids []string, items []run) {
		t.Helper()
		var p page[run]
		e.cliJSON(&p, append([]string{"runs", "list"}, args...)...)
		for _, r := range p.Items {
			ids = append(ids, r.Execution.ID)
		}
		return ids, p.Items
	}
	ids, items := runs()
	if want := []string{exe4.ID, exe3.ID, exe2.ID, exe1.ID}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("runs list = %v, want newest first %v", ids, want)
	}
	results := []string{}
	for _, r := range items {
		results = append(results, r.Execution.Result)
		if r.TriggerType != "core.work.created" || r.TriggerEvent == "" || r.DurationMS < 0 {
			t.Errorf("run %+v", r)
		}
	}
	if got := strings.Join(results, " "); got != "succeeded cancelled failed succeeded" {
		t.Errorf("results %s", got)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--state", "failed"}, []string{exe2.ID}},
		{[]string{"--state", "cancelled"}, []string{exe3.ID}},
		{[]string{"--state", "succeeded"}, []string{exe4.ID, exe1.ID}},
		{[]string{"--binding", "quick"}, []string{exe4.ID}},
		{[]string{"--scope", "t", "--binding", "job", "--state", "succeeded"}, []string{exe1.ID}},
		{[]string{"--since", items[1].Execution.CreatedAt.Format(time.RFC3339Nano)}, []string{exe4.ID, exe3.ID}},
		{[]string{"--since", "1h"}, []string{exe4.ID, exe3.ID, exe2.ID, exe1.ID}},
		{[]string{"--scope", "elsewhere"}, nil},
	} {
		if got, _ := runs(tc.args...); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("runs list %v = %v, want %v", tc.args, got, tc.want)
		}
	}
	// A page and the way to the next one.
	code, out, errOut := e.cli("runs", "list", "--limit", "1")
	if code != 0 || !strings.Contains(out, exe4.ID) || strings.Contains(out, exe3.ID) || !strings.Contains(errOut, "--cursor") {
		t.Errorf("runs list --limit 1: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := e.cli("runs", "list", "--state", "done"); code != 2 && code != 1 || !strings.Contains(errOut, "state must be one of") {
		t.Errorf("runs list --state done: %d %q", code, errOut)
	}
	if code, _, errOut := e.cli("runs", "list", "--since", "last week"); code != 2 {
		t.Errorf("runs list --since 'last week': %d %q", code, errOut)
	}

	// 4. One attempt, its log, and the wide table.
	var got run
	e.cliJSON(&got, "runs", "get", exe2.ID)
	if got.Execution.Work != w2.ID || got.Execution.Result != "failed" || got.Execution.ExitCode == nil || *got.Execution.ExitCode != 3 || got.WorkState != "failed" {
		t.Errorf("runs get %s = %+v", exe2.ID, got)
	}
	if code, out, _ := e.cli("runs", "get", exe2.ID); code != 0 || !strings.Contains(out, "exit code") || !strings.Contains(out, "runs log "+exe2.ID) {
		t.Errorf("runs get text: %d %q", code, out)
	}
	for _, args := range [][]string{{"runs", "log", exe1.ID}, {"executions", "logs", exe1.ID}, {"work", "logs", w1.ID}, {"artifacts", "cat", exe1.ID}} {
		if code, out, errOut := e.cli(args...); code != 0 || out != "line one\nline two\nafter 0\n" {
			t.Errorf("%v: %d %q %q", args, code, out, errOut)
		}
	}
	if code, out, _ := e.cli("executions", "logs", exe2.ID, "--tail", "1"); code != 0 || out != "after 3\n" {
		t.Errorf("executions logs --tail 1: %d %q", code, out)
	}
	if code, out, _ := e.cli("runs", "table"); code != 0 || !strings.Contains(out, "TRIGGER TYPE") || !strings.Contains(out, exe3.ID) {
		t.Errorf("runs table: %d %q", code, out)
	}
	var raw json.RawMessage
	e.cliJSON(&raw, "runs", "table", "--state", "cancelled")
	if !strings.Contains(string(raw), exe3.ID) || strings.Contains(string(raw), exe2.ID) {
		t.Errorf("runs table --json: %s", raw)
	}
}
