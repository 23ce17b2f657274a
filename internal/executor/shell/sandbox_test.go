package shell

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

// needBwrap skips a test that needs a working bwrap, and fails it under CI.
func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := (&sandbox.Runtime{}).Check(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs a working bwrap: %v", err)
		}
		t.Skipf("needs bwrap (apt-get install bubblewrap): %v", err)
	}
}

// serveUnix serves a Unix socket at path that answers each connection's
// line with "egress:" and the line.
func serveUnix(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "egress:"+line)
			}()
		}
	}()
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// sandboxState lays out a state directory as the daemon does: the os
// binary (this test binary), a management socket, an operator token, the
// execution's run directory with its token, toolbelt socket and an egress
// socket the test serves, and another execution's run directory.
func sandboxState(t *testing.T) (state string, ctx executor.ExecutionContext) {
	t.Helper()
	state = t.TempDir()
	for _, d := range []string{"bin", "playbooks", "executions/exe1/work", "runs/mine/token", "runs/other/token"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := os.Executable()
	copyFile(t, self, filepath.Join(state, "bin", "os"), 0o755)
	for _, f := range []string{"runs/mine/token/token", "runs/other/token/token", "token"} {
		if err := os.WriteFile(filepath.Join(state, f), []byte("secret-"+filepath.Base(filepath.Dir(f))+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, sock := range []string{"management.sock", "runs/mine/toolbelt.sock"} {
		ln, err := net.Listen("unix", filepath.Join(state, sock))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	serveUnix(t, filepath.Join(state, "runs/mine/egress.sock"))
	return state, executor.ExecutionContext{
		ToolbeltDir: filepath.Join(state, "bin"), PlaybookDir: filepath.Join(state, "playbooks"),
		ToolbeltEndpoint:  filepath.Join(state, "runs/mine/toolbelt.sock"),
		ToolbeltTokenFile: filepath.Join(state, "runs/mine/token/token"),
	}
}

func sandboxedRequest(t *testing.T, state string, ctx executor.ExecutionContext, script string, env map[string]string) executor.RunRequest {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{
		"command": []string{"sh", "-c", script},
		"env":     env,
		"sandbox": map[string]bool{"enabled": true},
	})
	return executor.RunRequest{
		ExecutionID: "exe1", WorkID: "wrk1", ScopeID: "setup", BindingID: "shell", Epoch: 1,
		Config: raw, Dir: filepath.Join(state, "executions/exe1"), Context: ctx,
	}
}

// TestSandboxedCommand runs a real command under real bwrap in a
// state-directory-like layout and checks, from inside, what it can see,
// write and reach.
func TestSandboxedCommand(t *testing.T) {
	needBwrap(t)
	b := setup(t)
	state, ctx := sandboxState(t)
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()

	script := strings.Join([]string{
		`echo hello > out.txt && echo work-writable`,
		`touch /usr/x 2>/dev/null && echo usr-writable || echo usr-readonly`,
		`touch /etc/x 2>/dev/null && echo etc-writable || echo etc-readonly`,
		`for p in "$STATE/management.sock" "$STATE/token" "$STATE/runs/other" "$STATE/runs/mine" "$STATE/bin"; do test -e "$p" && echo "visible:$p"; done`,
		`test -r /etc/shadow && echo shadow-visible`,
		`test -S "$OS_ENDPOINT" && echo endpoint-socket`,
		`echo "token:$(cat "$OS_TOKEN_FILE")"`,
		`echo "proxy:$HTTPS_PROXY:$http_proxy:[$NO_PROXY]"`,
		`/run/open-conduit/init dial 127.0.0.1:3128`,
		`/run/open-conduit/init dial "$HOSTADDR"`,
		`echo done`,
	}, "\n")
	req := sandboxedRequest(t, state, ctx, script, map[string]string{"STATE": state, "HOSTADDR": host.Addr().String()})
	res, err := await(t, start(func() (executor.Result, error) { return b.exec.Run(t.Context(), req) }))
	if err != nil {
		t.Fatal(err)
	}
	log := readLog(t, res)
	if res.Outcome != executor.Succeeded {
		t.Fatalf("outcome %s (%s), log:\n%s", res.Outcome, res.Message, log)
	}
	for _, want := range []string{"work-writable", "usr-readonly", "etc-readonly", "endpoint-socket", "token:secret-token",
		"proxy:http://127.0.0.1:3128:http://127.0.0.1:3128:[]", "dial-got:egress:ping", "dial-refused", "done"} {
		if !strings.Contains(log, want+"\n") {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	for _, bad := range []string{"visible:", "shadow-visible", "secret-other"} {
		if strings.Contains(log, bad) {
			t.Errorf("log has %q:\n%s", bad, log)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(req.Dir, "work", "out.txt")); string(got) != "hello\n" {
		t.Errorf("work/out.txt = %q, want the command's write", got)
	}
}

// TestSandboxUnavailable: a binding that asks for a sandbox this machine
// cannot make is refused before anything runs, with the stable reason.
func TestSandboxUnavailable(t *testing.T) {
	b := setup(t, func(o *Options) { o.Sandbox = &sandbox.Runtime{Program: filepath.Join(t.TempDir(), "no-bwrap")} })
	raw := json.RawMessage(`{"command": ["true"], "sandbox": {"enabled": true}}`)
	for name, err := range map[string]error{
		"preflight": b.exec.Preflight(raw),
		"run": func() error {
			_, err := b.exec.Run(t.Context(), executor.RunRequest{Config: raw, Dir: b.dir})
			return err
		}(),
	} {
		ue, ok := err.(*executor.UnavailableError)
		if !ok || ue.Reason != executor.ReasonSandboxUnavailable || !strings.Contains(ue.Detail, "bubblewrap") {
			t.Errorf("%s: err = %v, want sandbox_unavailable naming bubblewrap", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.dir, "supervisor.json")); err == nil {
		t.Error("a supervisor was started")
	}
	if err := b.exec.Preflight(json.RawMessage(`{"command": ["true"]}`)); err != nil {
		t.Errorf("preflight of an unsandboxed binding = %v", err)
	}
}

// TestSandboxedStopGivesTheGrace: the polite stop reaches the command
// inside the sandbox (once, through sandbox-init), which can end on its
// own within the grace; bwrap does not die of it first.
func TestSandboxedStopGivesTheGrace(t *testing.T) {
	needBwrap(t)
	b := setup(t)
	state, ctx := sandboxState(t)
	req := sandboxedRequest(t, state, ctx, `trap 'echo termed >> terms; exit 7' TERM; echo up > ready; sleep 1000 & wait`, map[string]string{})
	ready := filepath.Join(req.Dir, "work", "ready")
	if err := unix.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	running := start(func() (executor.Result, error) { return b.exec.Run(t.Context(), req) })
	readFifo(t, ready)
	stopped := make(chan error, 1)
	go func() { stopped <- b.exec.Stop(t.Context(), req, 5*time.Second) }()
	b.timers.next(t) // the grace, never fired
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("Stop never returned: the command did not end within its grace")
	}
	res, err := await(t, running)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != executor.Cancelled || !strings.Contains(res.Message, "exited with status 7") {
		t.Errorf("Run = %+v, want cancelled after the command's own exit 7", res)
	}
	if got, _ := os.ReadFile(filepath.Join(req.Dir, "work", "terms")); string(got) != "termed\n" {
		t.Errorf("the command saw SIGTERM %q times, want once", got)
	}
}
