package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
)

// memoryManifest wraps the reference MCP server as the package memory:
// its command is looked up on the daemon's PATH, its state file (@STATEFILE@) is
// outside the package.
const memoryManifest = `{
  "name": "memory",
  "version": "2026.8.31",
  "kind": "mcp",
  "summary": "A knowledge graph the agents can write to and read back.",
  "run": {"command": ["mcp-server-memory"], "env": {"MEMORY_FILE_PATH": "@STATEFILE@"}}
}`

// memoryConfig is a configuration with one scope, t, where the memory
// package and the human extension (approving memory.delete_entities) are
// enabled: the binding agent (the steered shell job) is granted
// @memory.all, reader @memory.read, plain neither.
func memoryConfig(t *testing.T, ctl string) []byte {
	t.Helper()
	job := func(ops []string) map[string]any {
		return map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sh", "-c", agentScript}, "env": map[string]string{"CTL": ctl}},
			"operations": ops}
	}
	with := func(extra string) []string { return append(append([]string{}, agentOps...), extra) }
	cfg := map[string]any{"version": 1,
		"extensions": map[string]any{
			"memory": map[string]any{"scopes": []string{"t"}},
			"human":  map[string]any{"scopes": []string{"t"}, "config": map[string]any{"operations": []string{"memory.delete_entities"}}},
		},
		"scopes": map[string]any{"t": map[string]any{
			"authorization": map[string]any{"operations": with("@memory.all"), "reads": []string{"work", "events"}},
			"bindings":      map[string]any{"agent": job(with("@memory.all")), "reader": job(with("@memory.read")), "plain": job(agentOps)},
		}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	createEntities = `os call memory.create_entities --input '{"entities":[{"name":"open-conduit","entityType":"project","observations":["runs work on events"]}]}'`
	readGraph      = `os call memory.read_graph`
	deleteEntities = `os call memory.delete_entities --input '{"entityNames":["open-conduit"]}'`
)

// The real reference MCP server (@modelcontextprotocol/server-memory, as
// pinned by e2e/agents and installed by .ci/run) installed as an MCP
// package through the CLI and run by the release's MCP runtime: a shell
// execution creates an entity and reads the graph back through os call;
// a binding granted only @memory.read reads and cannot write, one
// without a grant cannot read; the human extension parks a call to
// memory.delete_entities until the operator approves it with the CLI,
// after which the call goes through. The server is restarted after a
// kill -9, stopped by packages remove, and gone with a daemon killed -9.
func TestMCPMemoryServerAsAPackage(t *testing.T) {
	bin := agenttest.MCPMemory(t)
	e := newEnv(t)
	path := "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	d := e.start(path)
	src := filepath.Join(e.root, "memory")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	memFile := filepath.Join(e.root, "memory.jsonl")
	writeFile(t, filepath.Join(src, "open-conduit-package.json"), []byte(strings.Replace(memoryManifest, "@STATEFILE@", memFile, 1)))

	code, out, stderr := e.cli("packages", "install", src, "--accept-permissions")
	if code != 0 || !strings.Contains(out, "Installed memory 2026.8.31 (running)") {
		t.Fatalf("install: exit %d %q %q", code, out, stderr)
	}
	var shown api.Package
	e.cliJSON(&shown, "packages", "show", "memory")
	var ops, sets []string
	for _, op := range shown.Provides.Operations {
		ops = append(ops, op.Name)
	}
	for _, ts := range shown.Provides.Toolsets {
		sets = append(sets, ts.Name)
		if ts.Name == "memory.read" && (!slices.Contains(ts.Operations, "memory.read_graph") || slices.Contains(ts.Operations, "memory.create_entities")) {
			t.Errorf("memory.read grants %v", ts.Operations)
		}
	}
	if shown.Kind != "mcp" || shown.State != "running" || !slices.Contains(ops, "memory.create_entities") || !slices.Contains(ops, "memory.read_graph") ||
		!slices.Contains(ops, "memory.delete_entities") || !slices.Contains(sets, "memory.read") || !slices.Contains(sets, "memory.all") {
		t.Fatalf("show: %+v", shown)
	}
	files := filepath.Join(e.state, "packages", "memory", "files")

	ctl := filepath.Join(e.root, "c")
	if err := os.MkdirAll(ctl, 0o700); err != nil {
		t.Fatal(err)
	}
	e.applyConfig("memory.json", memoryConfig(t, ctl))

	// Written and read back through os call.
	w := e.createOn("t", "agent")
	x1 := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x1.ID)
	a.mustSh(createEntities)
	if out := a.mustSh(readGraph); !strings.Contains(out, "open-conduit") || !strings.Contains(out, "runs work on events") {
		t.Fatalf("read_graph answered %q", out)
	}
	if b, err := os.ReadFile(memFile); err != nil || !strings.Contains(string(b), "runs work on events") {
		t.Fatalf("the server's own file: %q %v", b, err)
	}

	// The server killed -9 is restarted; the graph is still there.
	procs := processesIn(files)
	if len(procs) != 1 {
		t.Fatalf("the processes in the package's directory are %v, want the server", procs)
	}
	if err := syscall.Kill(procs[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	until(t, "the server restarted", func() bool {
		code, out, _ := a.sh(readGraph)
		now := processesIn(files)
		return code == 0 && strings.Contains(out, "open-conduit") && len(now) == 1 && now[0] != procs[0]
	})

	// The human extension holds the delete until the operator approves.
	code, out, stderr = a.sh(deleteEntities)
	var parked struct {
		Parked string `json:"parked"`
		Output struct {
			Approval string `json:"approval"`
			State    string `json:"state"`
		} `json:"output"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &parked) != nil || parked.Parked != "human" || parked.Output.Approval == "" || parked.Output.State != "pending" {
		t.Fatalf("the held delete: exit %d %q %q, want it parked by human on a pending approval", code, out, stderr)
	}
	a.exit(0)
	if got := e.waitWork(w.ID, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) }); got.State != "waiting" {
		t.Fatalf("Work %s is %s after the park, want waiting", w.ID, got.State)
	}
	if ap := e.approvalOf(parked.Output.Approval); ap.State != "pending" || ap.Operation != "memory.delete_entities" || ap.Work != w.ID {
		t.Fatalf("approval %+v", ap)
	}
	if b, _ := os.ReadFile(memFile); !strings.Contains(string(b), "open-conduit") {
		t.Fatal("the held delete reached the server")
	}
	if code, out, stderr := e.cli("approvals", "approve", parked.Output.Approval); code != 0 {
		t.Fatalf("approvals approve: exit %d %q %q", code, out, stderr)
	}
	a = agentOf(t, ctl, e.runningExecution(w.ID, x1.ID).ID)
	a.mustSh(deleteEntities)
	if out := a.mustSh(readGraph); strings.Contains(out, "open-conduit") {
		t.Fatalf("after the approved delete, read_graph answered %q", out)
	}
	a.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })

	// Granted only @memory.read: it reads, and cannot write.
	w2 := e.createOn("t", "reader")
	r := agentOf(t, ctl, e.runningExecution(w2.ID).ID)
	r.mustSh(readGraph)
	if code, _, stderr := r.sh(createEntities); code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Errorf("a write granted only @memory.read: exit %d %q, want 1 forbidden", code, stderr)
	}
	r.exit(0)
	// Granted neither: it cannot even read.
	w3 := e.createOn("t", "plain")
	p := agentOf(t, ctl, e.runningExecution(w3.ID).ID)
	p.mustSh("os call read_context")
	if code, _, stderr := p.sh(readGraph); code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Errorf("a read without the grant: exit %d %q, want 1 forbidden", code, stderr)
	}
	p.exit(0)
	e.waitWork(w2.ID, "terminal", func(w work) bool { return terminal(w.State) })
	e.waitWork(w3.ID, "terminal", func(w work) bool { return terminal(w.State) })

	// packages remove stops the server before it answers.
	e.applyConfig("plain.json", []byte(`{"version": 1, "scopes": {"t": {"authorization": {"operations": ["read_context"]}}}}`))
	procs = processesIn(files)
	if len(procs) != 1 {
		t.Fatalf("before remove, the processes in the package's directory are %v", procs)
	}
	if code, out, stderr := e.cli("packages", "remove", "memory"); code != 0 {
		t.Fatalf("remove: exit %d %q %q", code, out, stderr)
	}
	if alive(procs[0]) {
		t.Errorf("the server %d is still running after packages remove", procs[0])
	}

	// Installed again, a kill -9 of the daemon takes the server with it.
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 {
		t.Fatalf("install again: exit %d %q %q", code, out, stderr)
	}
	procs = processesIn(files)
	if len(procs) != 1 {
		t.Fatalf("after install, the processes in the package's directory are %v", procs)
	}
	d.kill()
	until(t, "the server ending with the daemon", func() bool { return !alive(procs[0]) })
}
