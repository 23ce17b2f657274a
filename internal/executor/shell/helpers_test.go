package shell

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// guard bounds every wait on a real process: it only turns a hang into a
// failure, nothing is timed against it.
const guard = 30 * time.Second

// timers is an After that the test fires itself.
type timers struct{ calls chan timerCall }

type timerCall struct {
	d    time.Duration
	fire chan time.Time
}

func (tm *timers) After(d time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	tm.calls <- timerCall{d: d, fire: c}
	return c
}

// next returns the next timer the executor asked for.
func (tm *timers) next(t *testing.T) timerCall {
	t.Helper()
	select {
	case c := <-tm.calls:
		return c
	case <-time.After(guard):
		t.Fatal("the executor never asked for a timer")
		return timerCall{}
	}
}

type bundle struct {
	exec   *Executor
	opts   Options
	timers *timers
	clock  *clock.Fake
	dir    string // the execution directory
	tmp    string // for the test's own files (fifos, toolbelt dir)
}

func setup(t *testing.T, change ...func(*Options)) *bundle {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{
		timers: &timers{calls: make(chan timerCall, 64)},
		clock:  clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)),
		dir:    filepath.Join(t.TempDir(), "exe"),
		tmp:    t.TempDir(),
	}
	b.opts = Options{Supervisor: self, Clock: b.clock, After: b.timers.After}
	for _, c := range change {
		c(&b.opts)
	}
	if b.exec, err = New(b.opts); err != nil {
		t.Fatal(err)
	}
	// A failed test may leave a segment running: end its group.
	roots := []string{filepath.Dir(b.dir), b.tmp}
	t.Cleanup(func() {
		for _, root := range roots {
			filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.Name() != recordFile {
					return nil
				}
				var rec record
				if ok, _ := readJSONFile(filepath.Dir(path), recordFile, &rec); ok {
					if st, err := readProcStat(rec.PID); err == nil && st.Start == rec.Start && st.State != 'Z' {
						unix.Kill(-rec.PID, unix.SIGKILL)
					}
				}
				return nil
			})
		}
	})
	return b
}

// another returns a second Executor on the same options, as a restarted
// daemon would have.
func (b *bundle) another(t *testing.T) *Executor {
	t.Helper()
	e, err := New(b.opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (b *bundle) request(t *testing.T, cfg Config) executor.RunRequest {
	t.Helper()
	m := map[string]any{"command": cfg.Command}
	if cfg.Env != nil {
		m["env"] = cfg.Env
	}
	if cfg.Dir != "" {
		m["dir"] = cfg.Dir
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return executor.RunRequest{
		ExecutionID: "exe_01TEST",
		WorkID:      "wrk_01TEST",
		ScopeID:     "setup",
		BindingID:   "shell",
		Epoch:       1,
		Config:      raw,
		Dir:         b.dir,
	}
}

type runResult struct {
	res executor.Result
	err error
}

// start runs fn on its own goroutine, as the scheduler does.
func start(fn func() (executor.Result, error)) <-chan runResult {
	ch := make(chan runResult, 1)
	go func() {
		res, err := fn()
		ch <- runResult{res, err}
	}()
	return ch
}

func await(t *testing.T, ch <-chan runResult) (executor.Result, error) {
	t.Helper()
	select {
	case r := <-ch:
		return r.res, r.err
	case <-time.After(guard):
		t.Fatal("the segment never ended")
		return executor.Result{}, nil
	}
}

func (b *bundle) fifo(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(b.tmp, name)
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readFifo waits for the command to write a line to the fifo and returns it.
func readFifo(t *testing.T, path string) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(path) // blocks until a writer opens it
		ch <- strings.TrimSpace(string(b))
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(guard):
		t.Fatal("the command never became ready")
		return ""
	}
}

// release lets a command blocked reading the fifo go on.
func release(t *testing.T, path string) {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- os.WriteFile(path, []byte("go\n"), 0o600) }()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("the command never read its gate")
	}
}

func pids(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("not a pid list: %q", s)
		}
		out = append(out, n)
	}
	return out
}

func mustRecord(t *testing.T, dir string) record {
	t.Helper()
	var rec record
	ok, err := readJSONFile(dir, recordFile, &rec)
	if err != nil || !ok {
		t.Fatalf("no supervisor record: ok=%v err=%v", ok, err)
	}
	return rec
}

func readLog(t *testing.T, res executor.Result) string {
	t.Helper()
	if len(res.Artifacts) != 1 {
		t.Fatalf("artifacts = %+v, want the log", res.Artifacts)
	}
	a := res.Artifacts[0]
	if a.Name != "log" || a.MediaType != "text/plain; charset=utf-8" {
		t.Fatalf("artifact = %+v", a)
	}
	b, err := os.ReadFile(a.Path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gone asserts that no process of group pgid is left (the group's id is
// free again) and that each pid is gone too.
func gone(t *testing.T, pgid int, pids ...int) {
	t.Helper()
	if err := unix.Kill(-pgid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("kill(-%d, 0) = %v, want ESRCH: the process group is still there", pgid, err)
	}
	for _, pid := range pids {
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("kill(%d, 0) = %v, want ESRCH", pid, err)
		}
	}
}

// alive asserts that pid is a live process (not a zombie).
func alive(t *testing.T, pid int) {
	t.Helper()
	st, err := readProcStat(pid)
	if err != nil || st.State == 'Z' {
		t.Fatalf("process %d is not running (state %q, err %v)", pid, st.State, err)
	}
}

// waitExit waits for a process that is not the test's child to exit.
func waitExit(t *testing.T, pid int, start uint64) {
	t.Helper()
	w, err := watchPID(pid, start)
	if errors.Is(err, errNoProcess) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	select {
	case <-w.Done():
	case <-time.After(guard):
		t.Fatalf("process %d never exited", pid)
	}
}

// reaped waits until the first executor has reaped the supervisor it started
// for b.dir.
func (b *bundle) reaped(t *testing.T) {
	t.Helper()
	done := b.exec.sup.Reaped(b.dir)
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatal("the supervisor was never reaped")
	}
}
