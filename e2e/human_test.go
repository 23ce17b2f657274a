package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
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
	if ap := e.approvalOf(id); ap.State != "approved" || ap.Actor != "operator:local" {
		t.Errorf("approval after approve %+v, want approved by operator:local", ap)
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
