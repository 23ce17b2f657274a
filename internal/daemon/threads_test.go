package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// osThreads is the Threads line of /proc/self/status: the OS threads of
// this process, which is the daemon.
func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// threadsInWait counts the threads of this process blocked in wait4 or
// waitid (/proc/self/task/<tid>/syscall names the system call a thread
// is in): what a blocking wait for a child holds.
func threadsInWait(t *testing.T) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/syscall")
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		if nr, err := strconv.Atoi(f[0]); err == nil && (nr == unix.SYS_WAIT4 || nr == unix.SYS_WAITID) {
			n++
		}
	}
	return n
}

// The daemon observes live executions without an OS thread each: with 0,
// 16 and 64 sleeping shell jobs running it logs its threads and goroutines
// (docs/performance.md reports them), and none of its threads may be
// blocked waiting for a child (before, each execution held one there, so
// the threads grew with them). Nothing is timed: the test waits for each
// command to say it started.
func TestDaemonThreadsDoNotGrowWithLiveExecutions(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(filepath.Dir(state), "mark")
	cfg := map[string]any{
		"version": 1,
		"limits":  map[string]any{"max_running": 64},
		"scopes": map[string]any{"t": map[string]any{
			"bindings": map[string]any{"sleeper": map[string]any{
				"executor": "shell",
				"config": map[string]any{
					"command": []string{"sh", "-c", `echo started >> "$MARK"; exec sleep 600`},
					"env":     map[string]string{"MARK": mark},
				},
			}},
		}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(state, ConfigFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	var works []string
	t.Cleanup(func() {
		for _, id := range works {
			if _, err := r.d.ctl.CancelWork(operator, kernel.ControlRequest{Target: id, Reason: "test over"}); err != nil {
				t.Errorf("cancel %s: %v", id, err)
			}
		}
		r.d.Wake()
		// The Work is cancelled at once; its attempt ends once its
		// process has been stopped and reaped.
		for _, id := range works {
			r.until(id, "cancelled with its attempt ended", func(w storage.Work) bool {
				exes := r.executions(id)
				return w.State == storage.WorkCancelled && len(exes) == 1 && exes[0].State == storage.ExecutionFinished
			})
		}
	})
	threads, waiting := map[int]int{}, map[int]int{}
	for _, live := range []int{0, 16, 64} {
		for len(works) < live {
			works = append(works, r.create("t", "sleeper").ID)
		}
		deadline := time.Now().Add(guard)
		for {
			got, _ := os.ReadFile(mark)
			if n := bytes.Count(got, []byte("started")); n == live {
				break
			} else if n > live || time.Now().After(deadline) {
				t.Fatalf("%d commands started, want %d\nlogs:\n%s", n, live, r.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		threads[live], waiting[live] = osThreads(t), threadsInWait(t)
		t.Logf("live executions %2d: %3d OS threads (%2d blocked in a wait), %4d goroutines", live, threads[live], waiting[live], runtime.NumGoroutine())
	}
	// The runtime keeps every thread it ever made, so the thread count
	// alone depends on what ran before in this process; a thread blocked
	// in a wait does not. What waits with no execution live (another
	// test's child, such as the PostgreSQL tests' cluster) is not the
	// executions'.
	if waiting[16] > waiting[0] || waiting[64] > waiting[0] {
		t.Errorf("threads blocked waiting for a child: %v by live executions; the daemon holds a thread per execution", waiting)
	}
}
