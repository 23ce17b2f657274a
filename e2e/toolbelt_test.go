package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

// callBody is a toolbelt call's body.
func callBody(t *testing.T, operation string, input any, assert map[string]string) string {
	t.Helper()
	body := map[string]any{"operation": operation, "input": input}
	for k, v := range assert {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each execution's socket serves only its own token: another execution's
// token and an assertion of another execution are refused, operator
// endpoints are not served there (to any credential), an operator
// credential is the wrong class there, and an execution token is the
// wrong class on the management socket. A genuine call by the running
// shell process itself, through os emit, is accepted with the execution
// as its source and the Work's cause.
func TestExecutionSocketsServeOnlyTheirOwnToken(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	wa, wb := e.createWork("t"), e.createWork("t")
	xa, xb := e.runningExecution(wa.ID), e.runningExecution(wb.ID)
	a, b := agentOf(t, ctl, xa.ID), agentOf(t, ctl, xb.ID)
	sockA := e.execSocket(xa.ID)
	tokA, tokB, owner := e.execToken(xa.ID), e.execToken(xb.ID), e.ownerToken()
	if tokA == tokB || tokA == "" {
		t.Fatal("the two executions share a token")
	}
	readContext := callBody(t, "read_context", map[string]any{}, nil)

	// Control: A's own token on A's socket, asserting itself, is served.
	r := sockDo(t, sockA, "POST", "/v1/toolbelt/call", tokA, nil,
		callBody(t, "read_context", map[string]any{}, map[string]string{"execution_id": xa.ID, "work_id": wa.ID}))
	if r.Status != 200 || !strings.Contains(string(r.Body), wa.ID) {
		t.Fatalf("A's own call on A's socket: %d %s", r.Status, r.Body)
	}
	// B's genuine, live token on A's socket.
	wantRefusal(t, "B's token on A's socket", sockDo(t, sockA, "POST", "/v1/toolbelt/call", tokB, nil, readContext), 403, "forbidden")
	wantRefusal(t, "B's token reading guidance on A's socket", sockDo(t, sockA, "GET", "/v1/toolbelt/guidance", tokB, nil, ""), 403, "forbidden")
	wantRefusal(t, "B's token asking serving on A's socket",
		sockDo(t, sockA, "GET", "/v1/toolbelt/serving?capability=git.credential", tokB, nil, ""), 403, "forbidden")
	// A's token asserting B's execution, or B's Work.
	wantRefusal(t, "A's call asserting B's execution", sockDo(t, sockA, "POST", "/v1/toolbelt/call", tokA, nil,
		callBody(t, "read_context", map[string]any{}, map[string]string{"execution_id": xb.ID})), 403, "forbidden")
	wantRefusal(t, "A's call asserting B's Work", sockDo(t, sockA, "POST", "/v1/toolbelt/call", tokA, nil,
		callBody(t, "read_context", map[string]any{}, map[string]string{"work_id": wb.ID})), 403, "forbidden")

	// Operator endpoints are not served on an execution's socket, to any
	// credential or none.
	for _, path := range []string{"/v1/work", "/v1/health", "/v1/auth/operators", "/v1/toolbelt/calls"} {
		for name, tok := range map[string]string{"A's token": tokA, "the owner's token": owner, "no token": ""} {
			wantRefusal(t, "GET "+path+" on A's socket with "+name, sockDo(t, sockA, "GET", path, tok, nil, ""), 404, "not_found")
		}
	}
	wantRefusal(t, "POST /v1/work on A's socket", sockDo(t, sockA, "POST", "/v1/work", owner,
		map[string]string{"Idempotency-Key": client.NewIdempotencyKey()}, `{"scope":"t"}`), 404, "not_found")
	// The owner's operator credential on the toolbelt routes.
	wantRefusal(t, "the owner's token calling on A's socket", sockDo(t, sockA, "POST", "/v1/toolbelt/call", owner, nil, readContext), 403, "wrong_credential_class")
	wantRefusal(t, "the owner's token reading guidance on A's socket", sockDo(t, sockA, "GET", "/v1/toolbelt/guidance", owner, nil, ""), 403, "wrong_credential_class")

	// An execution token on the management socket, on every kind of route.
	mgmt := e.socket()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/health", ""},
		{"GET", "/v1/work", ""},
		{"GET", "/v1/work/" + client.PathEscape(wa.ID), ""},
		{"GET", "/v1/auth/operators", ""},
		{"POST", "/v1/work", `{"scope":"t"}`},
		{"POST", "/v1/events", `{"scope":"t","type":"e2e.forged"}`},
		{"POST", "/v1/work/" + client.PathEscape(wb.ID) + "/cancel", `{}`},
		{"POST", "/v1/auth/rotate", `{}`},
		{"POST", "/v1/toolbelt/call", readContext},
		{"GET", "/v1/toolbelt/guidance", ""},
		{"GET", "/v1/no/such/route", ""},
	} {
		r := sockDo(t, mgmt, c.method, c.path, tokA, map[string]string{"Idempotency-Key": client.NewIdempotencyKey()}, c.body)
		wantRefusal(t, "A's token on the management socket: "+c.method+" "+c.path, r, 403, "wrong_credential_class")
	}
	// Nothing the refused requests asked for happened.
	var works page[work]
	e.must("GET", "/v1/work", nil, nil, &works)
	if len(works.Items) != 2 {
		t.Fatalf("%d Work exist after the refused requests, want 2", len(works.Items))
	}
	if w := e.getWork(wb.ID); w.State != "running" {
		t.Fatalf("B is %s after a refused cancel, want running", w.State)
	}
	// Every refusal of the toolbelt was recorded against the token's own
	// execution: B's three reads and call with its token, A's two
	// assertions of the other.
	byExe := map[string]int{}
	for _, c := range e.toolbeltCalls(url.Values{"kind": {"toolbelt.rejected"}}) {
		if c.Result != "forbidden" {
			t.Errorf("refusal %+v, want forbidden", c)
		}
		byExe[c.Execution]++
	}
	if byExe[xb.ID] != 3 || byExe[xa.ID] != 2 || len(byExe) != 2 {
		t.Errorf("refusals recorded per execution %v, want 3 of B's token and 2 of A's", byExe)
	}

	// The shell process itself emits through the real os.
	out := a.mustSh(`os emit e2e.hello --data '{"n":1}'`)
	evID := strings.TrimSpace(out)
	if !strings.HasPrefix(evID, "evt_") {
		t.Fatalf("os emit printed %q, want an Event id", out)
	}
	var listed page[eventRecord]
	e.cliJSON(&listed, "events", "list", "--type", "e2e.hello")
	if len(listed.Items) != 1 || listed.Items[0].ID != evID {
		t.Fatalf("events list --type e2e.hello: %+v, want the one emitted (%s)", listed.Items, evID)
	}
	ev := listed.Items[0]
	created := e.workRecordOf(wa.ID).CreatedEvent
	if ev.Source != "execution" || ev.Execution != xa.ID || ev.Work != wa.ID || ev.Scope != "t" || ev.Parent != created || ev.Root != created || ev.Actor != "" {
		t.Fatalf("the emitted Event %+v, want source execution, execution %s, Work %s, caused by its core.work.created %s, no actor", ev, xa.ID, wa.ID, created)
	}
	if string(ev.Data) != `{"n":1}` {
		t.Errorf("the emitted Event's data %s, want {\"n\":1}", ev.Data)
	}
	// B's process is unaffected by all of it.
	if out := b.mustSh(`os call read_context`); !strings.Contains(out, wb.ID) {
		t.Errorf("B's read_context %q misses its Work", out)
	}
	// The refusals were logged and recorded, never with a token or its
	// digest.
	calls := e.must("GET", "/v1/toolbelt/calls?limit=500", nil, nil, nil)
	for name, tok := range map[string]string{"A's token": tokA, "B's token": tokB, "the owner's token": owner} {
		for where, text := range map[string]string{"daemon logs": e.allLogs(), "call records": string(calls.Body)} {
			if found := leaks(t, text, tok); len(found) > 0 {
				t.Errorf("%s appears in the %s as %v", name, where, found)
			}
		}
	}
	a.exit(0)
	b.exit(0)
	for _, id := range []string{wa.ID, wb.ID} {
		if w := e.waitWork(id, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
			t.Errorf("Work %s ended %s (%s)", id, w.State, w.OutcomeMessage)
		}
	}
}

// A terminal attempt's run directory goes (socket, token and all) while a
// live attempt's stays and keeps serving.
func TestTerminalRunDirectoryGoesLiveOneStays(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	wa, wb := e.createWork("t"), e.createWork("t")
	xa, xb := e.runningExecution(wa.ID), e.runningExecution(wb.ID)
	a, b := agentOf(t, ctl, xa.ID), agentOf(t, ctl, xb.ID)
	for _, x := range []string{xa.ID, xb.ID} {
		for _, p := range []string{e.execSocket(x), e.execTokenFile(x)} {
			if _, err := os.Stat(p); err != nil {
				t.Fatalf("a live execution's run directory lacks %s: %v", p, err)
			}
		}
	}
	tokA := e.execToken(xa.ID)
	a.exit(0)
	e.waitWork(wa.ID, "succeeded", func(w work) bool { return terminal(w.State) })
	until(t, "A's run directory going", func() bool {
		_, err := os.Stat(e.runDir(xa.ID))
		return os.IsNotExist(err)
	})
	// B's stays, and its process still reaches its toolbelt.
	for _, p := range []string{e.execSocket(xb.ID), e.execTokenFile(xb.ID)} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the live execution's %s went with the other's: %v", p, err)
		}
	}
	if out := b.mustSh("os call read_context"); !strings.Contains(out, wb.ID) {
		t.Fatalf("B's read_context after A ended: %q", out)
	}
	// A's token died with its attempt: the management socket no longer
	// even recognises it as a live execution token.
	wantRefusal(t, "the ended execution's token on the management socket", sockDo(t, e.socket(), "GET", "/v1/health", tokA, nil, ""), 401, "unauthorized")
	b.exit(0)
	e.waitWork(wb.ID, "succeeded", func(w work) bool { return terminal(w.State) })
	until(t, "B's run directory going", func() bool {
		_, err := os.Stat(e.runDir(xb.ID))
		return os.IsNotExist(err)
	})
}

// A declared outcome replaces the executor's: the shell declares failed
// and exits 0, and the Work fails with the declared message; it declares
// succeeded and exits 3, and the Work succeeds. After a declaration every
// further call of that segment is authority_released.
func TestDeclaredOutcomeReplacesTheExecutors(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	w1, w2 := e.createWork("t"), e.createWork("t")
	x1, x2 := e.runningExecution(w1.ID), e.runningExecution(w2.ID)
	a1, a2 := agentOf(t, ctl, x1.ID), agentOf(t, ctl, x2.ID)

	const msg = "tests found 3 failures"
	if out := a1.mustSh(`os outcome failed --message "` + msg + `"`); !strings.Contains(out, "declared") {
		t.Errorf("os outcome said %q, want it to say the outcome is declared", out)
	}
	for _, cmd := range []string{"os emit e2e.after", "os call read_context", "os outcome succeeded"} {
		code, _, stderr := a1.sh(cmd)
		if code != 1 || !strings.Contains(stderr, "authority_released") {
			t.Errorf("%s after declaring: exit %d %q, want 1 authority_released", cmd, code, stderr)
		}
	}
	a1.exit(0)

	a2.mustSh(`os outcome succeeded --message "all good"`)
	a2.exit(3)

	w := e.waitWork(w1.ID, "terminal", func(w work) bool { return terminal(w.State) })
	if w.State != "failed" || w.OutcomeMessage != msg {
		t.Fatalf("Work 1 ended %s %q, want failed with the declared message %q", w.State, w.OutcomeMessage, msg)
	}
	if exes := e.executions(w1.ID); len(exes) != 1 || exes[0].ExitCode != 0 {
		t.Fatalf("Work 1's executions %+v, want one whose process exited 0", exes)
	}
	w = e.waitWork(w2.ID, "terminal", func(w work) bool { return terminal(w.State) })
	if w.State != "succeeded" || w.OutcomeMessage != "all good" {
		t.Fatalf("Work 2 ended %s %q, want succeeded with the declared message", w.State, w.OutcomeMessage)
	}
	if exes := e.executions(w2.ID); len(exes) != 1 || exes[0].ExitCode != 3 {
		t.Fatalf("Work 2's executions %+v, want one whose process exited 3", exes)
	}
	released := e.toolbeltCalls(url.Values{"execution": {x1.ID}, "result": {"authority_released"}})
	if len(released) < 3 {
		t.Errorf("%d authority_released refusals recorded for the declared segment, want at least 3", len(released))
	}
}

// A toolbelt wait plus an operator wake: the shell declares a wait and
// exits; the Work waits; an Event that does not match leaves it waiting;
// an operator's matching Event (work wake, or a manual Event on its
// correlation key) wakes it into a new execution.
func TestToolbeltWaitThenOperatorWake(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	w1 := e.createWork("t")
	var created struct {
		Work work `json:"work"`
	}
	e.must("POST", "/v1/work", map[string]any{"scope": "t", "correlation_key": "e2e-ck"}, key(), &created)
	w2 := created.Work
	x1, x2 := e.runningExecution(w1.ID), e.runningExecution(w2.ID)
	a1, a2 := agentOf(t, ctl, x1.ID), agentOf(t, ctl, x2.ID)

	a1.mustSh("os wait --type x.y --timeout 1h")
	if code, _, stderr := a1.sh("os emit e2e.after"); code != 1 || !strings.Contains(stderr, "authority_released") {
		t.Errorf("os emit after os wait: exit %d %q, want 1 authority_released", code, stderr)
	}
	a1.exit(0)
	a2.mustSh("os wait --type x.z --timeout 1h")
	a2.exit(0)
	for _, id := range []string{w1.ID, w2.ID} {
		e.waitWork(id, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) })
		if w := e.getWork(id); w.State != "waiting" {
			t.Fatalf("Work %s is %s after its wait was declared, want waiting", id, w.State)
		}
	}
	// The shell cannot park: its execution ended waiting, and its run
	// directory went with it.
	until(t, "the waiting Work's ended execution's run directory going", func() bool {
		_, err := os.Stat(e.runDir(x1.ID))
		return os.IsNotExist(err)
	})
	var waits page[waitRecord]
	e.must("GET", "/v1/waits?work="+url.QueryEscape(w1.ID), nil, nil, &waits)
	if len(waits.Items) != 1 || waits.Items[0].State != "active" || len(waits.Items[0].Types) != 1 || waits.Items[0].Types[0] != "x.y" || !waits.Items[0].OnWorkKeys {
		t.Fatalf("Work 1's waits %+v, want one active on x.y and its own keys", waits.Items)
	}

	// An Event of another type does not wake it.
	var woken struct {
		Matched bool `json:"matched"`
	}
	e.cliJSON(&woken, "work", "wake", w1.ID, "--type", "x.other")
	if woken.Matched {
		t.Fatal("a wake of another type matched the wait")
	}
	if w := e.getWork(w1.ID); w.State != "waiting" {
		t.Fatalf("Work 1 is %s after a non-matching wake, want waiting", w.State)
	}
	// The operator's matching wake.
	e.cliJSON(&woken, "work", "wake", w1.ID, "--type", "x.y", "--data", `{"go":true}`)
	if !woken.Matched {
		t.Fatal("work wake --type x.y did not match the declared wait")
	}
	// The operator's manual Event on w2's correlation key.
	code, out, stderr := e.cli("emit", "x.z", "--scope", "t", "--correlation-key", "e2e-ck")
	if code != 0 {
		t.Fatalf("emit x.z: exit %d %q %q", code, out, stderr)
	}

	for _, c := range []struct {
		w   work
		old string
		typ string
	}{{w1, x1.ID, "x.y"}, {w2, x2.ID, "x.z"}} {
		next := e.runningExecution(c.w.ID, c.old)
		ag := agentOf(t, ctl, next.ID)
		ctxOut := ag.mustSh("os call read_context")
		if !strings.Contains(ctxOut, `"`+c.typ+`"`) {
			t.Errorf("the woken execution's context %s misses the waking %s Event", ctxOut, c.typ)
		}
		ag.exit(0)
		if w := e.waitWork(c.w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
			t.Errorf("Work %s ended %s after its wake", c.w.ID, w.State)
		}
		if exes := e.executions(c.w.ID); len(exes) != 2 {
			t.Errorf("Work %s has %d executions, want the first and the woken one", c.w.ID, len(exes))
		}
	}
	e.must("GET", "/v1/waits?work="+url.QueryEscape(w1.ID), nil, nil, &waits)
	if len(waits.Items) != 1 || waits.Items[0].State != "satisfied" {
		t.Errorf("Work 1's wait %+v, want satisfied", waits.Items)
	}
}

// Live ceiling narrowing: while the shell process waits, an apply that
// removes emit from the scope's authorization refuses its very next
// os emit, and only that operation; an apply that disables the scope
// refuses every call.
func TestConfigApplyNarrowsALiveToken(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	a.mustSh("os emit e2e.before")

	narrowed := []string{"declare_outcome", "read_context", "wait"}
	file := e.root + "/narrowed.json"
	if err := os.WriteFile(file, agentConfig(ctl, narrowed), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := e.cli("config", "apply", file); code != 0 {
		t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
	}
	code, _, stderr := a.sh("os emit e2e.after")
	if code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("os emit after the apply: exit %d %q, want 1 forbidden", code, stderr)
	}
	// The token is narrowed, not revoked.
	if out := a.mustSh("os call read_context"); !strings.Contains(out, w.ID) {
		t.Fatalf("read_context after the apply: %q", out)
	}
	var evs page[eventRecord]
	e.cliJSON(&evs, "events", "list", "--execution", x.ID)
	for _, ev := range evs.Items {
		if ev.Type == "e2e.after" {
			t.Fatal("the refused emission was accepted")
		}
	}
	if len(evs.Items) != 1 || evs.Items[0].Type != "e2e.before" {
		t.Fatalf("the execution's Events %+v, want only e2e.before", evs.Items)
	}
	refused := e.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.rejected"}})
	if len(refused) != 1 || refused[0].Operation != "emit" || refused[0].Result != "forbidden" {
		t.Fatalf("refusals recorded %+v, want the one emit, forbidden", refused)
	}

	// Disabling the scope refuses everything at once, reads included.
	var doc map[string]any
	if err := json.Unmarshal(agentConfig(ctl, narrowed), &doc); err != nil {
		t.Fatal(err)
	}
	doc["scopes"].(map[string]any)["t"].(map[string]any)["enabled"] = false
	disabled, _ := json.Marshal(doc)
	if err := os.WriteFile(file, disabled, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := e.cli("config", "apply", file); code != 0 {
		t.Fatalf("config apply disabling the scope: exit %d %q %q", code, out, stderr)
	}
	if code, _, stderr := a.sh("os call read_context"); code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("read_context in a disabled scope: exit %d %q, want 1 forbidden", code, stderr)
	}
	if out := a.mustSh("os guidance --json"); !strings.Contains(out, `"operations":[]`) && !strings.Contains(out, `"operations": []`) {
		t.Errorf("guidance in a disabled scope lists operations: %s", out)
	}
	a.exit(0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
}

// Recovery after kill -9 of the daemon, as the running process sees it
// (the kill drill covers the same from outside): the token is replaced by
// a rename in the token directory, the process's own os calls keep working
// with no change to its environment, the old token is refused on its
// socket and no longer recognised on the management socket, and its
// refusal is recorded against the old epoch.
func TestRecoveryRotatesTheTokenUnderTheRunningProcess(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	first := e.start()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	a.mustSh("os emit e2e.before")
	tokenFile := e.execTokenFile(x.ID)
	oldToken := e.execToken(x.ID)
	oldInode := inode(t, tokenFile)
	wantRefusal(t, "the live token on the management socket", sockDo(t, e.socket(), "GET", "/v1/health", oldToken, nil, ""), 403, "wrong_credential_class")

	first.kill()
	e.start()
	until(t, "the attempt's adoption", func() bool {
		exes := e.executions(w.ID)
		return len(exes) == 1 && exes[0].Epoch == 2 && exes[0].State == "running"
	})
	newToken := e.untilServedAgain(x.ID, oldToken)
	if newToken == oldToken {
		t.Fatal("the token was not rotated")
	}
	if inode(t, tokenFile) == oldInode {
		t.Error("the token file was rewritten in place, not replaced by a rename")
	}
	entries, err := os.ReadDir(e.runDir(x.ID) + "/token")
	if err != nil || len(entries) != 1 || entries[0].Name() != "token" {
		t.Errorf("the token directory holds %v (%v), want only the token", entries, err)
	}
	// The process, untouched, keeps working: os re-reads the token file.
	evID := strings.TrimSpace(a.mustSh("os emit e2e.after"))
	if ev := e.event(evID); ev.Execution != x.ID || ev.Source != "execution" {
		t.Fatalf("the adopted process's Event %+v, want it from %s", ev, x.ID)
	}
	readContext := callBody(t, "read_context", map[string]any{}, nil)
	wantRefusal(t, "the old token on the socket", sockDo(t, e.execSocket(x.ID), "POST", "/v1/toolbelt/call", oldToken, nil, readContext), 403, "forbidden")
	if r := sockDo(t, e.execSocket(x.ID), "POST", "/v1/toolbelt/call", newToken, nil, readContext); r.Status != 200 {
		t.Fatalf("the new token on the socket: %d %s", r.Status, r.Body)
	}
	wantRefusal(t, "the old token on the management socket", sockDo(t, e.socket(), "GET", "/v1/health", oldToken, nil, ""), 401, "unauthorized")
	wantRefusal(t, "the new token on the management socket", sockDo(t, e.socket(), "GET", "/v1/health", newToken, nil, ""), 403, "wrong_credential_class")
	refused := e.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.rejected"}})
	if len(refused) != 1 || refused[0].Epoch != 1 || refused[0].Result != "forbidden" {
		t.Errorf("refusals %+v, want the old token's, at epoch 1", refused)
	}
	ok := e.toolbeltCalls(url.Values{"execution": {x.ID}, "kind": {"toolbelt.called"}})
	if len(ok) < 2 || ok[0].Epoch != 1 || ok[len(ok)-1].Epoch != 2 || ok[0].TokenID == ok[len(ok)-1].TokenID {
		t.Errorf("calls %+v, want epoch 1's then epoch 2's, under two token ids", ok)
	}
	a.exit(0)
	if w := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("the adopted Work ended %s", w.State)
	}
}

// inode is a file's inode number.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// A graceful restart: while the daemon is stopped, the process's os calls
// find nobody on its socket (endpoint_unreachable) but its run directory
// and token file stay; the next daemon adopts the attempt, serves the
// socket again with a rotated token, and the same process's next call
// goes through.
func TestGracefulRestartServesTheSocketAgain(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	d := e.start()
	w := e.createWork("t")
	x := e.runningExecution(w.ID)
	a := agentOf(t, ctl, x.ID)
	a.mustSh("os emit e2e.before")
	oldToken := e.execToken(x.ID)
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	// Not retried here (OS_DIAL_RETRY=0), so the refusal shows at once;
	// by default os keeps dialling for a while, across a restart.
	code, _, stderr := a.sh("OS_DIAL_RETRY=0 os emit e2e.down")
	if code != 1 || !strings.Contains(stderr, "endpoint_unreachable") {
		t.Fatalf("os emit with the daemon stopped: exit %d %q, want 1 endpoint_unreachable", code, stderr)
	}
	if e.execToken(x.ID) != oldToken {
		t.Fatal("the token file changed with no daemon running")
	}
	e.start()
	until(t, "the attempt's adoption", func() bool {
		exes := e.executions(w.ID)
		return len(exes) == 1 && exes[0].Epoch == 2 && exes[0].State == "running"
	})
	if e.untilServedAgain(x.ID, oldToken) == oldToken {
		t.Fatal("the adopting daemon did not rotate the token")
	}
	a.mustSh("os emit e2e.after")
	wantRefusal(t, "the old token after the restart", sockDo(t, e.execSocket(x.ID), "POST", "/v1/toolbelt/call", oldToken, nil,
		callBody(t, "read_context", map[string]any{}, nil)), 403, "forbidden")
	var evs page[eventRecord]
	e.cliJSON(&evs, "events", "list", "--execution", x.ID, "--reverse") // oldest first
	var types []string
	for _, ev := range evs.Items {
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "e2e.before,e2e.after" {
		t.Fatalf("the execution's Events %v, want e2e.before and e2e.after only", types)
	}
	a.exit(0)
	if w := e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("Work ended %s", w.State)
	}
}
