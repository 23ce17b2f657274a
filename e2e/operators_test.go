package e2e

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/bearer"
)

// operator is a named operator's credential as the tests keep it: its
// token in a file of its own, as the CLI's --token-file reads it.
type operator struct {
	name, role, tokenID, token, file string
}

// transcript is everything the tests saw come back from the daemon (CLI
// output, API bodies) other than the one response that issued a token,
// for the leak search.
type transcript struct{ parts []string }

func (tr *transcript) add(s ...string) { tr.parts = append(tr.parts, s...) }
func (tr *transcript) String() string  { return strings.Join(tr.parts, "\n") }

var issuedLine = regexp.MustCompile(`^Issued credential (tok_[a-z0-9]+) for operator ([a-z0-9-]+) \(role ([a-z]+)\)\.$`)

// addOperator issues a named operator's credential with the real CLI as
// the owner (`auth operators add NAME [--role ROLE]`), checks that it
// prints the token once and says so, and keeps the token in a file.
func (e *env) addOperator(name, role string) *operator {
	e.t.Helper()
	args := []string{"auth", "operators", "add", name}
	if role != "" {
		args = append(args, "--role", role)
	}
	code, out, stderr := e.cli(args...)
	if code != 0 {
		e.t.Fatalf("auth operators add %s: exit %d %q %q", name, code, out, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		e.t.Fatalf("auth operators add printed %q, want three lines", out)
	}
	m := issuedLine.FindStringSubmatch(lines[0])
	wantRole := role
	if wantRole == "" {
		wantRole = "view"
	}
	if m == nil || m[2] != name || m[3] != wantRole {
		e.t.Fatalf("auth operators add printed %q, want the credential of %s with role %s", lines[0], name, wantRole)
	}
	if !strings.Contains(lines[1], "shown once") || !strings.Contains(lines[1], "will not be shown again") {
		e.t.Errorf("auth operators add does not say the token is shown once: %q", lines[1])
	}
	tok := lines[2]
	if len(tok) != 43 || strings.Count(out, tok) != 1 {
		e.t.Fatalf("auth operators add printed %q, want a 43-character token, once", out)
	}
	o := &operator{name: name, role: wantRole, tokenID: m[1], token: tok, file: filepath.Join(e.root, name+".token")}
	if err := os.WriteFile(o.file, []byte(tok+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return o
}

// as runs the CLI with o's token file and records what came back.
func (e *env) as(tr *transcript, file string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	code, stdout, stderr = e.cli(append([]string{"--token-file", file}, args...)...)
	tr.add(stdout, stderr)
	return code, stdout, stderr
}

// wantAllowed fails the test unless the command succeeded.
func wantAllowed(t *testing.T, what string, code int, stdout, stderr string) {
	t.Helper()
	if code != 0 {
		t.Errorf("%s: exit %d %q %q, want it allowed", what, code, stdout, stderr)
	}
}

// wantRefused fails the test unless the command exited 1 saying want.
func wantRefused(t *testing.T, what string, code int, stderr, want string) {
	t.Helper()
	exit := 1
	if strings.HasPrefix(want, "invalid_request") {
		exit = 2 // the daemon found the request itself wrong: a usage error
	}
	if code != exit || !strings.Contains(stderr, want) {
		t.Errorf("%s: exit %d %q, want %d saying %q", what, code, stderr, exit, want)
	}
}

// operatorsOf lists every operator credential, active and revoked,
// through the API (all=true).
func (e *env) operatorsOf(tr *transcript) map[string]client.Operator {
	e.t.Helper()
	var list client.OperatorList
	resp := e.must("GET", "/v1/auth/operators?all=true", nil, nil, &list)
	tr.add(string(resp.Body))
	out := map[string]client.Operator{}
	for _, o := range list.Items {
		out[o.TokenID] = o
	}
	return out
}

// For every row of the role table, one call that is allowed and one that
// is refused, through the real CLI with named operators' credentials.
// Reads, route trace and config validate need view, which every operator
// credential has: their refusal is an execution's token, the credential of
// no operator (403 wrong_credential_class).
func TestEveryRowOfTheRoleTable(t *testing.T) {
	e := newEnv(t)
	ctl := e.writeAgentConfig(agentOps)
	e.start()
	tr := &transcript{}
	viewer, operate, admin := e.addOperator("vera", "view"), e.addOperator("otto", "operate"), e.addOperator("ada", "admin")
	w0 := e.createWork("t")
	x0 := e.runningExecution(w0.ID)
	a0 := agentOf(t, ctl, x0.ID)
	a0.mustSh("os call read_context")
	execFile := e.execTokenFile(x0.ID)
	execToken := e.execToken(x0.ID)

	// Reads: view.
	for _, args := range [][]string{
		{"health"}, {"work", "list"}, {"work", "get", w0.ID}, {"events", "list"}, {"executions", "list"},
		{"waits"}, {"artifacts", "list"}, {"scopes"}, {"config", "get"}, {"toolbelt", "calls"}, {"auth", "operators"},
	} {
		what := strings.Join(args, " ")
		code, out, stderr := e.as(tr, viewer.file, args...)
		wantAllowed(t, "view: "+what, code, out, stderr)
		code, _, stderr = e.as(tr, execFile, args...)
		wantRefused(t, "an execution token: "+what, code, stderr, "wrong_credential_class")
	}
	// Route trace: view.
	code, out, stderr := e.as(tr, viewer.file, "route", "--scope", "t", "--trace", "e2e.probe")
	wantAllowed(t, "view: route --trace", code, out, stderr)
	code, _, stderr = e.as(tr, execFile, "route", "--scope", "t", "--trace", "e2e.probe")
	wantRefused(t, "an execution token: route --trace", code, stderr, "wrong_credential_class")
	// Config validate: view.
	next := filepath.Join(e.root, "next.json")
	cfg := agentConfig(ctl, agentOps)
	var doc map[string]any
	if err := json.Unmarshal(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	doc["scopes"].(map[string]any)["extra"] = map[string]any{}
	cfg, _ = json.Marshal(doc)
	if err := os.WriteFile(next, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = e.as(tr, viewer.file, "config", "validate", next)
	wantAllowed(t, "view: config validate", code, out, stderr)
	code, _, stderr = e.as(tr, execFile, "config", "validate", next)
	wantRefused(t, "an execution token: config validate", code, stderr, "wrong_credential_class")

	// Config apply: admin.
	for _, o := range []*operator{viewer, operate} {
		code, _, stderr = e.as(tr, o.file, "config", "apply", next, "--expected-generation", "1")
		wantRefused(t, o.role+": config apply", code, stderr, "needs the admin role")
	}
	if h, err := e.client().Health(t.Context()); err != nil || h.Generation != 1 {
		t.Fatalf("after refused applies: health %+v %v, want generation 1", h, err)
	}
	code, out, stderr = e.as(tr, admin.file, "config", "apply", next, "--expected-generation", "1")
	wantAllowed(t, "admin: config apply", code, out, stderr)
	if h, err := e.client().Health(t.Context()); err != nil || h.Generation != 2 {
		t.Fatalf("after the admin's apply: health %+v %v, want generation 2", h, err)
	}

	// The role is checked before the body is read: a view credential
	// sending a body the route would refuse is told about its role.
	for _, c := range []struct{ path, ctype, body string }{
		{"/v1/config/apply", "application/json", "{"},
		{"/v1/work", "text/plain", `{"scope":"t"}`},
		{"/v1/auth/operators", "application/json", `{"name":"x","surprise":1}`},
	} {
		r := sockDo(t, e.socket(), "POST", c.path, viewer.token,
			map[string]string{"Content-Type": c.ctype, "Idempotency-Key": client.NewIdempotencyKey()}, c.body)
		tr.add(string(r.Body))
		wantRefusal(t, "view: POST "+c.path+" with a bad body", r, 403, "forbidden_role")
	}

	// Issuing operators: admin.
	for _, o := range []*operator{viewer, operate} {
		code, _, stderr = e.as(tr, o.file, "auth", "operators", "add", "zed-"+o.role, "--role", "view")
		wantRefused(t, o.role+": auth operators add", code, stderr, "needs the admin role")
	}
	code, out, _ = e.cli("--token-file", admin.file, "auth", "operators", "add", "zed", "--role", "view")
	if code != 0 || !strings.Contains(out, "for operator zed (role view)") {
		t.Errorf("admin: auth operators add zed: exit %d %q", code, out)
	}
	names := map[string]bool{}
	for _, o := range e.operatorsOf(tr) {
		names[o.Name] = true
	}
	if !names["zed"] || names["zed-view"] || names["zed-operate"] {
		t.Errorf("operators %v, want zed and none of the refused names", names)
	}

	// Every other control: operate. Each refusal of view first, then the
	// same call by operate.
	control := func(what string, args ...string) string {
		t.Helper()
		code, _, stderr := e.as(tr, viewer.file, args...)
		wantRefused(t, "view: "+what, code, stderr, "needs the operate role")
		code, out, stderr := e.as(tr, operate.file, append(args, "--json")...)
		if code != 0 {
			t.Fatalf("operate: %s: exit %d %q %q", what, code, out, stderr)
		}
		return out
	}
	var created struct {
		Work work `json:"work"`
	}
	if err := json.Unmarshal([]byte(control("work create", "work", "create", "--scope", "t")), &created); err != nil || created.Work.ID == "" {
		t.Fatalf("work create by operate: %v", err)
	}
	w1 := created.Work.ID
	var works page[work]
	e.must("GET", "/v1/work", nil, nil, &works)
	if len(works.Items) != 2 {
		t.Fatalf("%d Work exist, want 2: view's create was refused, operate's made one", len(works.Items))
	}
	control("emit", "emit", "e2e.note", "--scope", "t")
	x1 := e.runningExecution(w1)
	agentOf(t, ctl, x1.ID)
	control("execution cancel", "execution", "cancel", x1.ID)
	e.waitWork(w1, "held", func(w work) bool { return w.BlockedReason == "operator_cancelled" })
	control("work retry", "work", "retry", w1)
	e.runningExecution(w1, x1.ID)
	control("work wake", "work", "wake", w1, "--type", "e2e.poke")
	control("work cancel", "work", "cancel", w1)
	if w := e.waitWork(w1, "cancelled", func(w work) bool { return terminal(w.State) }); w.State != "cancelled" {
		t.Fatalf("Work 1 ended %s, want cancelled", w.State)
	}
	// Revoking an execution token.
	calls := e.toolbeltCalls(url.Values{"execution": {x0.ID}})
	if len(calls) == 0 || calls[0].TokenID == "" {
		t.Fatalf("no call record names the execution's token: %+v", calls)
	}
	control("auth revoke", "auth", "revoke", calls[0].TokenID)
	if code, _, stderr := a0.sh("os call read_context"); code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Errorf("the revoked execution token still works: exit %d %q", code, stderr)
	}
	// Rotation is a control too: view cannot rotate itself.
	before := operate.token
	control("auth rotate", "auth", "rotate")
	if b, _ := os.ReadFile(operate.file); strings.TrimSpace(string(b)) == before {
		t.Error("operate's rotation did not replace its token file")
	}
	if b, _ := os.ReadFile(viewer.file); strings.TrimSpace(string(b)) != viewer.token {
		t.Error("view's refused rotation changed its token file")
	}
	a0.exit(0)
	assertNoTokenLeaks(t, e, tr, viewer.token, before, admin.token, e.ownerToken(), execToken)
}

// Issuing, listing, rotation, revocation and recovery of operator
// credentials with the real CLI, and no token or digest anywhere but the
// response that issued it.
func TestOperatorCredentialsLifecycle(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	tr := &transcript{}
	owner0 := e.ownerToken()
	alice, bob, carol := e.addOperator("alice", "operate"), e.addOperator("bob", "admin"), e.addOperator("carol", "")
	tokens := []string{owner0, alice.token, bob.token, carol.token}
	// Names: the owner's is taken, the rule is kept, and a name has one
	// active credential at a time.
	for _, c := range []struct{ name, want string }{{"local", "invalid_request"}, {"Bad_Name", "invalid_request"}, {"alice", "conflict"}} {
		code, _, stderr := e.as(tr, e.tokenFile(), "auth", "operators", "add", c.name)
		wantRefused(t, "auth operators add "+c.name, code, stderr, c.want)
	}

	// Listing: names and roles, never a token.
	code, out, stderr := e.cli("auth", "operators")
	tr.add(out, stderr)
	if code != 0 {
		t.Fatalf("auth operators: exit %d %q", code, stderr)
	}
	for _, o := range []*operator{alice, bob, carol} {
		if !regexp.MustCompile(`(?m)^` + o.name + `\s+` + o.role + `\s+` + o.tokenID + `\s+active`).MatchString(out) {
			t.Errorf("auth operators does not list %s as %s %s active:\n%s", o.name, o.role, o.tokenID, out)
		}
	}
	if !regexp.MustCompile(`(?m)^local \(owner\)\s+admin\s+tok_`).MatchString(out) {
		t.Errorf("auth operators does not list the owner as admin:\n%s", out)
	}
	var listed client.OperatorList
	e.cliJSON(&listed, "auth", "operators")
	tr.add(string(mustJSON(t, listed)))
	if len(listed.Items) != 4 {
		t.Fatalf("auth operators --json lists %d credentials, want 4", len(listed.Items))
	}
	list := e.operatorsOf(tr)
	if list[carol.tokenID].Role != "view" || list[alice.tokenID].Role != "operate" || list[bob.tokenID].Role != "admin" {
		t.Errorf("the API lists %+v", list)
	}

	// Rotation: the old token is refused at once, the new one works, the
	// role is kept.
	code, out, stderr = e.as(tr, alice.file, "auth", "rotate")
	if code != 0 || !strings.Contains(out, "Rotated: operator alice (role operate)") {
		t.Fatalf("auth rotate: exit %d %q %q", code, out, stderr)
	}
	aliceNew := readToken(t, alice.file)
	if aliceNew == alice.token {
		t.Fatal("auth rotate left the token file as it was")
	}
	tokens = append(tokens, aliceNew)
	if _, err := client.New(e.socket(), client.StaticToken(alice.token)).Health(t.Context()); !client.IsUnauthorized(err) {
		t.Fatalf("alice's old token after rotation: %v, want unauthorized", err)
	}
	code, out, stderr = e.as(tr, alice.file, "work", "list")
	wantAllowed(t, "alice's new token", code, out, stderr)
	list = e.operatorsOf(tr)
	var aliceNewID string
	for id, o := range list {
		if o.Name == "alice" && o.Active {
			aliceNewID = id
		}
	}
	if old := list[alice.tokenID]; old.Active || old.Role != "operate" || aliceNewID == "" || list[aliceNewID].Role != "operate" {
		t.Fatalf("after rotation: old %+v, new %+v; want the old revoked and the new active, both operate", old, list[aliceNewID])
	}

	// Revocation of a named operator: refused to a non-admin, done by an
	// admin.
	code, _, stderr = e.as(tr, alice.file, "auth", "revoke", carol.tokenID)
	wantRefused(t, "operate revoking another operator", code, stderr, "needs the admin role")
	code, out, stderr = e.as(tr, carol.file, "work", "list")
	wantAllowed(t, "carol after a refused revocation", code, out, stderr)
	code, out, stderr = e.as(tr, bob.file, "auth", "revoke", carol.tokenID)
	if code != 0 || !strings.Contains(out, "Revoked "+carol.tokenID+" (operator token)") {
		t.Fatalf("admin revoking carol: exit %d %q %q", code, out, stderr)
	}
	code, _, stderr = e.as(tr, carol.file, "work", "list")
	wantRefused(t, "carol after revocation", code, stderr, "not valid")
	// The owner's credential is not a named admin's to revoke.
	ownerID := ""
	for id, o := range e.operatorsOf(tr) {
		if o.Owner && o.Active {
			ownerID = id
		}
	}
	code, _, stderr = e.as(tr, bob.file, "auth", "revoke", ownerID)
	wantRefused(t, "admin revoking the owner", code, stderr, "forbidden")
	code, out, stderr = e.as(tr, e.tokenFile(), "health")
	wantAllowed(t, "the owner after a named admin tried to revoke it", code, out, stderr)

	// Issuing and rotation never go into idempotency history, even when
	// the caller sends a key: the same key again is a new request, not a
	// replay of the token.
	ik := map[string]string{"Idempotency-Key": client.NewIdempotencyKey()}
	first := sockDo(t, e.socket(), "POST", "/v1/auth/operators", e.ownerToken(), ik, `{"name":"dora","role":"operate"}`)
	var dora client.Issued
	if first.Status != 201 || json.Unmarshal(first.Body, &dora) != nil || len(dora.Token) != 43 {
		t.Fatalf("issuing dora with a key: %d %s", first.Status, first.Body)
	}
	tokens = append(tokens, dora.Token)
	again := sockDo(t, e.socket(), "POST", "/v1/auth/operators", e.ownerToken(), ik, `{"name":"dora","role":"operate"}`)
	tr.add(string(again.Body))
	wantRefusal(t, "issuing dora again under the same key", again, 409, "conflict")
	rk := map[string]string{"Idempotency-Key": client.NewIdempotencyKey()}
	rotated := sockDo(t, e.socket(), "POST", "/v1/auth/rotate", dora.Token, rk, `{}`)
	var doraNew client.Issued
	if rotated.Status != 200 || json.Unmarshal(rotated.Body, &doraNew) != nil || doraNew.Role != "operate" {
		t.Fatalf("rotating dora with a key: %d %s", rotated.Status, rotated.Body)
	}
	tokens = append(tokens, doraNew.Token)
	again = sockDo(t, e.socket(), "POST", "/v1/auth/rotate", dora.Token, rk, `{}`)
	tr.add(string(again.Body))
	wantRefusal(t, "rotating dora's old token again under the same key", again, 401, "unauthorized")

	// A lost rotation response: the owner rotates through the raw API and
	// the response is lost (kept here only for the leak search).
	lost, err := e.client().Rotate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, lost.Token)
	code, _, stderr = e.as(tr, e.tokenFile(), "health")
	wantRefused(t, "the owner's file after a lost rotation", code, stderr, "auth recover")
	code, _, stderr = e.cli("auth", "recover", "--state", e.state)
	tr.add(stderr)
	wantRefused(t, "auth recover while the daemon runs", code, stderr, "process "+strconv.Itoa(d.cmd.Process.Pid))
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	// A restart alone changes nothing: the daemon says what to do.
	d = e.spawn()
	until(t, "the daemon serving alice", func() bool {
		_, err := client.New(e.socket(), client.TokenFile(alice.file)).Health(t.Context())
		return err == nil
	})
	if !strings.Contains(d.logs.String(), "auth recover") {
		t.Error("the daemon did not log that the owner's token file is stale")
	}
	code, _, stderr = e.as(tr, e.tokenFile(), "health")
	wantRefused(t, "the owner's stale file after a restart", code, stderr, "auth recover")
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	code, out, stderr = e.cli("auth", "recover", "--state", e.state)
	tr.add(out, stderr)
	if code != 0 || !strings.Contains(out, "Recovered") {
		t.Fatalf("auth recover: exit %d %q %q", code, out, stderr)
	}
	recovered := e.ownerToken()
	tokens = append(tokens, recovered)
	if recovered == owner0 || recovered == lost.Token {
		t.Fatal("auth recover did not write a fresh token")
	}
	e.start()
	code, out, stderr = e.as(tr, e.tokenFile(), "health")
	wantAllowed(t, "the recovered owner token", code, out, stderr)
	for what, tok := range map[string]string{"the lost rotation's token": lost.Token, "the owner's first token": owner0} {
		if _, err := client.New(e.socket(), client.StaticToken(tok)).Health(t.Context()); !client.IsUnauthorized(err) {
			t.Errorf("%s after recovery: %v, want unauthorized", what, err)
		}
	}
	code, out, stderr = e.as(tr, alice.file, "health")
	wantAllowed(t, "a named operator after the owner's recovery", code, out, stderr)
	owners := 0
	for _, o := range e.operatorsOf(tr) {
		if o.Owner && o.Active {
			owners++
		}
	}
	if owners != 1 {
		t.Errorf("%d active owner credentials after recovery, want 1", owners)
	}
	assertNoTokenLeaks(t, e, tr, tokens...)
}

// Two operators sending the same Idempotency-Key never meet: each gets
// its own Work; each one's repeat replays its own; the owner's keys are
// used as sent, and its repeat replays too.
func TestIdempotencyKeysOfTwoOperatorsNeverMeet(t *testing.T) {
	e := newEnv(t)
	e.start()
	alice, bob := e.addOperator("alice", "operate"), e.addOperator("bob", "operate")
	k := &client.RequestOptions{IdempotencyKey: client.NewIdempotencyKey()}
	body := map[string]any{"scope": "setup"}
	create := func(file string) (string, *client.Response) {
		t.Helper()
		var out struct {
			Work work `json:"work"`
		}
		c := e.client()
		if file != "" {
			c = client.New(e.socket(), client.TokenFile(file))
		}
		resp, err := c.Do(t.Context(), "POST", "/v1/work", body, k)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(resp.Body, &out); err != nil || out.Work.ID == "" {
			t.Fatalf("POST /v1/work answered %s", resp.Body)
		}
		return out.Work.ID, resp
	}
	wa, ra := create(alice.file)
	wb, rb := create(bob.file)
	wo, ro := create("")
	if wa == wb || wa == wo || wb == wo {
		t.Fatalf("Work %s (alice), %s (bob), %s (owner): the same key met", wa, wb, wo)
	}
	if ra.Replayed || rb.Replayed || ro.Replayed || rb.Status != 201 || ro.Status != 201 {
		t.Fatalf("first requests: alice %d/%v bob %d/%v owner %d/%v, want three fresh 201s", ra.Status, ra.Replayed, rb.Status, rb.Replayed, ro.Status, ro.Replayed)
	}
	for who, file := range map[string]string{"alice": alice.file, "bob": bob.file, "the owner": ""} {
		want := map[string]string{"alice": wa, "bob": wb, "the owner": wo}[who]
		id, resp := create(file)
		if id != want || !resp.Replayed {
			t.Errorf("%s's repeat: Work %s replayed=%v, want its own %s replayed", who, id, resp.Replayed, want)
		}
	}
	var works page[work]
	e.must("GET", "/v1/work", nil, nil, &works)
	if len(works.Items) != 3 {
		t.Fatalf("%d Work exist, want 3", len(works.Items))
	}
}

// The Actor of a manual Event names the operator who sent it.
func TestManualEventActorNamesItsOperator(t *testing.T) {
	e := newEnv(t)
	e.start()
	alice := e.addOperator("alice", "operate")
	emit := func(file, typ string) eventRecord {
		t.Helper()
		var out struct {
			Event eventRecord `json:"event"`
		}
		code, stdout, stderr := e.cli("--token-file", file, "emit", typ, "--scope", "setup", "--json")
		if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil {
			t.Fatalf("emit %s: exit %d %q %q", typ, code, stdout, stderr)
		}
		return e.event(out.Event.ID)
	}
	if ev := emit(alice.file, "note.alice"); ev.Actor != "operator:alice" || ev.Source != "core.manual" {
		t.Errorf("alice's Event %+v, want actor operator:alice from core.manual", ev)
	}
	if ev := emit(e.tokenFile(), "note.owner"); ev.Actor != "operator:local" || ev.Source != "core.manual" {
		t.Errorf("the owner's Event %+v, want actor operator:local from core.manual", ev)
	}
	// Through the events list too.
	var evs page[eventRecord]
	e.cliJSON(&evs, "events", "list", "--type", "note.alice")
	if len(evs.Items) != 1 || evs.Items[0].Actor != "operator:alice" {
		t.Errorf("events list --type note.alice: %+v", evs.Items)
	}
}

// tokenForms are the ways a token can leak: itself, and its digest (what
// storage keeps, bearer.DigestOf) in hex, base64 and base64url.
func tokenForms(t *testing.T, tok string) map[string]string {
	t.Helper()
	sum := bearer.DigestOf(tok)
	return map[string]string{
		"token":                   tok,
		"digest (hex)":            hex.EncodeToString(sum[:]),
		"digest (HEX)":            strings.ToUpper(hex.EncodeToString(sum[:])),
		"digest (base64)":         base64.RawStdEncoding.EncodeToString(sum[:]),
		"digest (base64url)":      base64.RawURLEncoding.EncodeToString(sum[:]),
		"token (base64 of bytes)": base64.RawStdEncoding.EncodeToString(mustDecode(t, tok)),
	}
}

// leaks lists the forms of tok found in text.
func leaks(t *testing.T, text, tok string) []string {
	t.Helper()
	var out []string
	for form, s := range tokenForms(t, tok) {
		if strings.Contains(text, s) {
			out = append(out, form)
		}
	}
	return out
}

// assertNoTokenLeaks searches the transcript and every daemon log line
// for each token in every form of tokenForms, and the coordination
// database for the plain tokens.
func assertNoTokenLeaks(t *testing.T, e *env, tr *transcript, tokens ...string) {
	t.Helper()
	places := map[string]string{"responses": tr.String(), "daemon logs": e.allLogs()}
	var db strings.Builder
	for _, name := range []string{"coordination.db", "coordination.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(e.state, name))
		db.Write(b)
	}
	if len(places["responses"]) == 0 || len(places["daemon logs"]) == 0 || db.Len() == 0 {
		t.Fatal("nothing to search")
	}
	for i, tok := range tokens {
		if len(tok) != 43 {
			t.Fatalf("token %d is not a token", i)
		}
		// Control: the search finds every form where it is.
		var all strings.Builder
		for _, s := range tokenForms(t, tok) {
			all.WriteString(s + "\n")
		}
		if n := len(leaks(t, all.String(), tok)); n != len(tokenForms(t, tok)) {
			t.Fatalf("control: the search found %d forms of %d", n, len(tokenForms(t, tok)))
		}
		for where, text := range places {
			for _, form := range leaks(t, text, tok) {
				t.Errorf("token %d's %s appears in the %s", i, form, where)
			}
		}
		if strings.Contains(db.String(), tok) {
			t.Errorf("token %d is stored in plain text", i)
		}
	}
}

func mustDecode(t *testing.T, tok string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
