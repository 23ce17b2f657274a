package claudecode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
	"github.com/open-conduit/open-conduit/internal/executor/proc"
)

// Canaries: neither may appear in any file the execution keeps.
const (
	apiKeyCanary = "sk-canary-api-key-5f3a9c"
	tokenCanary  = "tok-canary-execution-token-77e1"
)

// guard bounds every wait for a real event.
const guard = time.Minute

const parkGrace = 7 * time.Second

// fakeClaude is a program that behaves like `claude -p`: it records its
// argv, stdin and environment beside itself (outside the execution
// directory), prints the stream in stream.jsonl beside itself, and then
// hangs when a file "hang" is there, or exits with the status in "exit".
const fakeClaude = `#!/bin/sh
here=$(dirname "$0")
printf '%s\n' "$@" > "$here/argv"
cat > "$here/stdin"
env > "$here/env"
pwd > "$here/cwd"
cat "$here/stream.jsonl"
if [ -e "$here/hang" ]; then exec sleep 1000; fi
exit $(cat "$here/exit" 2>/dev/null || echo 0)
`

// timers is an After the test fires itself.
type timers struct{ calls chan timerCall }

type timerCall struct {
	d time.Duration
	c chan time.Time
}

func (tm *timers) After(d time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	tm.calls <- timerCall{d: d, c: c}
	return c
}

// fire waits for a timer of d and fires it; other timers are dropped
// (never fired).
func (tm *timers) fire(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(guard)
	for {
		select {
		case c := <-tm.calls:
			if c.d == d {
				c.c <- time.Now()
				return
			}
		case <-deadline:
			t.Fatalf("no timer of %v was ever asked for", d)
		}
	}
}

type bundle struct {
	tmp, bin, dir string
	timers        *timers
	exec          *agentrun.Executor
	ctx           executor.ExecutionContext
}

func setup(t *testing.T) *bundle {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	b := &bundle{tmp: tmp, bin: filepath.Join(tmp, "bin"), dir: filepath.Join(tmp, "exe"), timers: &timers{calls: make(chan timerCall, 256)}}
	for _, d := range []string{b.bin, filepath.Join(tmp, "tb"), filepath.Join(tmp, "run"), filepath.Join(tmp, "playbooks", "skills", "answer-issue")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(b.bin, "claude"), fakeClaude, 0o700)
	write(t, filepath.Join(tmp, "tb", "os"), "#!/bin/sh\nexit 0\n", 0o700)
	write(t, filepath.Join(tmp, "run", "token"), tokenCanary+"\n", 0o600)
	write(t, filepath.Join(tmp, "playbooks", "skills", "answer-issue", "SKILL.md"), "---\nname: answer-issue\ndescription: d\n---\nAnswer the issue.\n", 0o600)
	b.ctx = executor.ExecutionContext{
		Token: tokenCanary, ToolbeltEndpoint: filepath.Join(tmp, "run", "sock"), ToolbeltTokenFile: filepath.Join(tmp, "run", "token"),
		ToolbeltDir: filepath.Join(tmp, "tb"), PlaybookDir: filepath.Join(tmp, "playbooks"),
	}
	b.exec = b.executor(t, self)
	return b
}

func (b *bundle) executor(t *testing.T, self string) *agentrun.Executor {
	t.Helper()
	e, err := New(agentrun.Options{Supervisor: self, Clock: clock.System{}, After: b.timers.After, ParkGrace: parkGrace, Workspaces: filepath.Join(b.tmp, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) config() json.RawMessage {
	return json.RawMessage(`{"sandbox": {"enabled": false}, "binary": "` + filepath.Join(b.bin, "claude") + `", "model": "claude-sonnet-4-5", "playbook": "answer-issue",
		"base_url": "http://127.0.0.1:9", "max_turns": 9,
		"prompt": "Answer {{range .Events}}{{.Type}} #{{.Data.issue.number}}{{end}}"}`)
}

func (b *bundle) request(epoch int64) executor.RunRequest {
	return executor.RunRequest{
		ExecutionID: "exe-1", WorkID: "work-1", ScopeID: "scope-a", BindingID: "agent", Epoch: epoch,
		Config: b.config(), Env: map[string]string{"ANTHROPIC_API_KEY": apiKeyCanary, "OTHER_SECRET": "other-" + apiKeyCanary},
		Dir: b.dir, Deadline: time.Now().Add(time.Hour), Context: b.ctx,
		Events: []executor.Event{{ID: "ev-1", Seq: 1, Type: "issue.opened", Source: "github", Data: json.RawMessage(`{"issue": {"number": 42}}`)}},
	}
}

func (b *bundle) stream(t *testing.T, lines ...string) {
	t.Helper()
	write(t, filepath.Join(b.bin, "stream.jsonl"), strings.Join(lines, "\n")+"\n", 0o600)
}

func (b *bundle) hang(t *testing.T, on bool) {
	t.Helper()
	if on {
		write(t, filepath.Join(b.bin, "hang"), "", 0o600)
	} else {
		os.Remove(filepath.Join(b.bin, "hang"))
	}
}

func (b *bundle) recorded(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.bin, name))
	if err != nil {
		t.Fatalf("the fake agent recorded no %s: %v", name, err)
	}
	return string(data)
}

// waitRecorded waits until the fake agent has recorded name (it is
// running), through inotify on its directory.
func (b *bundle) waitRecorded(t *testing.T, name string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, b.bin, unix.IN_CLOSE_WRITE); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stat(filepath.Join(b.bin, name)); err == nil {
				return
			}
			if _, err := unix.Read(fd, buf); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatalf("the fake agent never recorded %s", name)
	}
}

type outcome struct {
	res executor.Result
	err error
}

func start(f func() (executor.Result, error)) <-chan outcome {
	c := make(chan outcome, 1)
	go func() {
		res, err := f()
		c <- outcome{res, err}
	}()
	return c
}

func await(t *testing.T, c <-chan outcome) (executor.Result, error) {
	t.Helper()
	select {
	case o := <-c:
		return o.res, o.err
	case <-time.After(guard):
		t.Fatal("the segment never ended")
		return executor.Result{}, nil
	}
}

// noCanary asserts that no file under dir holds the API key or the token.
func noCanary(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeType != 0 {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for _, c := range []string{apiKeyCanary, tokenCanary} {
			if bytes.Contains(data, []byte(c)) {
				t.Errorf("%s holds a secret canary", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the execution directory holds no file to search")
	}
}

// groupGone asserts that the segment's process group has no process left.
func groupGone(t *testing.T, segDir string) {
	t.Helper()
	var rec proc.Record
	if ok, err := proc.ReadJSONFile(segDir, proc.RecordFile, &rec); !ok || err != nil {
		t.Fatalf("no supervisor record in %s: %v", segDir, err)
	}
	if err := unix.Kill(-rec.PID, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("kill(-%d, 0) = %v, want ESRCH: the agent's process group is still there", rec.PID, err)
	}
}

func mustRun(t *testing.T, e *agentrun.Executor, req executor.RunRequest) executor.Result {
	t.Helper()
	res, err := e.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
