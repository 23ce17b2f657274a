package agentruntest

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
	APIKeyCanary = "sk-canary-api-key-5f3a9c"
	TokenCanary  = "tok-canary-execution-token-77e1"
)

// Guard bounds every wait for a real event.
const Guard = time.Minute

// ParkGrace is the grace the bench's executors give an agent to end its
// turn after a successful wait.
const ParkGrace = 7 * time.Second

// fakeAgent is a program that stands in for an agent CLI: it records its
// argv, stdin, environment and working directory beside itself (outside
// the execution directory), prints the stream in stream.jsonl beside
// itself (and records "streamed" once it has), and then hangs when a file
// "hang" is there, or exits with the status in "exit".
const fakeAgent = `#!/bin/sh
here=$(dirname "$0")
printf '%s\n' "$@" > "$here/argv"
cat > "$here/stdin"
env > "$here/env"
pwd > "$here/cwd"
cat "$here/stream.jsonl"
: > "$here/streamed"
if [ -e "$here/hang" ]; then exec sleep 1000; fi
exit $(cat "$here/exit" 2>/dev/null || echo 0)
`

// Agent is what differs between the agent executors' benches.
type Agent struct {
	// Binary is the CLI's program name (claude, codex); the fake agent
	// is installed under it.
	Binary string
	// Model is the model the bench's config names.
	Model string
	// KeyVar is the environment variable of the model API key.
	KeyVar string
	// New constructs the executor under test.
	New func(agentrun.Options) (*agentrun.Executor, error)
}

// Timers is an After the test fires itself.
type Timers struct{ calls chan timerCall }

type timerCall struct {
	d time.Duration
	c chan time.Time
}

// After records a timer of d and returns its channel.
func (tm *Timers) After(d time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	tm.calls <- timerCall{d: d, c: c}
	return c
}

// Fire waits for a timer of d and fires it; other timers are dropped
// (never fired).
func (tm *Timers) Fire(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(Guard)
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

// Bench is one agent executor under test with a fake agent CLI: its
// directories, its timers and the execution context it runs with.
type Bench struct {
	agent         Agent
	Tmp, Bin, Dir string
	Timers        *Timers
	Exec          *agentrun.Executor
	Ctx           executor.ExecutionContext
}

// NewBench lays out a bench for agent: the fake CLI, an os that does
// nothing, the token file, the playbook answer-issue, and the executor,
// whose supervisor is the test binary itself (its TestMain must serve
// `supervise DIR`).
func NewBench(t *testing.T, agent Agent) *Bench {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	b := &Bench{agent: agent, Tmp: tmp, Bin: filepath.Join(tmp, "bin"), Dir: filepath.Join(tmp, "exe"), Timers: &Timers{calls: make(chan timerCall, 256)}}
	for _, d := range []string{b.Bin, filepath.Join(tmp, "tb"), filepath.Join(tmp, "run"), filepath.Join(tmp, "playbooks", "skills", "answer-issue")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	Write(t, b.Program(), fakeAgent, 0o700)
	Write(t, filepath.Join(tmp, "tb", "os"), "#!/bin/sh\nexit 0\n", 0o700)
	Write(t, filepath.Join(tmp, "run", "token"), TokenCanary+"\n", 0o600)
	Write(t, filepath.Join(tmp, "playbooks", "skills", "answer-issue", "SKILL.md"), "---\nname: answer-issue\ndescription: d\n---\nAnswer the issue.\n", 0o600)
	b.Ctx = executor.ExecutionContext{
		Token: TokenCanary, ToolbeltEndpoint: filepath.Join(tmp, "run", "sock"), ToolbeltTokenFile: filepath.Join(tmp, "run", "token"),
		ToolbeltDir: filepath.Join(tmp, "tb"), PlaybookDir: filepath.Join(tmp, "playbooks"),
	}
	b.Exec = b.Executor(t, self)
	return b
}

// Program is the fake CLI's path.
func (b *Bench) Program() string { return filepath.Join(b.Bin, b.agent.Binary) }

// Executor constructs another executor on the bench (a later daemon's),
// supervised by self.
func (b *Bench) Executor(t *testing.T, self string) *agentrun.Executor {
	t.Helper()
	e, err := b.agent.New(agentrun.Options{Supervisor: self, Clock: clock.System{}, After: b.Timers.After, ParkGrace: ParkGrace, Workspaces: filepath.Join(b.Tmp, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Write writes a file or fails the test.
func Write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// Config is the bench's binding config: unsandboxed, the fake CLI, the
// playbook answer-issue and a prompt over the input Events.
func (b *Bench) Config() json.RawMessage {
	return json.RawMessage(`{"sandbox": {"enabled": false}, "binary": "` + b.Program() + `", "model": "` + b.agent.Model + `", "playbook": "answer-issue",
		"base_url": "http://127.0.0.1:9", "max_turns": 9,
		"prompt": "Answer {{range .Events}}{{.Type}} #{{.Data.issue.number}}{{end}}"}`)
}

// Request is a run request of the bench's execution at epoch, with the
// API key canary in its environment.
func (b *Bench) Request(epoch int64) executor.RunRequest {
	return executor.RunRequest{
		ExecutionID: "exe-1", WorkID: "work-1", ScopeID: "scope-a", BindingID: "agent", Epoch: epoch,
		Config: b.Config(), Env: map[string]string{b.agent.KeyVar: APIKeyCanary, "OTHER_SECRET": "other-" + APIKeyCanary},
		Dir: b.Dir, Deadline: time.Now().Add(time.Hour), Context: b.Ctx,
		Events: []executor.Event{{ID: "ev-1", Seq: 1, Type: "issue.opened", Source: "github", Data: json.RawMessage(`{"issue": {"number": 42}}`)}},
	}
}

// Stream sets the lines the fake CLI prints.
func (b *Bench) Stream(t *testing.T, lines ...string) {
	t.Helper()
	Write(t, filepath.Join(b.Bin, "stream.jsonl"), strings.Join(lines, "\n")+"\n", 0o600)
}

// Hang makes the fake CLI hang after its stream (on) or exit (off).
func (b *Bench) Hang(t *testing.T, on bool) {
	t.Helper()
	if on {
		Write(t, filepath.Join(b.Bin, "hang"), "", 0o600)
	} else {
		os.Remove(filepath.Join(b.Bin, "hang"))
	}
}

// Recorded returns what the fake CLI recorded as name (argv, stdin, env,
// cwd).
func (b *Bench) Recorded(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.Bin, name))
	if err != nil {
		t.Fatalf("the fake agent recorded no %s: %v", name, err)
	}
	return string(data)
}

// WaitRecorded waits until the fake agent has recorded name (it is
// running), through inotify on its directory.
func (b *Bench) WaitRecorded(t *testing.T, name string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, b.Bin, unix.IN_CLOSE_WRITE); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stat(filepath.Join(b.Bin, name)); err == nil {
				return
			}
			if _, err := unix.Read(fd, buf); err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(Guard):
		t.Fatalf("the fake agent never recorded %s", name)
	}
}

type outcome struct {
	res executor.Result
	err error
}

// Start runs f on its own goroutine; Await takes its result.
func Start(f func() (executor.Result, error)) <-chan outcome {
	c := make(chan outcome, 1)
	go func() {
		res, err := f()
		c <- outcome{res, err}
	}()
	return c
}

// Await waits (within Guard) for what Start ran to end.
func Await(t *testing.T, c <-chan outcome) (executor.Result, error) {
	t.Helper()
	select {
	case o := <-c:
		return o.res, o.err
	case <-time.After(Guard):
		t.Fatal("the segment never ended")
		return executor.Result{}, nil
	}
}

// NoCanary asserts that no file under dir holds the API key or the token,
// and that there is a file to search.
func NoCanary(t *testing.T, dir string) {
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
		for _, c := range []string{APIKeyCanary, TokenCanary} {
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

// GroupGone asserts that the segment's process group has no process left.
func GroupGone(t *testing.T, segDir string) {
	t.Helper()
	var rec proc.Record
	if ok, err := proc.ReadJSONFile(segDir, proc.RecordFile, &rec); !ok || err != nil {
		t.Fatalf("no supervisor record in %s: %v", segDir, err)
	}
	if err := unix.Kill(-rec.PID, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("kill(-%d, 0) = %v, want ESRCH: the agent's process group is still there", rec.PID, err)
	}
}

// MustRun runs a segment and fails the test on an error.
func MustRun(t *testing.T, e *agentrun.Executor, req executor.RunRequest) executor.Result {
	t.Helper()
	res, err := e.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
