package pkgproto_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/packages/pkgproto"
)

func auth(op, config string) extension.Authority {
	return extension.Authority{Scope: "default", Work: "wrk_1", Execution: "exe_1", Binding: "builder", Generation: 2, Epoch: 1,
		TokenID: "tok_1", Operation: op, RequestID: "r-1", Config: json.RawMessage(config)}
}

func TestPythonPackageRegistersWhatItsManifestProvides(t *testing.T) {
	needPython(t)
	h := newHarness()
	inst := h.start(t, pyecho(t))
	reg := inst.Registration()
	if reg.Name != "pyecho" || !reg.OptIn || reg.Gate == nil || reg.StartGate != nil || reg.CheckConfig == nil {
		t.Fatalf("registration = %+v", reg)
	}
	if len(reg.Operations) != 1 || reg.Operations[0].Name != "pyecho.echo" || reg.Operations[0].Handler == nil || len(reg.Operations[0].InputSchema) == 0 {
		t.Fatalf("operations = %+v", reg.Operations)
	}
	if len(reg.Toolsets) != 1 || reg.Toolsets[0].Name != "pyecho.user" {
		t.Fatalf("toolsets = %+v", reg.Toolsets)
	}
	if err := extension.CheckToolset(reg.Name, reg.Toolsets[0]); err != nil {
		t.Fatal(err)
	}
	xs := inst.Executors()
	if len(xs) != 1 {
		t.Fatalf("executors = %v", xs)
	}
	info := xs[0].Info()
	if info.Name != "pyecho.cmd" || info.Transport != executor.TransportOS || !info.Has(executor.CapToolbelt) || info.Has(executor.CapResume) {
		t.Fatalf("executor info = %+v", info)
	}
	if hl := inst.Health(); hl.State != pkgproto.StateRunning || hl.Restarts != 0 || hl.CrashLoop {
		t.Fatalf("health = %+v", hl)
	}
}

func TestPythonPackageOperationCall(t *testing.T) {
	needPython(t)
	h := newHarness()
	inst := h.start(t, pyecho(t))
	h1 := inst.Registration().Operations[0].Handler
	out, err := h1(context.Background(), auth("pyecho.echo", `{}`), json.RawMessage(`{"text":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil || got["echo"] != "hello" || got["request_id"] != "r-1" {
		t.Fatalf("output = %s (%v)", out, err)
	}
	_, err = h1(context.Background(), auth("pyecho.echo", `{}`), json.RawMessage(`{"text":"x","refuse":true}`))
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != "refused" {
		t.Fatalf("refusal = %v", err)
	}
}

func TestPythonPackageConfigCheck(t *testing.T) {
	needPython(t)
	h := newHarness()
	check := h.start(t, pyecho(t)).Registration().CheckConfig
	if err := check(json.RawMessage(`{"park":["a.b"]}`)); err != nil {
		t.Fatalf("a good config refused: %v", err)
	}
	err := check(json.RawMessage(`{"colour":"red"}`))
	var ce *extension.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Pointer != "/colour" || ce.Problems[0].Code != "unknown_field" {
		t.Fatalf("config problems = %v", err)
	}
}

const gateConfig = `{"park":["other.park"],"refuse":["other.refuse"],"hang":["other.hang"],"crash":["other.crash"],"garble":["other.garble"]}`

func gateReq(op string) extension.GateRequest {
	return extension.GateRequest{Authority: auth(op, gateConfig), Operation: op, Input: json.RawMessage(`{}`)}
}

func TestPythonGateAllowsParksAndRefuses(t *testing.T) {
	needPython(t)
	h := newHarness()
	gate := h.start(t, pyecho(t)).Registration().Gate
	if plan, err := gate.Check(context.Background(), gateReq("other.go")); plan != nil || err != nil {
		t.Fatalf("allow = %+v, %v", plan, err)
	}
	plan, err := gate.Check(context.Background(), gateReq("other.park"))
	if err != nil || plan == nil || !slices.Equal(plan.Types, []string{"pyecho.approved"}) || !slices.Equal(plan.Keys, []string{"exe_1"}) ||
		plan.Timeout != time.Minute || string(plan.Output) != `{"held":"other.park"}` {
		t.Fatalf("park = %+v, %v", plan, err)
	}
	_, err = gate.Check(context.Background(), gateReq("other.refuse"))
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != "not_allowed" {
		t.Fatalf("refusal = %v", err)
	}
}

// A gate that does not answer fails closed: the error is not an
// operation error, which the toolbelt answers with gate_failed.
func TestPythonGateTimeoutFailsClosed(t *testing.T) {
	needPython(t)
	h := newHarness()
	gate := h.start(t, pyecho(t)).Registration().Gate
	done := make(chan error, 1)
	go func() {
		_, err := gate.Check(context.Background(), gateReq("other.hang"))
		done <- err
	}()
	h.timers.fire(t, gateTimeout)
	err := <-done
	var oe *extension.OperationError
	var te *pkgproto.TimeoutError
	if err == nil || errors.As(err, &oe) || !errors.As(err, &te) {
		t.Fatalf("a gate that timed out answered %v (%T)", err, err)
	}
	// The package is still there and answers the next call.
	if plan, err := gate.Check(context.Background(), gateReq("other.go")); plan != nil || err != nil {
		t.Fatalf("after the timeout: %+v, %v", plan, err)
	}
}

// A gate whose process crashes fails closed, and the process is restarted
// after a backoff that doubles with each crash in the window; a third
// crash in the window is a crash loop, reported in the health and the
// log.
func TestPythonGateCrashFailsClosedAndRestartsWithBackoff(t *testing.T) {
	needPython(t)
	h := newHarness()
	inst := h.start(t, pyecho(t))
	gate := inst.Registration().Gate
	first := inst.PID()
	for n, wait := range []time.Duration{backoff, 2 * backoff, 4 * backoff} {
		_, err := gate.Check(context.Background(), gateReq("other.crash"))
		var oe *extension.OperationError
		var ue *pkgproto.UnavailableError
		if err == nil || errors.As(err, &oe) || !errors.As(err, &ue) {
			t.Fatalf("crash %d: the gate answered %v (%T)", n+1, err, err)
		}
		eventually(t, "the restart's backoff", func() bool { return h.timers.has(wait) })
		hl := inst.Health()
		if hl.State != pkgproto.StateRestarting || hl.Restarts != n || hl.LastError != "the process exited with status 3" {
			t.Fatalf("crash %d: health = %+v", n+1, hl)
		}
		if hl.CrashLoop != (n == 2) {
			t.Fatalf("crash %d: crash loop = %v", n+1, hl.CrashLoop)
		}
		// While it restarts the gate fails closed at once.
		if _, err := gate.Check(context.Background(), gateReq("other.go")); !errors.As(err, &ue) {
			t.Fatalf("while restarting the gate answered %v", err)
		}
		h.timers.fire(t, wait)
		eventually(t, "the restart", func() bool { return inst.Health().State == pkgproto.StateRunning })
		if hl := inst.Health(); hl.Restarts != n+1 {
			t.Fatalf("restarts = %d, want %d", hl.Restarts, n+1)
		}
		if plan, err := gate.Check(context.Background(), gateReq("other.go")); plan != nil || err != nil {
			t.Fatalf("after restart %d: %+v, %v", n+1, plan, err)
		}
	}
	if inst.PID() == first {
		t.Fatal("the process was not replaced")
	}
	if !strings.Contains(h.log.String(), "crash loop") {
		t.Fatalf("no crash loop in the log:\n%s", h.log.String())
	}
	if !strings.Contains(string(inst.Stderr()), "crashing on the gate call") {
		t.Fatalf("stderr was not captured: %q", inst.Stderr())
	}
	if strings.Contains(h.log.String(), "crashing on the gate call") {
		t.Fatal("the package's stderr reached the log")
	}
	// Once the window has passed, the loop is over and the backoff starts
	// again from its first step.
	h.clock.Advance(2 * time.Minute)
	if inst.Health().CrashLoop {
		t.Fatal("the crash loop outlived its window")
	}
	_, _ = gate.Check(context.Background(), gateReq("other.crash"))
	eventually(t, "the first backoff again", func() bool { return h.timers.has(backoff) })
}

func TestPythonExecutorRunsACommand(t *testing.T) {
	needPython(t)
	h := newHarness()
	x := h.start(t, pyecho(t)).Executors()[0]
	dir := t.TempDir()
	req := executor.RunRequest{ExecutionID: "exe_1", WorkID: "wrk_1", ScopeID: "default", BindingID: "builder", Epoch: 1,
		Config: json.RawMessage(`{"argv":["sh","-c","printf '%s|%s|%s' \"$OS_TOKEN_FILE\" \"$GREETING\" \"$PYECHO_PLAYBOOK_DIR\" > out.txt; env > env.txt"]}`),
		Env:    map[string]string{"GREETING": "hi"}, Dir: dir, Deadline: time.Now().Add(time.Hour),
		Context: executor.ExecutionContext{Token: "the-token-itself", ToolbeltEndpoint: filepath.Join(dir, "toolbelt.sock"),
			ToolbeltTokenFile: filepath.Join(dir, "token"), ToolbeltDir: dir, PlaybookDir: filepath.Join(dir, "playbooks")}}
	res, err := x.Run(context.Background(), req)
	if err != nil || res.Outcome != executor.Succeeded || res.ExitCode != 0 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	out, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(out) != filepath.Join(dir, "token")+"|hi|"+filepath.Join(dir, "playbooks") {
		t.Fatalf("out.txt = %q, %v", out, err)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	if strings.Contains(string(env), "the-token-itself") {
		t.Fatal("the token reached the package's command")
	}
	req.Config = json.RawMessage(`{"argv":["sh","-c","exit 4"]}`)
	if res, err := x.Run(context.Background(), req); err != nil || res.Outcome != executor.Failed || res.ExitCode != 4 {
		t.Fatalf("failing run = %+v, %v", res, err)
	}
	if _, err := x.Recover(context.Background(), req); !errors.Is(err, executor.ErrGone) {
		t.Fatalf("recover = %v", err)
	}
	if _, err := x.Resume(context.Background(), req); err == nil {
		t.Fatal("an executor without resume resumed")
	}
}

// Stop asks the package to shut down, and leaves neither its process nor
// its group.
func TestStopLeavesNoProcess(t *testing.T) {
	needPython(t)
	h := newHarness()
	inst := h.start(t, pyecho(t))
	pid := inst.PID()
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("no process %d", pid)
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d is still there: %v", pid, err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d is still there: %v", pid, err)
	}
	if hl := inst.Health(); hl.State != pkgproto.StateStopped {
		t.Fatalf("health = %+v", hl)
	}
	_, err := inst.Registration().Operations[0].Handler(context.Background(), auth("pyecho.echo", `{}`), json.RawMessage(`{"text":"x"}`))
	var ue *pkgproto.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("a call after stop = %v", err)
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatalf("a second stop = %v", err)
	}
}

// A package that would not stop is killed: its process ignores shutdown
// and SIGTERM.
func TestStopKillsAPackageThatWillNotStop(t *testing.T) {
	needPython(t)
	h := newHarness()
	ins := pyecho(t)
	ins.Manifest.Run.Env = map[string]string{"PYECHO_STUBBORN": "1"}
	inst := h.start(t, ins)
	pid := inst.PID()
	done := make(chan error, 1)
	go func() { done <- inst.Stop(context.Background()) }()
	h.timers.fire(t, stopTimeout) // shutdown unanswered
	h.timers.fire(t, stopTimeout) // exit after closing stdin
	h.timers.fire(t, stopTimeout) // SIGTERM ignored
	if err := <-done; err == nil {
		t.Fatal("a package that had to be killed stopped without an error")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d is still there: %v", pid, err)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	needPython(t)
	for name, c := range map[string]struct {
		change func(*packages.Installed)
		want   string
	}{
		"a protocol version the host does not speak": {func(i *packages.Installed) { i.Manifest.Run.Env = map[string]string{"PYECHO_PROTOCOL": "9"} }, "protocol versions"},
		"another version than the manifest's":        {func(i *packages.Installed) { i.Manifest.Version = "2.0.0" }, "another package or version"},
		"a method the manifest needs and it lacks":   {func(i *packages.Installed) { i.Manifest.Provides.StartGate = true }, "work.start_gate"},
		"a command that is not there":                {func(i *packages.Installed) { i.Manifest.Run.Command = []string{"./missing"} }, "did not start"},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness()
			ins := pyecho(t)
			c.change(&ins)
			inst, err := h.rt.Start(context.Background(), ins)
			if err == nil {
				_ = inst.Stop(context.Background())
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

// Without the permissions accepted, there is no gate and no executor.
func TestUnacceptedPermissionsGrantNothing(t *testing.T) {
	needPython(t)
	h := newHarness()
	ins := pyecho(t)
	ins.Accepted = nil
	inst := h.start(t, ins)
	if inst.Registration().Gate != nil || len(inst.Executors()) != 0 {
		t.Fatalf("registration = %+v, executors = %v", inst.Registration(), inst.Executors())
	}
	if len(inst.Registration().Operations) != 1 {
		t.Fatal("the operation needs no permission and is registered")
	}
}

// A package that writes a line that is not a message broke the protocol:
// its call fails closed, and its process is killed and restarted.
func TestProtocolViolationRestartsThePackage(t *testing.T) {
	needPython(t)
	h := newHarness()
	inst := h.start(t, pyecho(t))
	gate := inst.Registration().Gate
	_, err := gate.Check(context.Background(), gateReq("other.garble"))
	var ue *pkgproto.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("the garbled gate answered %v (%T)", err, err)
	}
	eventually(t, "the restart's backoff", func() bool { return h.timers.has(backoff) })
	if hl := inst.Health(); hl.State != pkgproto.StateRestarting || !strings.Contains(hl.LastError, "broke the protocol") {
		t.Fatalf("health = %+v", hl)
	}
	h.timers.fire(t, backoff)
	eventually(t, "the restart", func() bool { return inst.Health().State == pkgproto.StateRunning })
	if strings.Contains(h.log.String(), "this line is not a message") {
		t.Fatal("the package's line reached the log")
	}
}

// The package's stderr is kept bounded, in memory and in its rotated log
// file.
func TestStderrIsBounded(t *testing.T) {
	needPython(t)
	logs := t.TempDir()
	rt := pkgproto.NewRuntime(pkgproto.Options{StderrLimit: 64, LogDir: logs})
	inst, err := rt.Start(context.Background(), pyecho(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	// The executor's command writes to the package's stderr; each run's
	// lines are read before the next run writes, so the second overflows
	// the file and rotates it.
	for _, run := range []string{"first", "second"} {
		req := executor.RunRequest{ExecutionID: "exe_1", Dir: t.TempDir(),
			Config: json.RawMessage(`{"argv":["sh","-c","for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i-of-the-` + run + `-command; done"]}`)}
		if res, err := inst.Executors()[0].Run(context.Background(), req); err != nil || res.Outcome != executor.Succeeded {
			t.Fatalf("run = %+v, %v", res, err)
		}
		eventually(t, "the last line in the tail", func() bool {
			return strings.HasSuffix(string(inst.(*pkgproto.Instance).Stderr()), "line-10-of-the-"+run+"-command\n")
		})
	}
	if tail := inst.(*pkgproto.Instance).Stderr(); len(tail) > 64 {
		t.Fatalf("the tail holds %d bytes", len(tail))
	}
	for _, name := range []string{"pyecho.log", "pyecho.log.1"} {
		st, err := os.Stat(filepath.Join(logs, name))
		if err != nil || st.Size() > 64 || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, %v", name, st, err)
		}
	}
}
