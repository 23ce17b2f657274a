package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/api"
)

// The human extension end to end: the test daemon (the real daemon with
// e2ecred) holds calls to e2ecred.credential, and a listed binding's
// start, on an operator's approval given with the real CLI.

// credCall is the call the agent makes, the same each time.
const credCall = `os call e2ecred.credential --input '{"protocol":"https","host":"example.test"}'`

var credInput = map[string]string{"protocol": "https", "host": "example.test"}

// humanConfig is the agent configuration with e2ecred.credential granted
// and the human extension's entry human (nil: none).
func (e *env) humanConfig(ctl string, human map[string]any) []byte {
	e.t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(agentConfig(ctl, append([]string{"e2ecred.credential"}, agentOps...)), &cfg); err != nil {
		e.t.Fatal(err)
	}
	if human != nil {
		cfg["extensions"] = map[string]any{"human": human}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// humanEnv writes the configuration of the first start, with the human
// entry, and starts the test daemon; it returns the control directory.
func (e *env) humanEnv(human map[string]any) string {
	e.t.Helper()
	ctl := e.writeAgentConfig(agentOps)
	writeFile(e.t, filepath.Join(e.state, "config.json"), e.humanConfig(ctl, human))
	e.startTestDaemon("E2E_GIT_PASSWORD=pw")
	return ctl
}

// approvals lists the approvals with the CLI.
func (e *env) approvals() []approval {
	e.t.Helper()
	var out struct {
		Approvals []approval `json:"approvals"`
	}
	e.cliJSON(&out, "approvals", "list")
	return out.Approvals
}

type approval struct {
	ID        string `json:"id"`
	Scope     string `json:"scope"`
	Work      string `json:"work"`
	Binding   string `json:"binding"`
	Kind      string `json:"kind"`
	Operation string `json:"operation"`
	State     string `json:"state"`
	Actor     string `json:"actor"`
	Note      string `json:"note"`
}

// parkedOn makes the agent's credential call, requires it parked by the
// human extension and returns the approval it names.
func parkedOn(t *testing.T, a *agent) string {
	t.Helper()
	code, out, stderr := a.sh(credCall)
	var parked struct {
		Parked string `json:"parked"`
		Output struct {
			Approval string `json:"approval"`
			State    string `json:"state"`
		} `json:"output"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &parked) != nil || parked.Parked != "human" || parked.Output.Approval == "" || parked.Output.State != "pending" {
		t.Fatalf("the held call: exit %d %q %q, want it parked by human on a pending approval", code, out, stderr)
	}
	return parked.Output.Approval
}

// parkedAndReleased parks the agent's call, checks the attempt's
// authority is released, ends the shell and waits for the Work to wait.
func (e *env) parkedAndReleased(a *agent, workID string) string {
	e.t.Helper()
	id := parkedOn(e.t, a)
	if code, _, stderr := a.sh("os call read_context"); code != 1 || !strings.Contains(stderr, "authority_released") {
		e.t.Errorf("a call after the park: exit %d %q, want 1 authority_released", code, stderr)
	}
	a.exit(0)
	if w := e.waitWork(workID, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) }); w.State != "waiting" {
		e.t.Fatalf("Work %s is %s after the park, want waiting", workID, w.State)
	}
	return id
}

func (e *env) approvalOf(id string) approval {
	e.t.Helper()
	for _, a := range e.approvals() {
		if a.ID == id {
			return a
		}
	}
	e.t.Fatalf("approval %s is not listed", id)
	return approval{}
}

// A call to an operation that needs an approval parks: the Work waits,
// the attempt's authority is released, the approval is listed; the
// operator approves it with the CLI, the Work resumes, the same call
// passes once and a second identical call parks again.
func TestHumanApprovalOfACall(t *testing.T) {
	e := newEnv(t)
	ctl := e.humanEnv(map[string]any{"scopes": []string{"t"}, "config": map[string]any{"operations": []string{"e2ecred.credential"}}})
	w := e.createWork("t")
	x1 := e.runningExecution(w.ID)
	a1 := agentOf(t, ctl, x1.ID)
	a1.mustSh("os call read_context") // an operation not listed passes
	id := e.parkedAndReleased(a1, w.ID)
	if ap := e.approvalOf(id); ap.State != "pending" || ap.Work != w.ID || ap.Scope != "t" || ap.Kind != "call" || ap.Operation != "e2ecred.credential" {
		t.Fatalf("approval %+v, want pending, of the Work's e2ecred.credential call in t", ap)
	}
	code, out, stderr := e.cli("approvals", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "pending") {
		t.Fatalf("approvals list: exit %d %q %q", code, out, stderr)
	}

	code, out, stderr = e.cli("approvals", "approve", id, "--note", "go ahead")
	if code != 0 {
		t.Fatalf("approvals approve: exit %d %q %q", code, out, stderr)
	}
	if ap := e.approvalOf(id); ap.State != "approved" || ap.Actor != "operator:local" || ap.Note != "go ahead" {
		t.Errorf("approval after approve %+v, want approved by operator:local with the note", ap)
	}
	x2 := e.runningExecution(w.ID, x1.ID)
	a2 := agentOf(t, ctl, x2.ID)
	out = a2.mustSh(credCall)
	if !strings.Contains(out, `"password"`) || !strings.Contains(out, "pw-"+w.ID) {
		t.Fatalf("the approved call answered %q, want the credential", out)
	}
	again := parkedOn(t, a2)
	if again == id {
		t.Errorf("the second identical call parked on the consumed approval %s, want a new one", id)
	}
	a2.exit(0)
	e.waitWork(w.ID, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) })
	if ap := e.approvalOf(again); ap.State != "pending" {
		t.Errorf("the second approval %+v, want pending", ap)
	}
}

// A denial makes the repeated call fail with 422 approval_denied carrying
// the reason.
func TestHumanDenialOfACall(t *testing.T) {
	e := newEnv(t)
	ctl := e.humanEnv(map[string]any{"scopes": []string{"t"}, "config": map[string]any{"operations": []string{"e2ecred.credential"}}})
	w := e.createWork("t")
	x1 := e.runningExecution(w.ID)
	id := e.parkedAndReleased(agentOf(t, ctl, x1.ID), w.ID)
	if code, out, stderr := e.cli("approvals", "deny", id); code != 2 {
		t.Errorf("approvals deny without --reason: exit %d %q %q, want 2", code, out, stderr)
	}
	if code, out, stderr := e.cli("approvals", "deny", id, "--reason", "not on a friday"); code != 0 {
		t.Fatalf("approvals deny: exit %d %q %q", code, out, stderr)
	}
	if ap := e.approvalOf(id); ap.State != "denied" || ap.Actor != "operator:local" || ap.Note != "not on a friday" {
		t.Errorf("approval after deny %+v, want denied by operator:local with the reason", ap)
	}
	x2 := e.runningExecution(w.ID, x1.ID)
	a2 := agentOf(t, ctl, x2.ID)
	r := sockDo(t, e.execSocket(x2.ID), "POST", "/v1/toolbelt/call", e.execToken(x2.ID), nil, callBody(t, "e2ecred.credential", credInput, nil))
	wantRefusal(t, "the denied call", r, 422, "approval_denied")
	if !strings.Contains(string(r.Body), "not on a friday") || !strings.Contains(string(r.Body), id) {
		t.Errorf("the denial %s does not carry the approval and the reason", r.Body)
	}
	code, _, stderr := a2.sh(credCall)
	if code != 1 || !strings.Contains(stderr, "approval_denied") || !strings.Contains(stderr, "not on a friday") {
		t.Errorf("os call after the denial: exit %d %q, want 1 approval_denied with the reason", code, stderr)
	}
	a2.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
}

// A start approval holds a listed binding's Work before its first
// attempt: no execution starts, work get shows why it waits; once the
// operator approves, the attempt starts and runs.
func TestHumanApprovalOfAStart(t *testing.T) {
	e := newEnv(t)
	ctl := e.humanEnv(map[string]any{"scopes": []string{"t"}, "config": map[string]any{"bindings": []string{"agent"}}})
	w := e.createWork("t")
	var held api.Work
	until(t, "Work "+w.ID+" waiting on its start approval", func() bool {
		e.cliJSON(&held, "work", "get", w.ID)
		return held.State == "waiting" || terminal(held.State)
	})
	list := e.approvals()
	if held.State != "waiting" || len(list) != 1 || list[0].Kind != "start" || list[0].Work != w.ID || list[0].State != "pending" || list[0].Binding != "agent" {
		t.Fatalf("Work %+v, approvals %+v: want the Work waiting on one pending start approval", held, list)
	}
	id := list[0].ID
	if !strings.Contains(held.WaitReason, id) {
		t.Errorf("the waiting Work's wait reason %q does not name approval %s", held.WaitReason, id)
	}
	code, out, stderr := e.cli("work", "get", w.ID)
	if code != 0 || !strings.Contains(out, id) {
		t.Errorf("work get: exit %d %q %q, want the wait reason naming %s", code, out, stderr, id)
	}
	if exes := e.executions(w.ID); len(exes) != 0 {
		t.Fatalf("executions %+v before the approval, want none", exes)
	}
	if code, out, stderr := e.cli("approvals", "approve", id); code != 0 {
		t.Fatalf("approvals approve: exit %d %q %q", code, out, stderr)
	}
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	a.mustSh("os call read_context")
	a.exit(0)
	if got := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("the approved Work ended %s", got.State)
	}
	if exes := e.executions(w.ID); len(exes) != 1 {
		t.Errorf("executions %+v, want the one approved attempt", exes)
	}
}

// Disabling the human extension by config apply lets the next call
// through, without a restart: first by enabled false, then (after it is
// enabled again and holds the call once more) by removing its entry.
func TestHumanDisabledByConfigApply(t *testing.T) {
	e := newEnv(t)
	human := map[string]any{"scopes": []string{"t"}, "config": map[string]any{"operations": []string{"e2ecred.credential"}}}
	ctl := e.humanEnv(human)
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	apply := func(entry map[string]any) {
		t.Helper()
		file := writeFile(t, filepath.Join(e.root, "next.json"), e.humanConfig(ctl, entry))
		if code, out, stderr := e.cli("config", "apply", file); code != 0 {
			t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
		}
	}
	disabled := map[string]any{"enabled": false, "scopes": []string{"t"}, "config": human["config"]}
	apply(disabled)
	if out := a.mustSh(credCall); !strings.Contains(out, "pw-"+w.ID) {
		t.Fatalf("the call with the extension disabled answered %q, want the credential", out)
	}
	apply(human)
	parkedOn(t, a)
	a.exit(0)
	e.waitWork(w.ID, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) })

	apply(nil)
	// The parked Work waits on an approval nobody can decide now (no
	// scope serves the human actions); an operator wakes it by hand, and
	// its next attempt's call passes.
	if code, out, stderr := e.cli("approvals", "list", "--scope", "t"); code == 0 {
		t.Errorf("approvals list with the entry removed: exit 0 %q %q, want the actions not served", out, stderr)
	}
	var woken struct {
		Matched bool `json:"matched"`
	}
	e.cliJSON(&woken, "work", "wake", w.ID, "--type", "human.approval.decided")
	if !woken.Matched {
		t.Fatal("the wake did not match the parked call's wait")
	}
	x2 := e.runningExecution(w.ID, x.ID)
	a2 := agentOf(t, ctl, x2.ID)
	if out := a2.mustSh(credCall); !strings.Contains(out, "pw-"+w.ID) {
		t.Fatalf("the call with the entry removed answered %q, want the credential", out)
	}
	a2.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
}

// A gate that panics fails closed: the test daemon's e2egate, asked to
// panic on e2ecred.credential, makes that call 422 gate_failed (recorded
// as toolbelt.rejected, gate_refused by e2egate, as the spec says), while builtins pass, the attempt keeps its
// authority and the daemon keeps serving.
func TestPanickingGateFailsClosed(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	writeFile(t, filepath.Join(e.state, "config.json"), e.humanConfig(ctl, nil))
	e.startTestDaemon("E2E_GIT_PASSWORD=pw", "E2E_GATE_PANIC=e2ecred.credential")
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	r := sockDo(t, e.execSocket(x.ID), "POST", "/v1/toolbelt/call", e.execToken(x.ID), nil, callBody(t, "e2ecred.credential", credInput, nil))
	wantRefusal(t, "the call the gate panics on", r, 422, "gate_failed")
	if strings.Contains(string(r.Body), "pw-") || strings.Contains(string(r.Body), "asked to panic") {
		t.Errorf("the refusal %s carries the credential or the panic's text", r.Body)
	}
	if code, _, stderr := a.sh(credCall); code != 1 || !strings.Contains(stderr, "gate_failed") {
		t.Errorf("os call of the operation the gate panics on: exit %d %q, want 1 gate_failed", code, stderr)
	}
	if out := a.mustSh("os call read_context"); !strings.Contains(out, w.ID) {
		t.Errorf("read_context after the refusals answered %q", out)
	}
	a.mustSh("os emit e2e.after")
	var calls page[api.ToolbeltCall]
	e.cliJSON(&calls, "toolbelt", "calls", "--execution", x.ID, "--kind", "toolbelt.rejected")
	if len(calls.Items) != 2 {
		t.Fatalf("refusals %+v, want the two gated calls", calls.Items)
	}
	for _, c := range calls.Items {
		if c.Operation != "e2ecred.credential" || c.Result != "gate_refused" || c.Gate != "e2egate" {
			t.Errorf("refusal %+v, want e2ecred.credential gate_refused by e2egate", c)
		}
	}
	if strings.Contains(e.allLogs(), "asked to panic") {
		t.Error("the panic's text reached the daemon's log")
	}
	a.exit(0)
	if got := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Errorf("the Work ended %s", got.State)
	}
}
