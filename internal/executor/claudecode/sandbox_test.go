package claudecode

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

// fakeBwrap stands in for bwrap: it answers the probe (whose last argument
// is --version), and otherwise records its argv and environment beside
// itself and prints the fake agent's stream, as the agent inside would.
const fakeBwrap = `#!/bin/sh
here=$(dirname "$0")
for a in "$@"; do last=$a; done
if [ "$last" = "--version" ]; then exit 0; fi
printf '%s\n' "$@" > "$here/bwrap-argv"
env > "$here/bwrap-env"
cat > /dev/null
cat "$here/stream.jsonl"
`

// TestSandboxedByDefault: a config without "sandbox" runs the agent under
// bwrap, with the execution's home and working directory writable, the run
// directory and the os binary read-only at their fixed paths, and the
// toolbelt and proxy as the agent sees them inside.
func TestSandboxedByDefault(t *testing.T) {
	b := setup(t)
	self, _ := os.Executable()
	write(t, filepath.Join(b.bin, "bwrap"), fakeBwrap, 0o700)
	run := filepath.Join(b.tmp, "state", "runs", "k")
	if err := os.MkdirAll(filepath.Join(run, "token"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(run, "token", "token"), tokenCanary+"\n", 0o600)
	b.ctx.ToolbeltEndpoint, b.ctx.ToolbeltTokenFile = filepath.Join(run, "toolbelt.sock"), filepath.Join(run, "token", "token")
	e, err := New(agentrun.Options{Supervisor: self, Clock: clock.System{}, After: b.timers.After, ParkGrace: parkGrace,
		Workspaces: filepath.Join(b.tmp, "ws"), Sandbox: &sandbox.Runtime{Program: filepath.Join(b.bin, "bwrap")}})
	if err != nil {
		t.Fatal(err)
	}
	b.stream(t, initLine, resultLine)
	req := b.request(1)
	req.Config = []byte(strings.Replace(string(req.Config), `"sandbox": {"enabled": false}, `, "", 1))
	res := mustRun(t, e, req)
	if res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v", res)
	}
	argv := strings.Split(strings.TrimSpace(b.recorded(t, "bwrap-argv")), "\n")
	home, work := filepath.Join(b.dir, "home"), filepath.Join(b.dir, "work")
	has := func(seq ...string) {
		t.Helper()
		for i := range argv {
			if i+len(seq) <= len(argv) && slices.Equal(argv[i:i+len(seq)], seq) {
				return
			}
		}
		t.Errorf("bwrap's argv lacks %q:\n%s", seq, strings.Join(argv, " "))
	}
	has("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent", "--cap-drop", "ALL")
	has("--ro-bind", run, sandbox.RunDir)
	has("--ro-bind", b.ctx.ToolbeltDir, sandbox.BinDir)
	has("--bind", home, home)
	has("--bind", work, work)
	has("--tmpfs", "/tmp")
	has("--remount-ro", "/", "--chdir", work, "--", sandbox.InitProgram, sandbox.InitCommand, "--bridge", sandbox.EgressSocket, "--", filepath.Join(b.bin, "claude"), "-p")
	for _, a := range argv {
		if a == b.dir || a == b.tmp || a == filepath.Join(b.tmp, "state") || strings.Contains(a, apiKeyCanary) {
			t.Errorf("bwrap's argv holds %q", a)
		}
	}
	env := b.recorded(t, "bwrap-env")
	for _, want := range []string{"OS_ENDPOINT=" + sandbox.Endpoint, "OS_TOKEN_FILE=" + sandbox.TokenFile, "PATH=" + sandbox.BinDir + ":",
		"HTTPS_PROXY=" + sandbox.ProxyURL, "http_proxy=" + sandbox.ProxyURL, "NO_PROXY=\n", "ANTHROPIC_API_KEY=" + apiKeyCanary} {
		if !strings.Contains(env, want) {
			t.Errorf("the environment lacks %q", want)
		}
	}
	mcp, err := os.ReadFile(filepath.Join(home, ".claude", "open-conduit-mcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{sandbox.BinDir + "/os", sandbox.Endpoint, sandbox.TokenFile} {
		if !strings.Contains(string(mcp), want) {
			t.Errorf("the MCP configuration lacks %q: %s", want, mcp)
		}
	}
}

// TestSandboxUnavailableHoldsRatherThanRuns: with no bwrap, a default
// (sandboxed) binding is refused before anything starts.
func TestSandboxUnavailableHoldsRatherThanRuns(t *testing.T) {
	b := setup(t)
	self, _ := os.Executable()
	e, err := New(agentrun.Options{Supervisor: self, Clock: clock.System{}, After: b.timers.After,
		Sandbox: &sandbox.Runtime{Program: filepath.Join(b.tmp, "no-bwrap")}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := []byte(`{"binary": "` + filepath.Join(b.bin, "claude") + `", "model": "m", "prompt": "p"}`)
	if ue, ok := e.Preflight(cfg).(*executor.UnavailableError); !ok || ue.Reason != executor.ReasonSandboxUnavailable {
		t.Fatalf("Preflight = %v", e.Preflight(cfg))
	}
	req := b.request(1)
	req.Config = cfg
	if _, err := e.Run(t.Context(), req); err == nil {
		t.Fatal("Run ran without a sandbox")
	}
	if _, err := os.Stat(filepath.Join(b.bin, "argv")); err == nil {
		t.Fatal("the agent ran")
	}
}
