package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The installed-package tests on the release's own runtimes, through the
// real daemon (not the test daemon): the Python package of pkgproto's
// test data, pyecho, written against docs/extension-protocol.md with the
// standard library only, and the real MCP reference server
// (pkg_mcp_test.go).

// needPython skips a test that needs python3 where it is missing, and
// fails it under CI.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is required: %v", err)
		}
		t.Skipf("python3 is not installed (apt-get install python3, or brew install python): %v", err)
	}
}

// pyechoSource is the Python package's directory in the repository.
func pyechoSource(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "internal", "packages", "pkgproto", "testdata", "pypkg"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyPackage copies the package directory src to a fresh directory
// under the env's root named name, changing its manifest with edit (nil:
// none), and returns it.
func (e *env) copyPackage(src, name string, edit func(manifest string) string) string {
	e.t.Helper()
	dst := filepath.Join(e.root, name)
	entries, err := os.ReadDir(src)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		e.t.Fatal(err)
	}
	for _, ent := range entries {
		b, err := os.ReadFile(filepath.Join(src, ent.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		if ent.Name() == "open-conduit-package.json" && edit != nil {
			b = []byte(edit(string(b)))
		}
		if err := os.WriteFile(filepath.Join(dst, ent.Name()), b, 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	return dst
}

// The operations pyecho's gate is configured about (its config lists
// them by what the gate does), all the introspection extension's.
const (
	gatedPark   = "introspection.waits"
	gatedRefuse = "introspection.executions"
	gatedHang   = "introspection.work"
	gatedCrash  = "introspection.events"
)

// pyechoConfig is a configuration with one scope, t: the binding agent
// (the steered shell job, ctl its control directory) is granted
// @pyecho.user and the gated operations, plain only the builtins, and
// runner runs pyecho's executor on argv. With enabled, extensions.pyecho
// enables the package in t with its gate's lists; without, nothing
// refers to the package.
func pyechoConfig(t *testing.T, ctl string, enabled bool, argv []string) []byte {
	t.Helper()
	gated := []string{gatedPark, gatedRefuse, gatedHang, gatedCrash, "introspection.chain"}
	agent := append(append([]string{"@pyecho.user"}, agentOps...), gated...)
	exts := map[string]any{"introspection": map[string]any{"enabled": true, "scopes": []string{"t"}}}
	bindings := map[string]any{
		"plain": map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sh", "-c", agentScript}, "env": map[string]string{"CTL": ctl}},
			"operations": append(append([]string{}, agentOps...), gated...)},
	}
	ceiling := append([]string{}, agentOps...)
	ceiling = append(ceiling, gated...)
	if enabled {
		exts["pyecho"] = map[string]any{"enabled": true, "scopes": []string{"t"}, "config": map[string]any{
			"park": []string{gatedPark}, "refuse": []string{gatedRefuse}, "hang": []string{gatedHang}, "crash": []string{gatedCrash}}}
		bindings["agent"] = map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sh", "-c", agentScript}, "env": map[string]string{"CTL": ctl}},
			"operations": agent}
		bindings["runner"] = map[string]any{"executor": "pyecho.cmd", "config": map[string]any{"argv": argv}, "operations": []string{"@pyecho.user"}}
		ceiling = append(ceiling, "@pyecho.user")
	}
	cfg := map[string]any{"version": 1, "extensions": exts, "scopes": map[string]any{"t": map[string]any{
		"authorization": map[string]any{"operations": ceiling, "reads": []string{"work", "events"}},
		"bindings":      bindings,
	}}}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyConfig writes doc to a file and applies it through the CLI.
func (e *env) applyConfig(name string, doc []byte) {
	e.t.Helper()
	file := writeFile(e.t, filepath.Join(e.root, name), doc)
	if code, out, stderr := e.cli("config", "apply", file); code != 0 {
		e.t.Fatalf("config apply %s: exit %d %q %q", name, code, out, stderr)
	}
}

// echoed is what pyecho.echo answers.
type echoed struct {
	Echo      string `json:"echo"`
	RequestID string `json:"request_id"`
	PID       int    `json:"pid"`
}

// echoCall is the agent's call of the package's operation.
const echoCall = `os call pyecho.echo --input '{"text":"hello"}'`

// echo makes the agent's echo call, requires it to pass and returns the
// answering process's pid.
func echo(t *testing.T, a *agent) int {
	t.Helper()
	code, out, stderr := a.sh(echoCall)
	var got echoed
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Echo != "hello" || got.PID <= 0 {
		t.Fatalf("os call pyecho.echo: exit %d %q %q", code, out, stderr)
	}
	return got.PID
}

// echoOnceRestarted polls the agent's echo call until a process other
// than old answers it (the package restarted after a crash, with its
// backoff), and returns the new pid.
func echoOnceRestarted(t *testing.T, a *agent, old int) int {
	t.Helper()
	pid := 0
	until(t, "the package restarted after its process "+strconv.Itoa(old)+" ended", func() bool {
		code, out, _ := a.sh(echoCall)
		var got echoed
		if code == 0 && json.Unmarshal([]byte(out), &got) == nil && got.PID != old && got.PID > 0 {
			pid = got.PID
			return true
		}
		return false
	})
	return pid
}

// ppid is the parent of a live process (0 when it is gone).
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// processesIn lists the live processes whose working directory is dir:
// an installed package's, which the runtime starts in its files, and the
// subreaper it runs under, which starts there too.
func processesIn(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", ent.Name(), "cwd")); err == nil && cwd == dir && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// The Python package end to end on the release's protocol runtime:
// installed from its directory through the CLI, enabled by
// extensions.pyecho, its operation called from a shell execution through
// os call and refused for a binding without its toolset; its gate
// refusing one call, failing closed (gate_failed) when it hangs and when
// its process crashes, and parking another; its executor running a Work;
// its process restarted after a kill -9, run under the daemon's
// subreaper, and stopped on packages remove, on shutdown and when the
// daemon is killed -9.
func TestPythonPackageEndToEnd(t *testing.T) {
	needPython(t)
	e := newEnv(t)
	d := e.start()
	src := pyechoSource(t)

	code, out, stderr := e.cli("packages", "install", src, "--accept-permissions")
	if code != 0 || !strings.Contains(out, "operation pyecho.echo: Answer the text it is given.") || !strings.Contains(out, "toolset @pyecho.user: pyecho.echo") ||
		!strings.Contains(out, "operation.gate") || !strings.Contains(out, "executor.run") || !strings.Contains(out, "Installed pyecho 1.0.0 (running)") {
		t.Fatalf("install: exit %d %q %q", code, out, stderr)
	}
	files := filepath.Join(e.state, "packages", "pyecho", "files")

	ctl := filepath.Join(e.root, "c")
	if err := os.MkdirAll(ctl, 0o700); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(e.root, "runner.out")
	argv := []string{"sh", "-c", `os call pyecho.echo --input '{"text":"from the executor"}' > ` + strconv.Quote(mark)}
	e.applyConfig("pyecho.json", pyechoConfig(t, ctl, true, argv))

	// The operation, called from a shell execution granted @pyecho.user.
	w := e.createOn("t", "agent")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	pid := echo(t, a)
	// It runs under the daemon's own subreaper (open-conduit reap).
	reaper := ppid(pid)
	if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(reaper) + "/cmdline"); !strings.Contains(string(cmdline), "open-conduit\x00reap\x00--\x00") {
		t.Errorf("the package's parent %d runs %q, want open-conduit reap", reaper, cmdline)
	}
	// The package is handed the call's request id (never the token).
	if out := a.mustSh(`os call pyecho.echo --input '{"text":"hello"}' --request-id req-py-1`); !strings.Contains(out, `"request_id": "req-py-1"`) {
		t.Errorf("the echo with a request id answered %q", out)
	}
	// The package's own refusal of its operation passes through.
	if code, _, stderr := a.sh(`os call pyecho.echo --input '{"text":"x","refuse":true}'`); code != 1 || !strings.Contains(stderr, "refused") {
		t.Errorf("the refused echo: exit %d %q, want 1 refused", code, stderr)
	}

	// Its gate: an operation it refuses, one it hangs on (the runtime's
	// gate timeout ends it) and one it crashes on; the last two fail
	// closed.
	if code, _, stderr := a.sh("os call " + gatedRefuse); code != 1 || !strings.HasPrefix(stderr, "os: not_allowed: this operation is not allowed here") {
		t.Errorf("the call the gate refuses: exit %d %q, want 1 not_allowed", code, stderr)
	}
	if code, _, stderr := a.sh("os call " + gatedHang); code != 1 || !strings.Contains(stderr, "gate_failed") {
		t.Errorf("the call the gate hangs on: exit %d %q, want 1 gate_failed", code, stderr)
	}
	a.mustSh("os call introspection.chain --input '{\"event\":\"" + w.CreatedEvent + "\"}'") // an operation the gate does not list passes
	if code, _, stderr := a.sh("os call " + gatedCrash); code != 1 || !strings.Contains(stderr, "gate_failed") {
		t.Errorf("the call the gate crashes on: exit %d %q, want 1 gate_failed", code, stderr)
	}
	// The crashed process is restarted, and so is one killed -9.
	pid = echoOnceRestarted(t, a, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	pid = echoOnceRestarted(t, a, pid)

	// The parked call: the attempt's authority is released and the Work
	// waits on the gate's plan.
	code, out, stderr = a.sh("os call " + gatedPark)
	var parked struct {
		Parked string `json:"parked"`
		Output struct {
			Held string `json:"held"`
		} `json:"output"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &parked) != nil || parked.Parked != "pyecho" || parked.Output.Held != gatedPark {
		t.Fatalf("the parked call: exit %d %q %q, want it parked by pyecho", code, out, stderr)
	}
	if code, _, stderr := a.sh("os call read_context"); code != 1 || !strings.Contains(stderr, "authority_released") {
		t.Errorf("a call after the park: exit %d %q, want 1 authority_released", code, stderr)
	}
	a.exit(0)
	if got := e.waitWork(w.ID, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) }); got.State != "waiting" {
		t.Fatalf("Work %s is %s after the park, want waiting", w.ID, got.State)
	}

	// A binding without the grant is refused the operation.
	w2 := e.createOn("t", "plain")
	a2 := agentOf(t, ctl, e.runningExecution(w2.ID).ID)
	a2.mustSh("os call read_context") // what it is granted passes
	if code, out, stderr := a2.sh(echoCall); code != 1 || !strings.Contains(stderr, "forbidden") || strings.Contains(out, "hello") {
		t.Errorf("the call without the grant: exit %d %q %q, want 1 forbidden", code, out, stderr)
	}
	a2.exit(0)
	e.waitWork(w2.ID, "terminal", func(w work) bool { return terminal(w.State) })

	// Its executor runs a Work, which calls the package through os.
	w3 := e.createOn("t", "runner")
	if got := e.waitWork(w3.ID, "terminal", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the runner's Work is %s, want succeeded", got.State)
	}
	var ran echoed
	if b, err := os.ReadFile(mark); err != nil || json.Unmarshal(b, &ran) != nil || ran.Echo != "from the executor" {
		t.Fatalf("the executor's command wrote %q (%v)", b, err)
	}

	// The package's stderr is in its log under the state directory.
	if b, err := os.ReadFile(filepath.Join(e.state, "package-logs", "pyecho.log")); err != nil || !strings.Contains(string(b), "crashing on the gate call") {
		t.Errorf("the package's log: %v", err)
	}
	if strings.Contains(e.allLogs(), "crashing on the gate call") {
		t.Error("the package's stderr reached the daemon's log")
	}

	// packages remove stops its processes (the package and its
	// subreaper) before it answers.
	if code, out, stderr := e.cli("work", "cancel", w.ID); code != 0 {
		t.Fatalf("work cancel: exit %d %q %q", code, out, stderr)
	}
	e.applyConfig("without.json", pyechoConfig(t, ctl, false, nil))
	if procs := processesIn(files); len(procs) != 2 {
		t.Fatalf("before remove, the processes in the package's directory are %v, want the package and its subreaper", procs)
	}
	if code, out, stderr := e.cli("packages", "remove", "pyecho"); code != 0 || !strings.Contains(out, "Removed pyecho 1.0.0") {
		t.Fatalf("remove: exit %d %q %q", code, out, stderr)
	}
	for _, p := range []int{pid, reaper} {
		if alive(p) {
			t.Errorf("process %d is still running after packages remove", p)
		}
	}

	// Installed again, it runs; a graceful shutdown stops it.
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 {
		t.Fatalf("install again: exit %d %q %q", code, out, stderr)
	}
	procs := processesIn(files)
	if len(procs) != 2 {
		t.Fatalf("after install, the processes in the package's directory are %v", procs)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon stop: exit %d", code)
	}
	for _, p := range procs {
		if alive(p) {
			t.Errorf("process %d is still running after the daemon stopped", p)
		}
	}

	// A kill -9 of the daemon leaves no package process behind.
	d = e.start()
	procs = processesIn(files)
	if len(procs) != 2 {
		t.Fatalf("after a restart, the processes in the package's directory are %v", procs)
	}
	d.kill()
	until(t, "the package's processes ending with the daemon", func() bool {
		for _, p := range procs {
			if alive(p) {
				return false
			}
		}
		return true
	})
}

// Manifests refused at install, through the CLI with their diagnostics
// (exit 1, the JSON pointer and the code): pyecho asking for a permission
// nobody defined, squatting github or emit, or providing a gate without
// asking for operation.gate. A file of the installed copy changed while
// the daemon was stopped: the package does not run, its operation
// refuses, packages show and doctor say so and how to fix it.
func TestPythonPackageRefusals(t *testing.T) {
	needPython(t)
	e := newEnv(t)
	d := e.start()
	src := pyechoSource(t)
	cases := map[string]struct {
		edit func(string) string
		want string
	}{
		"undeclared permission": {func(m string) string {
			return strings.Replace(m, `"permissions": ["operation.gate", "executor.run"]`, `"permissions": ["operation.gate", "executor.run", "network.any"]`, 1)
		}, "open-conduit-package.json/permissions/2: unknown_permission"},
		"squatting github": {func(m string) string { return strings.ReplaceAll(m, "pyecho", "github") }, "open-conduit-package.json/name: name_taken"},
		"squatting emit":   {func(m string) string { return strings.ReplaceAll(m, "pyecho", "emit") }, "open-conduit-package.json/name: name_taken"},
		"gate without its permission": {func(m string) string {
			return strings.Replace(m, `"permissions": ["operation.gate", "executor.run"]`, `"permissions": ["executor.run"]`, 1)
		}, "open-conduit-package.json/provides/operation_gate: permission_required"},
	}
	for name, tc := range cases {
		dir := e.copyPackage(src, strings.ReplaceAll(name, " ", "-"), tc.edit)
		code, out, stderr := e.cli("packages", "install", dir, "--accept-permissions")
		if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(stderr, "does not check") {
			t.Errorf("%s: exit %d %q %q, want 1 and %q", name, code, out, stderr, tc.want)
		}
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	e.cliJSON(&list, "packages", "list")
	if len(list.Items) != 0 {
		t.Fatalf("a refused manifest was installed: %s", list.Items)
	}

	// Installed, enabled, then changed on disk while the daemon is stopped.
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 {
		t.Fatalf("install: exit %d %q %q", code, out, stderr)
	}
	ctl := filepath.Join(e.root, "c")
	if err := os.MkdirAll(ctl, 0o700); err != nil {
		t.Fatal(err)
	}
	e.applyConfig("pyecho.json", pyechoConfig(t, ctl, true, []string{"true"}))
	d.stop()
	main := filepath.Join(e.state, "packages", "pyecho", "files", "main.py")
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, append(b, []byte("\n# tampered after install\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	e.start()
	if procs := processesIn(filepath.Dir(main)); len(procs) != 0 {
		t.Errorf("the changed package runs: %v", procs)
	}
	code, out, _ := e.cli("packages", "show", "pyecho")
	if code != 0 || !strings.Contains(out, "changed") || !strings.Contains(out, "package_changed") || !strings.Contains(out, "open-conduit packages install") || strings.Contains(out, "tampered") {
		t.Fatalf("show: exit %d %q", code, out)
	}
	code, rep, _ := e.doctor()
	if code != 1 {
		t.Errorf("doctor exit %d, want 1", code)
	}
	if _, fix := findingOf(t, rep, "package_changed", "error"); !strings.Contains(fix, "open-conduit packages install") {
		t.Errorf("doctor's fix %q", fix)
	}
	w := e.createOn("t", "agent")
	a := agentOf(t, ctl, e.runningExecution(w.ID).ID)
	if code, _, stderr := a.sh(echoCall); code != 1 || !strings.Contains(stderr, "package_unavailable") || !strings.Contains(stderr, "package_changed") {
		t.Errorf("the changed package's operation: exit %d %q, want 1 package_unavailable", code, stderr)
	}
	a.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
	// Reinstalled from its directory, it runs again at once.
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 || !strings.Contains(out, "(running)") {
		t.Fatalf("reinstall: exit %d %q %q", code, out, stderr)
	}
}
