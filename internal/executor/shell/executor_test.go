package shell

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
)

func TestInfo(t *testing.T) {
	info := setup(t).exec.Info()
	if info.Name != "shell" || info.Transport != executor.TransportOS {
		t.Errorf("info = %+v", info)
	}
	if !info.Has(executor.CapToolbelt) || info.Has(executor.CapResume) {
		t.Errorf("capabilities = %v, want toolbelt and no resume", info.Capabilities)
	}
}

func TestNewNeedsSupervisor(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without a supervisor program succeeded")
	}
}

func TestResumeUnsupported(t *testing.T) {
	b := setup(t)
	_, err := b.exec.Resume(context.Background(), b.request(t, Config{Command: []string{"true"}}))
	if !errors.Is(err, ErrResumeUnsupported) {
		t.Fatalf("Resume error = %v, want ErrResumeUnsupported", err)
	}
}

func TestRunOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		command  []string
		outcome  executor.Outcome
		exitCode int
		message  string
		log      string
	}{
		{
			name:     "nonzero exit, both streams in arrival order",
			command:  []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
			outcome:  executor.Failed,
			exitCode: 3,
			message:  "exited with status 3",
			log:      "out\nerr\n",
		},
		{
			name:     "success",
			command:  []string{"sh", "-c", "echo done"},
			outcome:  executor.Succeeded,
			exitCode: 0,
			message:  "exited with status 0",
			log:      "done\n",
		},
		{
			name:     "killed by a signal",
			command:  []string{"sh", "-c", "echo before; kill -KILL $$"},
			outcome:  executor.Failed,
			exitCode: -1,
			message:  "killed by SIGKILL",
			log:      "before\n",
		},
		{
			name:     "program not found",
			command:  []string{"no-such-program-oc"},
			outcome:  executor.Failed,
			exitCode: -1,
			message:  "not found on PATH",
			log:      "open-conduit: cannot start the command: the program was not found on PATH\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			res, err := b.exec.Run(context.Background(), b.request(t, Config{Command: tt.command}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.outcome || res.ExitCode != tt.exitCode || !strings.Contains(res.Message, tt.message) {
				t.Errorf("result = %+v, want %s, exit %d, message with %q", res, tt.outcome, tt.exitCode, tt.message)
			}
			if log := readLog(t, res); log != tt.log {
				t.Errorf("log = %q, want %q", log, tt.log)
			}
			gone(t, mustRecord(t, b.dir).PID)
		})
	}
}

func TestRunWorkingDirectory(t *testing.T) {
	b := setup(t)
	abs := t.TempDir()
	for i, tt := range []struct{ dir, want string }{
		{"", "work"},
		{"sub/dir", "work/sub/dir"},
		{abs, abs},
	} {
		b.dir = filepath.Join(b.tmp, "exe-"+strconv.Itoa(i))
		res, err := b.exec.Run(context.Background(), b.request(t, Config{Command: []string{"pwd", "-P"}, Dir: tt.dir}))
		if err != nil {
			t.Fatal(err)
		}
		want := tt.want
		if !filepath.IsAbs(want) {
			want = filepath.Join(b.dir, want)
		}
		want, _ = filepath.EvalSymlinks(want)
		if log := strings.TrimSpace(readLog(t, res)); want == "" || log != want {
			t.Errorf("dir %q: the command ran in %q, want %q", tt.dir, log, want)
		}
	}
}

func TestEnvironmentIsExactlyWhatIsNamed(t *testing.T) {
	t.Setenv("OC_TEST_CANARY", "daemon-env-canary")
	t.Setenv("LANG", "C.UTF-8")
	b := setup(t)
	toolbelt := filepath.Join(b.tmp, "toolbelt")
	if err := os.Mkdir(toolbelt, 0o700); err != nil {
		t.Fatal(err)
	}
	// A stand-in for the host's os binary: found first on PATH.
	if err := os.WriteFile(filepath.Join(toolbelt, "os"), []byte("#!/bin/sh\necho toolbelt-os\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	const secret, token = "secret-value-canary", "token-plaintext-canary"
	req := b.request(t, Config{Command: []string{"env"}, Env: map[string]string{"BINDING_VAR": "from binding", "HOME": "/home/binding"}})
	req.Env = map[string]string{"GH_TOKEN": secret}
	req.Context = executor.ExecutionContext{
		Token:             token,
		ToolbeltEndpoint:  "/state/runs/0123/toolbelt.sock",
		ToolbeltTokenFile: "/state/runs/0123/token/token",
		ToolbeltDir:       toolbelt,
	}
	res, err := b.exec.Run(context.Background(), req)
	if err != nil || res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(readLog(t, res), "\n"), "\n") {
		name, value, _ := strings.Cut(line, "=")
		got[name] = value
	}
	want := map[string]string{
		"PATH":                      toolbelt + ":" + os.Getenv("PATH"),
		"HOME":                      "/home/binding",
		"LANG":                      "C.UTF-8",
		"BINDING_VAR":               "from binding",
		"GH_TOKEN":                  secret,
		"OS_ENDPOINT":               "/state/runs/0123/toolbelt.sock",
		"OS_TOKEN_FILE":             "/state/runs/0123/token/token",
		"OPEN_CONDUIT_EXECUTION_ID": "exe_01TEST",
		"OPEN_CONDUIT_WORK_ID":      "wrk_01TEST",
		"OPEN_CONDUIT_SCOPE_ID":     "setup",
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %q, want %q", name, got[name], v)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("the command saw %s, which nobody named", name)
		}
	}
	// The token reaches the process only through its file, and no file
	// the executor wrote holds it.
	filepath.WalkDir(b.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if data, _ := os.ReadFile(path); bytes.Contains(data, []byte(token)) {
				t.Errorf("%s holds the token", path)
			}
		}
		return nil
	})

	// PATH lookup uses the command's PATH, so os is the toolbelt's.
	b.dir = filepath.Join(b.tmp, "exe-os")
	req.Dir, req.Config = b.dir, []byte(`{"command": ["os"]}`)
	res, err = b.exec.Run(context.Background(), req)
	if err != nil || res.Outcome != executor.Succeeded {
		t.Fatalf("Run os = %+v, %v", res, err)
	}
	if log := readLog(t, res); log != "toolbelt-os\n" {
		t.Errorf("os printed %q, want the toolbelt's", log)
	}
}

func TestToolbeltVariablesOnlyWithAnEndpoint(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"env"}})
	req.Context.ToolbeltTokenFile = "/state/token"
	res, err := b.exec.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if log := readLog(t, res); strings.Contains(log, "OS_ENDPOINT=") || strings.Contains(log, "OS_TOKEN_FILE=") {
		t.Errorf("toolbelt variables without an endpoint:\n%s", log)
	}
}

func TestReservedSecretNameRefused(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})
	req.Env = map[string]string{"OS_TOKEN_FILE": "secret-canary"}
	_, err := b.exec.Run(context.Background(), req)
	if err == nil || strings.Contains(err.Error(), "secret-canary") {
		t.Fatalf("Run error = %v, want a refusal that does not echo the value", err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, recordFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a supervisor was started for a refused request")
	}
}

func TestLogIsBounded(t *testing.T) {
	b := setup(t, func(o *Options) { o.LogLimit = 1000 })
	// 100 lines of 50 bytes: 5000 bytes of output.
	script := `i=0; while [ $i -lt 100 ]; do echo 0123456789012345678901234567890123456789012345678; i=$((i+1)); done`
	res, err := b.exec.Run(context.Background(), b.request(t, Config{Command: []string{"sh", "-c", script}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Succeeded {
		t.Fatalf("result = %+v: a full log must not stop the command", res)
	}
	if !strings.Contains(res.Message, "log was cut") {
		t.Errorf("message %q does not say the log was cut", res.Message)
	}
	line := "0123456789012345678901234567890123456789012345678\n"
	want := strings.Repeat(line, 20) + truncationMarker(1000)
	if log := readLog(t, res); log != want {
		t.Errorf("log has %d bytes:\n%q\nwant the first 1000 bytes and the marker", len(log), log)
	}
}

func TestRunRefusesADirectoryThatHoldsASegment(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})
	if _, err := b.exec.Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := b.exec.Run(context.Background(), req); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Run error = %v, want ErrAlreadyStarted", err)
	}
}

func TestLeftoversAreKilledWhenTheCommandExits(t *testing.T) {
	b := setup(t)
	// The background process keeps the output pipe open too.
	res, err := b.exec.Run(context.Background(), b.request(t, Config{Command: []string{"sh", "-c", "sleep 1000 & echo $!"}}))
	if err != nil || res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	gone(t, mustRecord(t, b.dir).PID, pids(t, readLog(t, res))...)
}

func TestDetachAndAdopt(t *testing.T) {
	b := setup(t)
	ready, gate := b.fifo(t, "ready"), b.fifo(t, "gate")
	const secret = "secret-in-flight-canary"
	req := b.request(t, Config{
		Command: []string{"sh", "-c", `echo $$ > "$READY"; read x < "$GATE"; echo released; exit 7`},
		Env:     map[string]string{"READY": ready, "GATE": gate},
	})
	req.Env = map[string]string{"SECRET_VALUE": secret}

	ctx, cancel := context.WithCancel(context.Background())
	running := start(func() (executor.Result, error) { return b.exec.Run(ctx, req) })
	cmd := pids(t, readFifo(t, ready))[0]
	cancel()
	if _, err := await(t, running); !errors.Is(err, executor.ErrDetached) {
		t.Fatalf("Run after cancel = %v, want ErrDetached", err)
	}
	rec := mustRecord(t, b.dir)
	alive(t, rec.PID)
	alive(t, cmd)

	// The secret reached the command, but not the supervisor's command line
	// or environment, and its launch file is gone.
	if environ, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd) + "/environ"); !bytes.Contains(environ, []byte(secret)) {
		t.Fatal("the command did not get the secret")
	}
	for _, f := range []string{"cmdline", "environ"} {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(rec.PID) + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the supervisor's %s holds the secret", f)
		}
	}
	if _, err := os.Stat(filepath.Join(b.dir, launchFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the launch file is still there: %v", err)
	}

	// A new executor, as after a daemon restart, adopts the segment. Its
	// deadline timer shows it is watching before the command is released.
	req.Deadline = b.clock.Now().Add(time.Hour)
	adopted := start(func() (executor.Result, error) { return b.another(t).Recover(context.Background(), req) })
	if d := b.timers.next(t).d; d != time.Hour {
		t.Fatalf("deadline timer = %v, want 1h", d)
	}
	alive(t, cmd)
	release(t, gate)
	res, err := await(t, adopted)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Failed || res.ExitCode != 7 {
		t.Errorf("Recover = %+v, want failed with exit 7", res)
	}
	if log := readLog(t, res); log != "released\n" {
		t.Errorf("log = %q", log)
	}
}

func TestRecoverAfterTheSegmentEndedUnwatched(t *testing.T) {
	b := setup(t)
	ready, gate := b.fifo(t, "ready"), b.fifo(t, "gate")
	req := b.request(t, Config{
		Command: []string{"sh", "-c", `echo $$ > "$READY"; read x < "$GATE"; exit 0`},
		Env:     map[string]string{"READY": ready, "GATE": gate},
	})
	ctx, cancel := context.WithCancel(context.Background())
	running := start(func() (executor.Result, error) { return b.exec.Run(ctx, req) })
	readFifo(t, ready)
	cancel()
	if _, err := await(t, running); !errors.Is(err, executor.ErrDetached) {
		t.Fatalf("Run after cancel = %v, want ErrDetached", err)
	}
	rec := mustRecord(t, b.dir)
	release(t, gate)
	waitExit(t, rec.PID, rec.Start)

	res, err := b.another(t).Recover(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Succeeded || res.ExitCode != 0 {
		t.Errorf("Recover = %+v, want the recorded success", res)
	}
}

func TestRecoverFindsNothing(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})

	if _, err := b.exec.Recover(context.Background(), req); !errors.Is(err, executor.ErrGone) {
		t.Fatalf("Recover of an empty directory = %v, want ErrGone", err)
	}

	// A supervisor that died without a status, and a launch file a daemon
	// left behind: gone, and the secrets with it.
	p := exec.Command("true")
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	boot, _ := bootID()
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONFile(b.dir, recordFile, record{PID: p.Process.Pid, Start: 1, BootID: boot}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONFile(b.dir, launchFile, launch{Argv: []string{"true"}, Env: []string{"S=secret"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.exec.Recover(context.Background(), req); !errors.Is(err, executor.ErrGone) {
		t.Fatalf("Recover of a dead supervisor = %v, want ErrGone", err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, launchFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("the stale launch file was left behind")
	}
	if err := b.exec.Stop(context.Background(), req, time.Second); err != nil {
		t.Errorf("Stop of a dead segment = %v", err)
	}
}

func TestRecoverRefusesAReusedPID(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})
	// An unrelated live process, standing in for one that got the dead
	// supervisor's pid.
	other := exec.Command("cat")
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		other.Wait()
	}()
	st, err := readProcStat(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := bootID()
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []record{
		{PID: other.Process.Pid, Start: st.Start + 1, BootID: boot},  // another start time
		{PID: other.Process.Pid, Start: st.Start, BootID: "earlier"}, // another boot
	} {
		if err := writeJSONFile(b.dir, recordFile, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := b.exec.Recover(context.Background(), req); !errors.Is(err, executor.ErrGone) {
			t.Errorf("Recover with record %+v = %v, want ErrGone", rec, err)
		}
		if err := b.exec.Stop(context.Background(), req, time.Second); err != nil {
			t.Errorf("Stop with record %+v = %v", rec, err)
		}
		alive(t, other.Process.Pid)
	}
}

func TestStopKillsAGroupThatIgnoresTERM(t *testing.T) {
	b := setup(t)
	ready := b.fifo(t, "ready")
	// The command and all it starts ignore SIGTERM (an ignored signal stays
	// ignored across exec); one grandchild has a child of its own.
	script := `trap '' TERM
sleep 1000 & a=$!
sh -c 'sleep 1000 & wait' & c=$!
echo "$$ $a $c" > "$READY"
wait`
	req := b.request(t, Config{Command: []string{"sh", "-c", script}, Env: map[string]string{"READY": ready}})
	running := start(func() (executor.Result, error) { return b.exec.Run(context.Background(), req) })
	procs := pids(t, readFifo(t, ready))
	pgid := mustRecord(t, b.dir).PID

	stopped := make(chan error, 1)
	go func() { stopped <- b.exec.Stop(context.Background(), req, 5*time.Second) }()
	grace := b.timers.next(t)
	if grace.d != 5*time.Second {
		t.Fatalf("grace timer = %v, want 5s", grace.d)
	}
	for _, pid := range procs {
		alive(t, pid) // SIGTERM was ignored
	}
	grace.fire <- time.Time{}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("Stop never returned")
	}
	gone(t, pgid, procs...)

	res, err := await(t, running)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Cancelled || !strings.Contains(res.Message, "SIGKILL") {
		t.Errorf("Run = %+v, want cancelled, killed by SIGKILL", res)
	}
	// Another executor recovering it later sees the same.
	again, err := b.another(t).Recover(context.Background(), req)
	if err != nil || again.Outcome != executor.Cancelled {
		t.Errorf("Recover after Stop = %+v, %v", again, err)
	}
}

func TestStopAnAdoptedSegment(t *testing.T) {
	b := setup(t)
	ready := b.fifo(t, "ready")
	req := b.request(t, Config{
		Command: []string{"sh", "-c", `echo $$ > "$READY"; exec sleep 1000`},
		Env:     map[string]string{"READY": ready},
	})
	ctx, cancel := context.WithCancel(context.Background())
	running := start(func() (executor.Result, error) { return b.exec.Run(ctx, req) })
	cmd := pids(t, readFifo(t, ready))[0]
	cancel()
	if _, err := await(t, running); !errors.Is(err, executor.ErrDetached) {
		t.Fatalf("Run after cancel = %v, want ErrDetached", err)
	}
	rec := mustRecord(t, b.dir)

	// The restarted daemon's executor stops it; SIGTERM is enough.
	if err := b.another(t).Stop(context.Background(), req, time.Minute); err != nil {
		t.Fatal(err)
	}
	// Its parent, the first executor, reaps it: only then is the group's
	// id free.
	b.reaped(t)
	gone(t, rec.PID, cmd)
	res, err := b.another(t).Recover(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Cancelled || !strings.Contains(res.Message, "SIGTERM") {
		t.Errorf("Recover = %+v, want cancelled by SIGTERM", res)
	}
}

func TestDeadlineStopsTheGroup(t *testing.T) {
	b := setup(t)
	ready, gate := b.fifo(t, "ready"), b.fifo(t, "gate")
	req := b.request(t, Config{
		Command: []string{"sh", "-c", `echo $$ > "$READY"; read x < "$GATE"`},
		Env:     map[string]string{"READY": ready, "GATE": gate},
	})
	req.Deadline = b.clock.Now().Add(90 * time.Minute)
	running := start(func() (executor.Result, error) { return b.exec.Run(context.Background(), req) })
	cmd := pids(t, readFifo(t, ready))[0]
	deadline := b.timers.next(t)
	if deadline.d != 90*time.Minute {
		t.Fatalf("deadline timer = %v, want 90m", deadline.d)
	}
	b.clock.Advance(90 * time.Minute)
	deadline.fire <- b.clock.Now()

	res, err := await(t, running)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Failed || !strings.Contains(res.Message, "deadline 2026-03-01T13:30:00Z passed") ||
		!strings.Contains(res.Message, "SIGTERM") {
		t.Errorf("Run = %+v, want failed naming the deadline", res)
	}
	gone(t, mustRecord(t, b.dir).PID, cmd)
}

func TestDeadlineAlreadyPassed(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})
	req.Deadline = b.clock.Now()
	res, err := b.exec.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Failed || !strings.Contains(res.Message, "deadline") {
		t.Errorf("Run = %+v, want failed naming the deadline", res)
	}
	if _, err := os.Stat(filepath.Join(b.dir, recordFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a supervisor was started after the deadline")
	}
}

func TestRunRefusesInvalidConfig(t *testing.T) {
	b := setup(t)
	req := b.request(t, Config{Command: []string{"true"}})
	req.Config = []byte(`{"command": []}`)
	var cerr *ConfigError
	if _, err := b.exec.Run(context.Background(), req); !errors.As(err, &cerr) {
		t.Fatalf("Run error = %v, want a ConfigError", err)
	}
}

// TestTheRealSupervisorCommand runs segments under the real
// `open-conduit supervise`, as the daemon does.
func TestTheRealSupervisorCommand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "open-conduit")
	build := exec.Command("go", "build", "-o", bin, "github.com/open-conduit/open-conduit/cmd/open-conduit")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b := setup(t, func(o *Options) { o.Supervisor = bin })
	res, err := b.exec.Run(context.Background(), b.request(t, Config{Command: []string{"sh", "-c", "echo hi; echo there >&2; exit 4"}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Failed || res.ExitCode != 4 || readLog(t, res) != "hi\nthere\n" {
		t.Errorf("Run = %+v, log %q", res, readLog(t, res))
	}

	// Stop: the supervisor ignores the group's SIGTERM and records the
	// command's death by it.
	b.dir = filepath.Join(b.tmp, "exe-stop")
	ready := b.fifo(t, "ready")
	req := b.request(t, Config{Command: []string{"sh", "-c", `echo $$ > "$READY"; exec sleep 1000`}, Env: map[string]string{"READY": ready}})
	running := start(func() (executor.Result, error) { return b.exec.Run(context.Background(), req) })
	cmd := pids(t, readFifo(t, ready))[0]
	if err := b.exec.Stop(context.Background(), req, time.Minute); err != nil {
		t.Fatal(err)
	}
	gone(t, mustRecord(t, b.dir).PID, cmd)
	res, err = await(t, running)
	if err != nil || res.Outcome != executor.Cancelled || !strings.Contains(res.Message, "SIGTERM") {
		t.Errorf("Run after Stop = %+v, %v", res, err)
	}
}
