package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// guard bounds every wait for a real event (a process ending, a daemon
// becoming ready); it only turns a hang into a failure.
const guard = 30 * time.Second

var operator = kernel.WithActor(context.Background(), "operator:local")

// syncBuffer collects log lines from several goroutines.
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

// shortDir is a fresh owner-only directory with a short path, so that the
// sockets inside it fit; removed when the test ends.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ocd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s")
}

type running struct {
	t      *testing.T
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
	client *client.Client
	once   sync.Once
}

func options(t *testing.T, state string, logs io.Writer) Options {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		StateDir:   state,
		Logger:     slog.New(slog.NewJSONHandler(logs, nil)),
		Executable: self,
		Version:    "test",
	}
}

// start builds and serves a daemon on state; it stops when the test ends.
func start(t *testing.T, state string, mod ...func(*Options)) *running {
	t.Helper()
	logs := &syncBuffer{}
	opts := options(t, state, logs)
	for _, m := range mod {
		m(&opts)
	}
	ready := make(chan Info, 1)
	opts.Ready = func(i Info) { ready <- i }
	d, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, d: d, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { r.done <- errors.Join(d.Serve(ctx), d.Close()) }()
	t.Cleanup(r.stop)
	select {
	case info := <-ready:
		r.client = client.New(info.Socket, client.TokenFile(info.TokenFile))
	case err := <-r.done:
		t.Fatalf("the daemon stopped before it was ready: %v", err)
	case <-time.After(guard):
		t.Fatal("the daemon did not become ready")
	}
	return r
}

func (r *running) stop() {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				r.t.Errorf("daemon: %v", err)
			}
		case <-time.After(guard):
			r.t.Error("the daemon did not stop")
		}
	})
}

// create makes Work on the scope's binding the way the management API
// does, and wakes the loop.
func (r *running) create(scope, binding string) storage.Work {
	r.t.Helper()
	res, err := r.d.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: scope, Binding: binding})
	if err != nil {
		r.t.Fatal(err)
	}
	r.d.Wake()
	return res.Work
}

// until polls storage until cond holds for the Work; the wait is for a real
// process, bounded by guard.
func (r *running) until(id string, what string, cond func(storage.Work) bool) storage.Work {
	r.t.Helper()
	deadline := time.Now().Add(guard)
	for {
		w, err := r.d.store.GetWork(context.Background(), id)
		if err == nil && cond(w) {
			return w
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("Work %s never became %s (last: %+v, %v)\nlogs:\n%s", id, what, w, err, r.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *running) terminal(id string) storage.Work {
	r.t.Helper()
	return r.until(id, "terminal", func(w storage.Work) bool { return w.State.Terminal() })
}

func (r *running) executions(workID string) []storage.Execution {
	r.t.Helper()
	exes, err := r.d.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: workID, Page: storage.Page{Limit: 10}})
	if err != nil {
		r.t.Fatal(err)
	}
	return exes
}

func (r *running) log(exe storage.Execution) string {
	r.t.Helper()
	arts, err := r.d.store.ListArtifacts(context.Background(), &storage.ListArtifactsParams{Execution: exe.ID, Page: storage.Page{Limit: 10}})
	if err != nil || len(arts) != 1 {
		r.t.Fatalf("artifacts of %s: %+v %v", exe.ID, arts, err)
	}
	_, f, err := r.d.arts.Open(context.Background(), arts[0].ID)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestDefaultConfigRunsWorkEndToEnd(t *testing.T) {
	state := shortDir(t)
	r := start(t, state)

	h, err := r.client.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Generation != 1 {
		t.Fatalf("health = %+v, want ok at generation 1", h)
	}
	for path, want := range map[string]os.FileMode{
		state: 0o700, filepath.Join(state, statedir.SocketName): 0o600,
		statedir.OwnerTokenPath(state): 0o600, filepath.Join(state, DatabaseFile): 0o600,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("%s has mode %04o, want %04o", path, got, want)
		}
	}
	// bin/os is a copy of the daemon's binary (a link could point into a
	// `go run` build directory that vanishes).
	if fi, err := os.Lstat(filepath.Join(state, BinDir, OSName)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/os is %v (%v), want a regular file of mode 0755", fi, err)
	} else if same, err := sameBytes(filepath.Join(state, BinDir, OSName), r.d.opts.Executable); err != nil || !same {
		t.Errorf("bin/os is not a copy of the daemon's binary (%v)", err)
	}

	w := r.create(bootstrap.DefaultScope, bootstrap.DefaultBinding)
	w = r.terminal(w.ID)
	if w.State != storage.WorkSucceeded {
		t.Fatalf("Work ended %s (%s %s), want succeeded\nlogs:\n%s", w.State, w.BlockedReason, w.OutcomeMessage, r.logs)
	}
	exes := r.executions(w.ID)
	if len(exes) != 1 || exes[0].Result != storage.ResultSucceeded || exes[0].ExitCode == nil || *exes[0].ExitCode != 0 {
		t.Fatalf("executions = %+v, want one that succeeded", exes)
	}
	out := r.log(exes[0])
	if want := "Open Conduit ran Work " + w.ID + " in scope setup"; !strings.Contains(out, want) {
		t.Errorf("log %q does not say %q", out, want)
	}
	// The process reached its toolbelt through os on its own socket.
	var ctxOut struct {
		Work struct {
			ID string `json:"id"`
		} `json:"work"`
	}
	line := out[strings.Index(out, "{"):]
	if err := json.Unmarshal([]byte(line), &ctxOut); err != nil || ctxOut.Work.ID != w.ID {
		t.Errorf("os call read_context printed %q (%v), want the Work's context", line, err)
	}
	// The ended execution's run directory goes, and its tokens are revoked.
	dir := filepath.Join(state, "runs", runs.Key(exes[0].ID))
	deadline := time.Now().Add(guard)
	for exists(dir) && time.Now().Before(deadline) {
		r.d.Wake()
		time.Sleep(20 * time.Millisecond)
	}
	if exists(dir) {
		t.Errorf("run directory %s of an ended execution is still there", dir)
	}
	toks, err := r.d.store.ListExecutionTokens(context.Background(), exes[0].ID)
	if err != nil || len(toks) == 0 {
		t.Fatalf("tokens of %s: %v %v", exes[0].ID, toks, err)
	}
	for _, tok := range toks {
		if !tok.Revoked() {
			t.Errorf("token %s of an ended execution is not revoked", tok.ID)
		}
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestSecondDaemonOnTheSameStateIsRefused(t *testing.T) {
	state := shortDir(t)
	start(t, state)
	_, err := New(context.Background(), options(t, state, io.Discard))
	var held *statedir.LockHeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Fatalf("second daemon: %v, want the lock held by pid %d", err, os.Getpid())
	}
}

func TestUnsafeStateDirectoryIsRefused(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), options(t, state, io.Discard))
	var unsafe *statedir.UnsafeDirError
	if !errors.As(err, &unsafe) || unsafe.Path != state || !strings.Contains(err.Error(), "chmod 700 "+state) {
		t.Fatalf("New on a 0755 directory: %v, want a refusal naming %s and the fix", err, state)
	}
	if exists(filepath.Join(state, DatabaseFile)) {
		t.Error("storage was opened in a refused directory")
	}
}

func TestInvalidConfigFileStopsTheStart(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	bad := `{"version": 1, "scopes": {"x": {"bindings": {"b": {"executor": "nope"}}}}, "extra": true}`
	if err := os.WriteFile(filepath.Join(state, ConfigFile), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), options(t, state, io.Discard))
	var ce *configsvc.FileError
	if !errors.As(err, &ce) || len(ce.Diagnostics) == 0 {
		t.Fatalf("New with an invalid config.json: %v, want its diagnostics", err)
	}
	if !strings.Contains(err.Error(), "/extra") {
		t.Errorf("error %q does not point at the unknown field", err)
	}
	// The lock was released: a daemon can start once the file is fixed.
	if err := os.Remove(filepath.Join(state, ConfigFile)); err != nil {
		t.Fatal(err)
	}
	start(t, state)
}

// fifoConfig is a configuration whose job writes a mark, waits on a fifo
// the test controls, and exits with the status the test writes.
func fifoConfig(t *testing.T, state string) (fifo, mark string) {
	t.Helper()
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(state)
	fifo, mark = filepath.Join(dir, "fifo"), filepath.Join(dir, "mark")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `echo started >> "$MARK"; read code < "$FIFO"; echo "released with $code"; exit "$code"`
	cfg := map[string]any{
		"version": 1,
		"scopes": map[string]any{"t": map[string]any{
			"authorization": map[string]any{"operations": []string{"declare_outcome"}},
			"bindings": map[string]any{"job": map[string]any{
				"executor":   "shell",
				"config":     map[string]any{"command": []string{"sh", "-c", script}, "env": map[string]string{"FIFO": fifo, "MARK": mark}},
				"operations": []string{"declare_outcome"},
			}},
		}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(state, ConfigFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo, mark
}

// release writes code into the fifo, which the job reads once.
func release(t *testing.T, fifo, code string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(code + "\n")
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

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q (has %q)", path, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestShutdownKeepsTheProcessAndTheNextDaemonAdoptsIt(t *testing.T) {
	state := shortDir(t)
	fifo, mark := fifoConfig(t, state)
	first := start(t, state)
	w := first.create("t", "job")
	waitFile(t, mark, "started")
	exe := first.executions(w.ID)[0]
	runDir := filepath.Join(state, "runs", runs.Key(exe.ID))
	oldToken, err := os.ReadFile(filepath.Join(runDir, "token", "token"))
	if err != nil {
		t.Fatal(err)
	}
	first.stop()

	// The process outlived the daemon, and so did its run directory.
	if !exists(runDir) {
		t.Fatal("shutdown removed the run directory of a running execution")
	}
	second := start(t, state)
	if got := second.d.Info().Owner; got == first.d.Info().Owner {
		t.Fatalf("the second daemon reused the owner id %s", got)
	}
	adopted := second.until(w.ID, "adopted", func(storage.Work) bool {
		exes := second.executions(w.ID)
		return len(exes) == 1 && exes[0].Epoch == 2 && exes[0].Owner == second.d.Info().Owner
	})
	if adopted.State != storage.WorkRunning {
		t.Fatalf("adopted Work is %s, want running", adopted.State)
	}
	newToken, err := os.ReadFile(filepath.Join(runDir, "token", "token"))
	if err != nil || bytes.Equal(newToken, oldToken) {
		t.Fatalf("the adopted execution's token was not rotated (%v)", err)
	}
	release(t, fifo, "3")
	w = second.terminal(w.ID)
	exes := second.executions(w.ID)
	if w.State != storage.WorkFailed || len(exes) != 1 || exes[0].ExitCode == nil || *exes[0].ExitCode != 3 {
		t.Fatalf("Work %s, executions %+v: want failed with the real exit status 3", w.State, exes)
	}
	if b, _ := os.ReadFile(mark); strings.Count(string(b), "started") != 1 {
		t.Errorf("the job ran %d times, want once", strings.Count(string(b), "started"))
	}
	if out := second.log(exes[0]); !strings.Contains(out, "released with 3") {
		t.Errorf("log %q misses the adopted process's output", out)
	}
}

// An owner's token file that other users can read is made owner-only at
// start, and the daemon says so (with the advice to rotate); the token
// still works.
func TestOpenOwnerTokenFileIsRepairedWithAWarning(t *testing.T) {
	state := shortDir(t)
	r := start(t, state)
	r.stop()
	path := statedir.OwnerTokenPath(state)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	r = start(t, state)
	if got := mode(t, path); got != 0o600 {
		t.Fatalf("token file mode %04o after start, want 0600", got)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "the owner's token file was open to other users") || !strings.Contains(logs, `"mode_was":"0644"`) {
		t.Fatalf("no warning about the repaired token file:\n%s", logs)
	}
	if _, err := r.client.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Health says starting while the daemon's start-up (adoption, the first
// round and sweep) is under way, and ready once it is done: the first
// round is held until the test has seen starting.
func TestHealthSaysStartingUntilReady(t *testing.T) {
	state := shortDir(t)
	opts := options(t, state, &syncBuffer{})
	inRound, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	opts.ticked = func() {
		once.Do(func() {
			close(inRound)
			<-release
		})
	}
	ready := make(chan struct{})
	opts.Ready = func(Info) { close(ready) }
	d, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- errors.Join(d.Serve(ctx), d.Close()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	info := d.Info()
	c := client.New(info.Socket, client.TokenFile(info.TokenFile))
	<-inRound
	h, err := c.Health(context.Background())
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	if h.Status != "ok" || h.State != "starting" {
		close(release)
		t.Fatalf("health during start-up = %+v, want ok and starting", h)
	}
	close(release)
	<-ready
	if h, err := c.Health(context.Background()); err != nil || h.Status != "ok" || h.State != "ready" {
		t.Fatalf("health once ready = %+v, %v, want ok and ready", h, err)
	}
}
