package e2e

import (
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// acted is what `open-conduit act --json` prints for the test daemon's
// e2ecred.whoami, whose result is what the host handed the action.
type acted struct {
	Event  eventRecord `json:"event"`
	Result struct {
		Caller    string          `json:"caller"`
		Scope     string          `json:"scope"`
		Work      string          `json:"work"`
		RequestID string          `json:"request_id"`
		Event     string          `json:"event"`
		Input     json.RawMessage `json:"input"`
	} `json:"result"`
	Existing bool `json:"existing"`
}

var actedLine = regexp.MustCompile(`recorded as event (evt_[0-9a-z]+) by (operator:[a-z0-9-]+)\.`)

// A named operator runs an extension's action with the real CLI: the
// core.action Event that records it has that operator as its actor, and
// the action was told the same operator asked. A repeat under the same
// key runs nothing again; what a view credential, a refusing action, an
// unknown action and a wrong command line get.
func TestOperatorActionRunsAsItsOperator(t *testing.T) {
	e := newEnv(t)
	e.startTestDaemon()
	tr := &transcript{}
	alice, vera := e.addOperator("alice", "operate"), e.addOperator("vera", "")

	code, out, stderr := e.as(tr, vera.file, "actions")
	if code != 0 || !regexp.MustCompile(`(?m)^e2ecred\.whoami\s+Answer with who asked`).MatchString(out) {
		t.Fatalf("actions: exit %d %q %q", code, out, stderr)
	}

	w := e.createWork("setup")
	code, out, stderr = e.as(tr, alice.file, "act", "e2ecred.whoami", "--scope", "setup", "--work", w.ID, "--input", `{"note":"hi"}`, "--json")
	var got acted
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("act --json: exit %d %q %q", code, out, stderr)
	}
	if got.Event.Actor != "operator:alice" || got.Result.Caller != "operator:alice" {
		t.Errorf("the event's actor is %q and the action's caller %q, want operator:alice for both", got.Event.Actor, got.Result.Caller)
	}
	if got.Result.Event != got.Event.ID || got.Result.Work != w.ID || got.Result.Scope != "setup" || got.Result.RequestID == "" ||
		string(got.Result.Input) != `{"note":"hi"}` || got.Existing {
		t.Errorf("the action was handed %+v, want the event %s, Work %s, scope setup and the input", got.Result, got.Event.ID, w.ID)
	}
	// The record itself, read back by the owner.
	ev := e.event(got.Event.ID)
	if ev.Type != "core.action" || ev.Source != "core.action" || ev.Actor != "operator:alice" || ev.Work != w.ID ||
		string(ev.Data) != `{"action":"e2ecred.whoami","input":{"note":"hi"}}` {
		t.Errorf("the stored event is %+v (data %s)", ev, ev.Data)
	}

	// For people, and once more under the same key: the answer is
	// replayed and nothing runs again.
	code, out, stderr = e.as(tr, alice.file, "act", "e2ecred.whoami", "--scope", "setup", "--idempotency-key", "alice-1")
	m := actedLine.FindStringSubmatch(out)
	if code != 0 || m == nil || m[2] != "operator:alice" || !strings.Contains(out, `"caller": "operator:alice"`) {
		t.Fatalf("act: exit %d %q %q", code, out, stderr)
	}
	code, again, stderr := e.as(tr, alice.file, "act", "e2ecred.whoami", "--scope", "setup", "--idempotency-key", "alice-1")
	if code != 0 || !strings.Contains(again, m[1]) || !strings.Contains(again, "nothing ran again") {
		t.Errorf("act again under the same key: exit %d %q %q, want event %s replayed", code, again, stderr, m[1])
	}
	// The owner is recorded as itself.
	code, out, stderr = e.cli("act", "e2ecred.whoami", "--scope", "setup")
	if m := actedLine.FindStringSubmatch(out); code != 0 || m == nil || m[2] != "operator:local" {
		t.Errorf("the owner's act: exit %d %q %q", code, out, stderr)
	}

	code, _, stderr = e.as(tr, vera.file, "act", "e2ecred.whoami", "--scope", "setup")
	wantRefused(t, "a view credential's act", code, stderr, "needs the operate role")
	code, _, stderr = e.as(tr, alice.file, "act", "e2ecred.whoami", "--scope", "setup", "--input", `{"refuse":true}`)
	wantRefused(t, "a refusing action", code, stderr, "whoami_refused: the input asked for a refusal")
	code, _, stderr = e.as(tr, alice.file, "act", "e2ecred.nope", "--scope", "setup")
	wantRefused(t, "an unknown action", code, stderr, "not_found")
	code, _, stderr = e.as(tr, alice.file, "act", "e2ecred.whoami", "--scope", "nowhere")
	wantRefused(t, "an unknown scope", code, stderr, "invalid_request")
	if code, _, stderr = e.as(tr, alice.file, "act", "e2ecred.whoami"); code != 2 || !strings.Contains(stderr, "--scope") {
		t.Errorf("act without --scope: exit %d %q, want 2 asking for --scope", code, stderr)
	}
	if code, _, stderr = e.as(tr, alice.file, "act", "e2ecred.whoami", "--scope", "setup", "--input", "[1]"); code != 2 {
		t.Errorf("act with an input that is not an object: exit %d %q, want 2", code, stderr)
	}

	// Four requests were recorded (alice's two, the owner's, the refused
	// one); no refusal before the action recorded anything.
	var evs page[eventRecord]
	e.must("GET", "/v1/events?"+url.Values{"type": {"core.action"}}.Encode(), nil, nil, &evs)
	actors := map[string]int{}
	for _, ev := range evs.Items {
		actors[ev.Actor]++
	}
	if len(evs.Items) != 4 || actors["operator:alice"] != 3 || actors["operator:local"] != 1 {
		t.Errorf("core.action events by actor: %v, want 3 by alice and 1 by the owner", actors)
	}
	assertNoTokenLeaks(t, e, tr, alice.token, vera.token)
}
