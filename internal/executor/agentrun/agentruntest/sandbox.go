package agentruntest

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

// Sandboxed is what one agent's sandboxed launch must show beyond what
// every agent's does.
type Sandboxed struct {
	// Stream is a successful segment's stream.
	Stream []string
	// Subcommand is the CLI's first argument (-p, exec).
	Subcommand string
	// Env are the agent's own variables its environment must hold,
	// given the execution's home.
	Env func(home string) []string
	// MCPConfig is the file, relative to the home, where the CLI reads
	// its MCP configuration.
	MCPConfig string
}

// CheckSandboxedByDefault: a config without "sandbox" runs the agent under
// bwrap, with the execution's home and working directory writable, the run
// directory and the os binary read-only at their fixed paths, and the
// toolbelt and proxy as the agent sees them inside.
func CheckSandboxedByDefault(t *testing.T, agent Agent, want Sandboxed) {
	b := NewBench(t, agent)
	self, _ := os.Executable()
	Write(t, filepath.Join(b.Bin, "bwrap"), fakeBwrap, 0o700)
	run := filepath.Join(b.Tmp, "state", "runs", "k")
	if err := os.MkdirAll(filepath.Join(run, "token"), 0o700); err != nil {
		t.Fatal(err)
	}
	Write(t, filepath.Join(run, "token", "token"), TokenCanary+"\n", 0o600)
	b.Ctx.ToolbeltEndpoint, b.Ctx.ToolbeltTokenFile = filepath.Join(run, "toolbelt.sock"), filepath.Join(run, "token", "token")
	e, err := agent.New(agentrun.Options{Supervisor: self, Clock: clock.System{}, After: b.Timers.After, ParkGrace: ParkGrace,
		Workspaces: filepath.Join(b.Tmp, "ws"), Sandbox: &sandbox.Runtime{Program: filepath.Join(b.Bin, "bwrap")}})
	if err != nil {
		t.Fatal(err)
	}
	b.Stream(t, want.Stream...)
	req := b.Request(1)
	req.Config = []byte(strings.Replace(string(req.Config), `"sandbox": {"enabled": false}, `, "", 1))
	res := MustRun(t, e, req)
	if res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v", res)
	}
	argv := strings.Split(strings.TrimSpace(b.Recorded(t, "bwrap-argv")), "\n")
	home, work := filepath.Join(b.Dir, "home"), filepath.Join(b.Dir, "work")
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
	has("--ro-bind", b.Ctx.ToolbeltDir, sandbox.BinDir)
	has("--bind", home, home)
	has("--bind", work, work)
	has("--tmpfs", "/tmp")
	has("--remount-ro", "/", "--chdir", work, "--", sandbox.InitProgram, sandbox.InitCommand, "--bridge", sandbox.EgressSocket, "--", b.Program(), want.Subcommand)
	for _, a := range argv {
		if a == b.Dir || a == b.Tmp || a == filepath.Join(b.Tmp, "state") || strings.Contains(a, APIKeyCanary) {
			t.Errorf("bwrap's argv holds %q", a)
		}
	}
	env := b.Recorded(t, "bwrap-env")
	wantEnv := []string{"OS_ENDPOINT=" + sandbox.Endpoint, "OS_TOKEN_FILE=" + sandbox.TokenFile, "PATH=" + sandbox.BinDir + ":",
		"HTTPS_PROXY=" + sandbox.ProxyURL, "http_proxy=" + sandbox.ProxyURL, "NO_PROXY=\n", agent.KeyVar + "=" + APIKeyCanary}
	if want.Env != nil {
		wantEnv = append(wantEnv, want.Env(home)...)
	}
	for _, w := range wantEnv {
		if !strings.Contains(env, w) {
			t.Errorf("the environment lacks %q", w)
		}
	}
	mcp, err := os.ReadFile(filepath.Join(home, want.MCPConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{sandbox.BinDir + "/os", sandbox.Endpoint, sandbox.TokenFile} {
		if !strings.Contains(string(mcp), w) {
			t.Errorf("the MCP configuration lacks %q: %s", w, mcp)
		}
	}
}

// CheckSandboxUnavailableHoldsRatherThanRuns: with no bwrap, a default
// (sandboxed) binding is refused before anything starts.
func CheckSandboxUnavailableHoldsRatherThanRuns(t *testing.T, agent Agent) {
	b := NewBench(t, agent)
	self, _ := os.Executable()
	e, err := agent.New(agentrun.Options{Supervisor: self, Clock: clock.System{}, After: b.Timers.After,
		Sandbox: &sandbox.Runtime{Program: filepath.Join(b.Tmp, "no-bwrap")}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := []byte(`{"binary": "` + b.Program() + `", "model": "m", "prompt": "p"}`)
	if ue, ok := e.Preflight(cfg).(*executor.UnavailableError); !ok || ue.Reason != executor.ReasonSandboxUnavailable {
		t.Fatalf("Preflight = %v", e.Preflight(cfg))
	}
	req := b.Request(1)
	req.Config = cfg
	if _, err := e.Run(t.Context(), req); err == nil {
		t.Fatal("Run ran without a sandbox")
	}
	if _, err := os.Stat(filepath.Join(b.Bin, "argv")); err == nil {
		t.Fatal("the agent ran")
	}
}
