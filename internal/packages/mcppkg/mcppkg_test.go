package mcppkg

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// bound is the generous limit of every poll for a real event.
const bound = 60 * time.Second

// timers is the injected After: its timers fire only when the test says.
type timers struct {
	mu      sync.Mutex
	pending []timer
}

type timer struct {
	d  time.Duration
	ch chan time.Time
}

func (f *timers) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	f.pending = append(f.pending, timer{d, ch})
	return ch
}

// fire waits until a timer of d is pending, then fires it.
func (f *timers) fire(t *testing.T, d time.Duration) {
	t.Helper()
	eventually(t, "a timer of "+d.String(), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, tm := range f.pending {
			if tm.d == d {
				f.pending = slices.Delete(f.pending, i, i+1)
				tm.ch <- time.Time{}
				return true
			}
		}
		return false
	})
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still no %s", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kit is a package directory whose server is this test binary in mode.
func kit(t *testing.T, mode string, env map[string]string) packages.Installed {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
	e := map[string]string{testServerEnv: mode, testDirEnv: dir}
	for k, v := range env {
		e[k] = v
	}
	return packages.Installed{Dir: dir, Manifest: packages.Manifest{
		Name: "kit", Version: "v1.2.0", Kind: packages.KindMCP,
		Run: packages.Run{Command: []string{"./server"}, Env: e},
	}}
}

type rig struct {
	t      *testing.T
	timers *timers
	clock  *clock.Fake
	in     *Instance
}

func start(t *testing.T, pkg packages.Installed) *rig {
	t.Helper()
	return startWith(t, pkg, Options{})
}

// startWith starts pkg on a runtime of o with the rig's clock and timers.
func startWith(t *testing.T, pkg packages.Installed, o Options) *rig {
	t.Helper()
	r := &rig{t: t, timers: &timers{}, clock: clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	o.Clock, o.After = r.clock, r.timers.After
	inst, err := NewRuntime(o).Start(context.Background(), pkg)
	if err != nil {
		t.Fatal(err)
	}
	r.in = inst.(*Instance)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // by force: a test that wanted a polite stop did it
		_ = r.in.Stop(ctx)
	})
	return r
}

// op returns the registration's operation named name.
func (r *rig) op(name string) extension.Operation {
	r.t.Helper()
	for _, op := range r.in.Registration().Operations {
		if op.Name == name {
			return op
		}
	}
	r.t.Fatalf("no operation %s among %v", name, opNames(r.in.Registration()))
	return extension.Operation{}
}

// call calls the operation name through its handler.
func (r *rig) call(name, requestID string, input string) (json.RawMessage, error) {
	r.t.Helper()
	return r.op(name).Handler(context.Background(), extension.Authority{Operation: name, RequestID: requestID}, json.RawMessage(input))
}

func (r *rig) mustCall(name, input string) map[string]any {
	r.t.Helper()
	out, err := r.call(name, "req-1", input)
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		r.t.Fatalf("%s answered %s, not an object: %v", name, out, err)
	}
	return m
}

// pid is the running server's pid (0 when none runs).
func (r *rig) pid() int {
	r.in.mu.Lock()
	defer r.in.mu.Unlock()
	if r.in.cur == nil {
		return 0
	}
	return r.in.cur.p.cmd.Process.Pid
}

func (r *rig) waitState(state string) packages.Health {
	r.t.Helper()
	var h packages.Health
	eventually(r.t, "health "+state, func() bool { h = r.in.Health(); return h.State == state })
	return h
}

// gone reports whether no process has pid (reaped, not a zombie).
func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

func opNames(reg extension.Registration) []string {
	var out []string
	for _, op := range reg.Operations {
		out = append(out, op.Name)
	}
	return out
}

func toolset(t *testing.T, reg extension.Registration, name, since string) []string {
	t.Helper()
	for _, ts := range reg.Toolsets {
		if ts.Name == name {
			for _, m := range ts.Operations {
				if m.Since != since {
					t.Errorf("%s: %s joined in %q, want %q (the manifest's version)", name, m.Name, m.Since, since)
				}
			}
			return ts.Names()
		}
	}
	t.Fatalf("no toolset %s", name)
	return nil
}

// The reference memory server, as a package: its tools are memory.*
// operations, its read-only ones @memory.read; entities created through
// the handlers are read back; a crash is followed by a restart after the
// backoff and calls work again; Stop leaves no process.
func TestMemoryServer(t *testing.T) {
	bin := agenttest.MCPMemory(t)
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
	memory := filepath.Join(t.TempDir(), "memory.jsonl")
	pkg := packages.Installed{Dir: dir, Manifest: packages.Manifest{
		Name: "memory", Version: "2026.8.31", Kind: packages.KindMCP,
		Run: packages.Run{Command: []string{"./server"}, Env: map[string]string{"MEMORY_FILE_PATH": memory}},
	}}
	r := start(t, pkg)
	reg := r.in.Registration()
	if reg.Name != "memory" || !reg.OptIn || len(r.in.Executors()) != 0 {
		t.Fatalf("registration %s, OptIn %v: want memory, opt-in", reg.Name, reg.OptIn)
	}
	wantAll := []string{"memory.add_observations", "memory.create_entities", "memory.create_relations", "memory.delete_entities",
		"memory.delete_observations", "memory.delete_relations", "memory.open_nodes", "memory.read_graph", "memory.search_nodes"}
	if got := opNames(reg); !slices.Equal(got, wantAll) {
		t.Fatalf("operations %v, want %v", got, wantAll)
	}
	if got := toolset(t, reg, "memory.all", "2026.8.31"); !slices.Equal(got, wantAll) {
		t.Errorf("memory.all is %v, want %v", got, wantAll)
	}
	if got, want := toolset(t, reg, "memory.read", "2026.8.31"), []string{"memory.open_nodes", "memory.read_graph", "memory.search_nodes"}; !slices.Equal(got, want) {
		t.Errorf("memory.read is %v, want the tools annotated read-only %v", got, want)
	}
	for _, ts := range reg.Toolsets {
		if err := extension.CheckToolset(reg.Name, ts); err != nil {
			t.Errorf("toolset %s: %v", ts.Name, err)
		}
	}
	ce := r.op("memory.create_entities")
	if ce.Summary != "Create multiple new entities in the knowledge graph" || !strings.Contains(string(ce.InputSchema), `"entities"`) {
		t.Errorf("create_entities: summary %q, schema %s", ce.Summary, ce.InputSchema)
	}

	created := r.mustCall("memory.create_entities", `{"entities":[{"name":"conduit","entityType":"project","observations":["runs work"]}]}`)
	if ents, _ := created["entities"].([]any); len(ents) != 1 {
		t.Fatalf("create_entities answered %v", created)
	}
	readBack := func() {
		t.Helper()
		g := r.mustCall("memory.read_graph", `{}`)
		b, _ := json.Marshal(g["entities"])
		if !strings.Contains(string(b), `"name":"conduit"`) || !strings.Contains(string(b), "runs work") {
			t.Fatalf("read_graph answered %v, want the entity created", g)
		}
	}
	readBack()
	found := r.mustCall("memory.search_nodes", `{"query":"runs"}`)
	if b, _ := json.Marshal(found); !strings.Contains(string(b), "conduit") {
		t.Fatalf("search_nodes answered %s", b)
	}

	// A crash: the server is killed; the next restart waits out the
	// backoff on the injected timer, then calls work again.
	first := r.pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h := r.waitState("restarting")
	if h.LastError != "the MCP server was killed by signal 9" || h.CrashLoop {
		t.Fatalf("after a crash, health %+v", h)
	}
	if _, err := r.call("memory.read_graph", "req-2", `{}`); !errors.As(err, new(*UnavailableError)) {
		t.Fatalf("a call while it restarts answered %v, want UnavailableError", err)
	}
	r.timers.fire(t, time.Second)
	h = r.waitState("running")
	if h.Restarts != 1 || r.pid() == first {
		t.Fatalf("after the restart, health %+v and pid %d (was %d)", h, r.pid(), first)
	}
	readBack()

	// Stop: the server ends at the end of its input; nothing is left.
	last := r.pid()
	if err := r.in.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !gone(last) || !gone(first) {
		t.Fatalf("after Stop, pid %d or %d is still there", last, first)
	}
	if h := r.in.Health(); h.State != "stopped" {
		t.Fatalf("after Stop, health %+v", h)
	}
	if _, err := r.call("memory.read_graph", "req-3", `{}`); !errors.As(err, new(*UnavailableError)) {
		t.Fatalf("a call after Stop answered %v, want UnavailableError", err)
	}
}

// Every page of the tool list is read; names map to operations, and a name
// that does not map or collides with another is skipped, never renamed.
func TestToolsBecomeOperations(t *testing.T) {
	r := start(t, kit(t, "kit", nil))
	reg := r.in.Registration()
	want := []string{"kit.crash", "kit.echo", "kit.fail", "kit.hide", "kit.list", "kit.pid", "kit.write_note"}
	if got := opNames(reg); !slices.Equal(got, want) {
		t.Fatalf("operations %v, want %v (all pages of 2, Write.Note as write_note)", got, want)
	}
	if got := toolset(t, reg, "kit.read", "v1.2.0"); !slices.Equal(got, []string{"kit.echo", "kit.pid"}) {
		t.Errorf("kit.read is %v", got)
	}
	if got := toolset(t, reg, "kit.all", "v1.2.0"); !slices.Equal(got, want) {
		t.Errorf("kit.all is %v", got)
	}
	var skipped []string
	for _, s := range r.in.Skipped() {
		skipped = append(skipped, s.Tool+": "+s.Reason)
	}
	wantSkipped := []string{
		`"9lives": its name does not map to an operation name (letters, digits, '-', '_' and '.', starting with a letter)`,
		`"Dup": 2 tools map to the operation name kit.dup, so none of them is registered`,
		`"dup": 2 tools map to the operation name kit.dup, so none of them is registered`,
	}
	if !slices.Equal(skipped, wantSkipped) {
		t.Fatalf("skipped %q, want %q", skipped, wantSkipped)
	}
	echo := r.op("kit.echo")
	if echo.Summary != "Echo the text back." || echo.Guidance != "Echo the text back. It also says which request ID it saw.\n\nUse it to test." {
		t.Errorf("echo: summary %q, guidance %q", echo.Summary, echo.Guidance)
	}
	if !strings.Contains(string(echo.InputSchema), `"text"`) {
		t.Errorf("echo's schema %s", echo.InputSchema)
	}
}

// Results: structuredContent verbatim when it is an object, else the
// content blocks (and a non-object structuredContent beside them); isError
// is an operation error with a bounded one-line message.
func TestResults(t *testing.T) {
	r := start(t, kit(t, "kit", nil))
	out, err := r.call("kit.echo", "req-echo", `{"text":"hi"}`)
	if err != nil || string(out) != `{"request_id":"req-echo","said":"hi"}` {
		t.Fatalf("echo answered %s, %v", out, err)
	}
	out, err = r.call("kit.write_note", "", ``)
	if err != nil || string(out) != `{"content":[{"type":"text","text":"noted"}]}` {
		t.Fatalf("write_note answered %s, %v", out, err)
	}
	out, err = r.call("kit.list", "", `{}`)
	if err != nil || string(out) != `{"content":[{"type":"text","text":"structured"}],"structured":[1,2]}` {
		t.Fatalf("list answered %s, %v", out, err)
	}
	_, err = r.call("kit.fail", "", `{}`)
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != CodeToolError || oe.Message != "no such thing" {
		t.Fatalf("fail answered %v, want %s with its text on one line", err, CodeToolError)
	}
}

// A tool the running server drops (notifications/tools/list_changed) is
// refused with a stable code; the registration does not change.
func TestListChanged(t *testing.T) {
	r := start(t, kit(t, "kit", nil))
	if _, err := r.call("kit.hide", "", `{}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "refusal of the dropped tool", func() bool {
		_, err := r.call("kit.list", "", `{}`)
		var oe *extension.OperationError
		return errors.As(err, &oe) && oe.Code == CodeToolUnavailable
	})
	if !slices.Contains(opNames(r.in.Registration()), "kit.list") {
		t.Fatal("the registration lost kit.list")
	}
	if _, err := r.call("kit.echo", "", `{}`); err != nil {
		t.Fatalf("echo: %v", err)
	}
}

// A crash in the middle of a call is a host error whose text says nothing
// of the server; after the restart, a tool the server no longer lists is
// refused with a stable code, and a new tool stays unregistered. Repeated
// crashes grow the backoff and show as a crash loop.
func TestCrashAndShrink(t *testing.T) {
	r := start(t, kit(t, "kit", map[string]string{testShrinkEnv: "1"}))
	_, err := r.call("kit.crash", "req-c", `{}`)
	if !errors.As(err, new(*TransportError)) || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("a crash mid-call answered %v, want TransportError", err)
	}
	h := r.waitState("restarting")
	if h.LastError != "the MCP server exited with status 3" {
		t.Fatalf("health %+v", h)
	}
	r.timers.fire(t, time.Second)
	r.waitState("running")
	if _, err := r.call("kit.echo", "", `{"text":"back"}`); err != nil {
		t.Fatalf("echo after the restart: %v", err)
	}
	_, err = r.call("kit.write_note", "", `{}`)
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != CodeToolUnavailable {
		t.Fatalf("a vanished tool answered %v, want %s", err, CodeToolUnavailable)
	}
	if slices.Contains(opNames(r.in.Registration()), "kit.extra") {
		t.Fatal("a tool listed after the restart was registered")
	}

	// Two more crashes within the window: backoffs of 2s and 4s, and a
	// crash loop.
	r.clock.Advance(time.Minute)
	_, _ = r.call("kit.crash", "", `{}`)
	r.timers.fire(t, 2*time.Second)
	r.waitState("running")
	r.clock.Advance(time.Minute)
	_, _ = r.call("kit.crash", "", `{}`)
	h = r.waitState("restarting")
	if !h.CrashLoop || h.Restarts != 2 {
		t.Fatalf("after three crashes in three minutes, health %+v", h)
	}
	r.timers.fire(t, 4*time.Second)
	r.waitState("running")
	// Past the window, the crash loop is over.
	r.clock.Advance(10 * time.Minute)
	if h := r.in.Health(); h.CrashLoop || h.Restarts != 3 {
		t.Fatalf("ten minutes later, health %+v", h)
	}
}

// A server that ignores the end of its input and SIGTERM is killed with
// its whole group: Stop leaves neither it nor its child.
func TestStopEscalates(t *testing.T) {
	r := start(t, kit(t, "stubborn", nil))
	pids := r.mustCall("kit.pid", `{}`)
	pid, child := int(pids["pid"].(float64)), int(pids["child"].(float64))
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) }) // should Stop fail to
	stopped := make(chan error, 1)
	go func() { stopped <- r.in.Stop(context.Background()) }()
	r.timers.fire(t, 5*time.Second) // SIGTERM, ignored
	select {
	case <-stopped:
		t.Fatal("Stop returned while the server still ran")
	default:
	}
	r.timers.fire(t, 5*time.Second) // SIGKILL of the group
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Fatalf("the server %d is still there", pid)
	}
	eventually(t, "end of the server's child", func() bool { return gone(child) })
}

// A kill -9 of the daemon takes its servers with it (Pdeathsig): here the
// daemon is this test binary in host mode.
func TestDaemonKilled(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "server")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), testHostEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	var pids struct{ Pid, Child int }
	if err != nil || json.Unmarshal([]byte(line), &pids) != nil || pids.Pid == 0 || pids.Child == 0 {
		t.Fatalf("the host said %q (%v)", line, err)
	}
	// Pdeathsig reaches the server only: the child it started (in its
	// group) is left, as docs/packages-mcp.md says.
	t.Cleanup(func() { _ = syscall.Kill(pids.Pid, syscall.SIGKILL); _ = syscall.Kill(pids.Child, syscall.SIGKILL) })
	if dead(pids.Pid) {
		t.Fatalf("the server %d is not running before the host is killed", pids.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually(t, "end of the killed daemon's server", func() bool { return dead(pids.Pid) })
}

// dead reports whether pid is gone or a zombie (an orphan whose new parent
// has not reaped it yet).
func dead(pid int) bool {
	if gone(pid) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// A server that exits before it answers fails Start, leaving nothing; a
// command outside the package directory is refused before anything runs.
func TestStartFails(t *testing.T) {
	_, err := NewRuntime(Options{}).Start(context.Background(), kit(t, "exit", nil))
	var se *StartError
	if !errors.As(err, &se) || se.Step != "initialize" {
		t.Fatalf("a server that exits answered %v, want a StartError at initialize", err)
	}
	pkg := kit(t, "kit", nil)
	pkg.Manifest.Run.Command = []string{"../server"}
	if _, err := NewRuntime(Options{}).Start(context.Background(), pkg); err == nil || !strings.Contains(err.Error(), "outside the package directory") {
		t.Fatalf("a command outside the directory answered %v", err)
	}
	pkg.Manifest.Kind = packages.KindProtocol
	if _, err := NewRuntime(Options{}).Start(context.Background(), pkg); !errors.Is(err, extension.ErrInvalid) {
		t.Fatalf("a protocol package answered %v", err)
	}
}

func TestOperationSuffix(t *testing.T) {
	for in, want := range map[string]string{
		"read_graph": "read_graph", "ReadGraph": "readgraph", "files.read": "files_read", "get-item": "get-item",
		"9lives": "", "_x": "", "a/b": "", "a b": "", "": "", "é": "", "-x": "",
	} {
		got, ok := OperationSuffix(in)
		if got != want || ok != (want != "") {
			t.Errorf("OperationSuffix(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got := firstSentence("One. Two.\nThree"); got != "One." {
		t.Errorf("firstSentence: %q", got)
	}
	long := strings.Repeat("word ", 100)
	if got := firstSentence(long); len(got) > maxSummary || !strings.HasSuffix(got, "…") {
		t.Errorf("a long first sentence became %q", got)
	}
	if got := bounded("a\x00b", 10); got != "a\uFFFDb" {
		t.Errorf("bounded kept a control character: %q", got)
	}
}

// With a LogDir, what the server writes on stderr goes to <name>.log
// there, owner-only, across its restarts, and to nowhere else: not into
// an error or health.
func TestStderrIsLogged(t *testing.T) {
	logs := t.TempDir()
	r := startWith(t, kit(t, "kit", map[string]string{testStderrEnv: "1"}), Options{LogDir: logs})
	_, _ = r.call("kit.crash", "", `{}`)
	r.waitState("restarting")
	r.timers.fire(t, time.Second)
	r.waitState("running")
	if err := r.in.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(logs, "kit.log")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "mcppkg-test start 1\nmcppkg-test start 2\n" {
		t.Fatalf("kit.log holds %q, want both starts", got)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kit.log: %v, mode %v, want 0600", err, st.Mode().Perm())
	}
	if h := r.in.Health(); strings.Contains(h.LastError, "mcppkg-test") {
		t.Fatalf("the server's stderr reached its health: %+v", h)
	}
}
