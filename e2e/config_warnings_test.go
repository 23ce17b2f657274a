package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/api"
)

// The playbook and toolset e2e/testdaemon registers.
const (
	e2ePlaybook = "e2e-release"
	e2eToolset  = "e2ecred.agent"
)

// warnedConfig is agentConfig with ceiling as the scope's ceiling, ops as
// the binding's operations, the binding on the test daemon's playbook
// (when playbook is set), and, with neverFires, a route whose match no
// source ever sends.
func warnedConfig(t *testing.T, ctl string, ceiling, ops []string, playbook, neverFires bool) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(agentConfig(ctl, ceiling), &doc); err != nil {
		t.Fatal(err)
	}
	scope := doc["scopes"].(map[string]any)["t"].(map[string]any)
	binding := scope["bindings"].(map[string]any)["agent"].(map[string]any)
	binding["operations"] = ops
	if playbook {
		binding["playbook"] = e2ePlaybook
	}
	if neverFires {
		scope["routes"] = []any{map[string]any{"id": "never", "match": map[string]any{"type": "core.work.created"}, "binding": "agent"}}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// warningLine is how the config commands print a warning.
func warningLine(w api.Warning) string {
	return "warning: " + w.Pointer + ": " + w.Code + ": " + w.Message
}

// wantWarnings checks that ws holds exactly the codes at the pointers of
// want (pointer -> code), each with a message.
func wantWarnings(t *testing.T, what string, ws []api.Warning, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, w := range ws {
		if w.Message == "" {
			t.Errorf("%s: warning %+v has no message", what, w)
		}
		got[w.Pointer] = w.Code
	}
	if len(ws) != len(want) || len(got) != len(want) {
		t.Fatalf("%s: warnings %+v, want %v", what, ws, want)
	}
	for p, code := range want {
		if got[p] != code {
			t.Errorf("%s: warning at %s is %q, want %q (all: %+v)", what, p, got[p], code, ws)
		}
	}
}

// wantPrinted checks that the text output prints every warning of ws, one
// line each, and nothing that looks like another.
func wantPrinted(t *testing.T, what, stdout string, ws []api.Warning) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "warning: ") {
			n++
		}
	}
	if n != len(ws) {
		t.Errorf("%s printed %d warning lines, want %d:\n%s", what, n, len(ws), stdout)
	}
	for _, w := range ws {
		if !strings.Contains(stdout, warningLine(w)+"\n") {
			t.Errorf("%s does not print %q:\n%s", what, warningLine(w), stdout)
		}
	}
}

// The grant and route warnings through the real CLI: config check
// (offline, against the release), config validate and config apply
// (through the test daemon, which registers a toolset and a playbook)
// print each one as a line and carry it in --json; and the command the
// toolset warning gives, copied as it is, applies and clears the warning.
func TestConfigWarningsThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	never := map[string]string{"/scopes/t/routes/0/match": "route_never_fires"}

	// Offline: the release registers no toolset or playbook, so only the
	// route warning applies.
	offline := writeFile(t, filepath.Join(e.root, "offline.json"), warnedConfig(t, ctl, agentOps, agentOps, false, true))
	var checked struct {
		Valid    bool          `json:"valid"`
		Warnings []api.Warning `json:"warnings"`
	}
	e.cliJSON(&checked, "config", "check", offline)
	if !checked.Valid {
		t.Fatalf("config check --json: %+v", checked)
	}
	wantWarnings(t, "config check --json", checked.Warnings, never)
	code, out, stderr := e.cli("config", "check", offline)
	if code != 0 || !strings.Contains(out, "valid: hash ") {
		t.Fatalf("config check: exit %d %q %q", code, out, stderr)
	}
	wantPrinted(t, "config check", out, checked.Warnings)

	e.startTestDaemon()
	// The ceiling grants the toolset's members; the binding spells out
	// its 1.0.0 members, so it lacks e2ecred.credential, which the
	// playbook uses.
	ceiling := append(slices.Clone(agentOps), "e2ecred.credential")
	spelled := []string{"declare_outcome", "emit", "read_context", "wait"}
	file := writeFile(t, filepath.Join(e.root, "warned.json"), warnedConfig(t, ctl, ceiling, spelled, true, true))
	all := map[string]string{
		"/scopes/t/bindings/agent/operations": "toolset_spelled_out",
		"/scopes/t/bindings/agent/playbook":   "playbook_not_granted",
		"/scopes/t/routes/0/match":            "route_never_fires",
	}
	var validated api.Validation
	e.cliJSON(&validated, "config", "validate", file)
	if !validated.Valid {
		t.Fatalf("config validate --json: %+v", validated)
	}
	wantWarnings(t, "config validate --json", validated.Warnings, all)
	code, out, stderr = e.cli("config", "validate", file)
	if code != 0 || !strings.Contains(out, "valid: hash "+validated.Hash) {
		t.Fatalf("config validate: exit %d %q %q", code, out, stderr)
	}
	wantPrinted(t, "config validate", out, validated.Warnings)

	var applied api.Applied
	e.cliJSON(&applied, "config", "apply", file)
	if applied.Generation != 2 {
		t.Fatalf("config apply --json: %+v", applied)
	}
	wantWarnings(t, "config apply --json", applied.Warnings, all)

	// The toolset warning's advice, copied as it is into a shell.
	var advice string
	for _, w := range applied.Warnings {
		if w.Code == "toolset_spelled_out" {
			_, advice, _ = strings.Cut(w.Message, "Grant the toolset instead: ")
		}
	}
	if !strings.HasPrefix(advice, "open-conduit config set /scopes/t/bindings/agent/operations '") || !strings.Contains(advice, "@"+e2eToolset) {
		t.Fatalf("the toolset warning's advice is %q", advice)
	}
	code, out, stderr = e.run("/bin/sh", []string{"PATH=" + bins.dir + ":" + os.Getenv("PATH")}, "-c", advice)
	if code != 0 || !strings.Contains(out, "Set /scopes/t/bindings/agent/operations: generation 3 (was 2), hash ") {
		t.Fatalf("%s: exit %d %q %q", advice, code, out, stderr)
	}
	// What is left is the route: the toolset grants what the playbook
	// uses.
	wantPrinted(t, "config set", out, []api.Warning{{Pointer: "/scopes/t/routes/0/match", Code: "route_never_fires", Message: warningMessage(t, applied.Warnings, "route_never_fires")}})
	var cur api.Config
	e.cliJSON(&cur, "config", "get")
	if cur.Generation != 3 || !strings.Contains(string(cur.Config), `"@`+e2eToolset+`"`) {
		t.Fatalf("config get after the set: generation %d, %s", cur.Generation, cur.Config)
	}

	// config apply prints the warnings as lines before its last line.
	code, out, stderr = e.cli("config", "apply", file)
	if code != 0 || !strings.HasSuffix(out, "Applied: generation 4 (was 3), hash "+validated.Hash+".\n") {
		t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
	}
	wantPrinted(t, "config apply", out, applied.Warnings)
}

func warningMessage(t *testing.T, ws []api.Warning, code string) string {
	t.Helper()
	for _, w := range ws {
		if w.Code == code {
			return w.Message
		}
	}
	t.Fatalf("no %s warning in %+v", code, ws)
	return ""
}

// config_drift through the real CLI: a running attempt's binding starts on
// a playbook that uses emit; config set takes emit from the binding (the
// playbook warning says so) and then from the scope's ceiling; the
// attempt's next os emit is refused, and toolbelt calls shows the refusal
// as config_drift.
func TestConfigDriftThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	ops := append(slices.Clone(agentOps), "e2ecred.credential")
	writeFile(t, filepath.Join(e.state, "config.json"), warnedConfig(t, ctl, ops, ops, true, false))
	e.startTestDaemon()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	a.mustSh("os emit e2e.before")

	without := `'["declare_outcome", "read_context", "wait", "e2ecred.credential"]'`
	code, out, stderr := e.run("/bin/sh", []string{"PATH=" + bins.dir + ":" + os.Getenv("PATH")}, "-c",
		"open-conduit config set /scopes/t/bindings/agent/operations "+without+" && open-conduit config set /scopes/t/authorization/operations "+without)
	if code != 0 || !strings.Contains(out, "warning: /scopes/t/bindings/agent/playbook: playbook_not_granted: ") ||
		!strings.Contains(out, "Set /scopes/t/authorization/operations: generation 3 (was 2)") {
		t.Fatalf("config set: exit %d %q %q", code, out, stderr)
	}
	if code, _, stderr := a.sh("os emit e2e.after"); code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("os emit after the set: exit %d %q, want 1 forbidden", code, stderr)
	}
	var calls page[api.ToolbeltCall]
	e.cliJSON(&calls, "toolbelt", "calls", "--execution", x.ID, "--kind", "toolbelt.rejected")
	if len(calls.Items) != 1 || calls.Items[0].Operation != "emit" || calls.Items[0].Result != "forbidden" || calls.Items[0].Refusal != "config_drift" {
		t.Fatalf("refusals %+v, want the one emit, forbidden, config_drift", calls.Items)
	}
	code, out, stderr = e.cli("toolbelt", "calls", "--execution", x.ID)
	if code != 0 || !strings.Contains(out, "REFUSAL") || strings.Count(out, "config_drift") != 1 {
		t.Fatalf("toolbelt calls: exit %d %q %q", code, out, stderr)
	}
	a.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
}
