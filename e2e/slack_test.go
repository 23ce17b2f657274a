package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extensions/slack"
	"github.com/open-conduit/open-conduit/extensions/slack/slacktest"
)

// The Slack extension end to end: the real daemon's Events API ingress on
// a real loopback port, signed requests as Slack sends them, and a fake of
// Slack's Web API on 127.0.0.1 that the extension's client library is
// pointed at. A mention starts a Work; a bad or stale signature is 401 and
// leaves no Event; a retry is one Event; the Work's shell execution reads
// its thread and replies through os call; a reply in the thread wakes it
// from slack.wait.reply; the signing secret and the bot token are nowhere.

const (
	slackSigning = "slack-signing-e2e-canary-0b7d93"
	slackBot     = "xoxb-e2e-bot-canary-4c22e1"
)

func (e *env) slackConfig(port int, ctl, apiURL string) []byte {
	e.t.Helper()
	cfg := map[string]any{
		"version": 1,
		"secrets": map[string]any{"slack-signing": "env:OC_E2E_SLACK_SIGNING", "slack-bot": "env:OC_E2E_SLACK_BOT"},
		"scopes": map[string]any{
			"ops": map[string]any{
				"authorization": map[string]any{"operations": []string{"@slack.responder"}, "reads": []string{"work", "events"}},
				"bindings": map[string]any{"responder": map[string]any{
					"executor": "shell", "operations": []string{"@slack.responder"},
					"config": map[string]any{"command": []string{"sh", "-c", agentScript}, "env": map[string]string{"CTL": ctl}},
				}},
				"routes": []any{map[string]any{"id": "mention", "match": map[string]any{"type": "slack.app_mention", "source": "slack.events"}, "binding": "responder"}},
			},
			"other": map[string]any{},
		},
		"ingress": map[string]any{"listen": "127.0.0.1:" + strconv.Itoa(port)},
		"extensions": map[string]any{"slack": map[string]any{"config": map[string]any{
			"ingress":  map[string]any{"enabled": true, "signing_secret": "slack-signing"},
			"api":      map[string]any{"token": "slack-bot", "url": apiURL},
			"channels": map[string]any{"C0OPS": map[string]any{"scope": "ops"}},
		}}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

type slackRequest struct {
	body           []byte
	ts, sig, retry string
}

// slackSigned signs body as Slack does, at the time at.
func slackSigned(at time.Time, body []byte) slackRequest {
	ts := strconv.FormatInt(at.Unix(), 10)
	return slackRequest{body: body, ts: ts, sig: slack.Sign([]byte(slackSigning), ts, body)}
}

func slackEvent(eventID string, ev map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"token": "legacy-verification-token", "team_id": "T0E2E", "api_app_id": "A0E2E", "type": "event_callback",
		"event_id": eventID, "event_time": 1712345678, "authorizations": []any{map[string]any{"user_id": "U0FAKEBOT", "is_bot": true}}, "event": ev})
	return b
}

// post sends a request to the ingress as Slack does and returns its status
// and body.
func (r slackRequest) post(t *testing.T, eventsURL string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, eventsURL, bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	req.Header.Set("X-Slack-Request-Timestamp", r.ts)
	if r.sig != "" {
		req.Header.Set("X-Slack-Signature", r.sig)
	}
	if r.retry != "" {
		req.Header.Set("X-Slack-Retry-Num", r.retry)
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: guard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) slackEvents() []eventRecord {
	e.t.Helper()
	var out []eventRecord
	for _, id := range e.eventIDs() {
		if ev := e.event(id); ev.Source == "slack.events" {
			out = append(out, ev)
		}
	}
	return out
}

func TestSlackExtensionEndToEnd(t *testing.T) {
	e := newEnv(t)
	fake := slacktest.New(slackBot)
	defer fake.Close()
	fake.AddChannel("C0OPS")
	root := fake.Say("C0OPS", "", "U0ALICE", "<@U0FAKEBOT> how do I deploy?")
	fake.Say("C0OPS", root, "U0BOB", "I think it is make deploy")
	ctl := filepath.Join(e.root, "c")
	for _, dir := range []string{e.state, ctl} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	writeFile(t, filepath.Join(e.state, "config.json"), e.slackConfig(port, ctl, fake.URL()))
	e.start("OC_E2E_SLACK_SIGNING="+slackSigning, "OC_E2E_SLACK_BOT="+slackBot)
	eventsURL := "http://127.0.0.1:" + strconv.Itoa(port) + "/slack/events"
	until(t, "the ingress listening", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	var responses []string
	send := func(what string, r slackRequest, wantCode int, want string) {
		t.Helper()
		code, body := r.post(t, eventsURL)
		responses = append(responses, body)
		if code != wantCode || !strings.Contains(body, want) {
			t.Fatalf("%s: %d %s, want %d with %s", what, code, body, wantCode, want)
		}
	}
	mention := slackEvent("Ev0E2EMENTION", map[string]any{"type": "app_mention", "channel": "C0OPS", "user": "U0ALICE", "text": "<@U0FAKEBOT> how do I deploy?", "ts": root})

	// Refused before anything is read: a wrong signature, none, and a
	// request signed ten minutes ago.
	bad := slackSigned(time.Now(), mention)
	bad.sig = "v0=" + strings.Repeat("0", 64)
	send("a wrong signature", bad, http.StatusUnauthorized, "signature_mismatch")
	none := slackSigned(time.Now(), mention)
	none.sig = ""
	send("no signature", none, http.StatusUnauthorized, "signature_missing")
	send("a stale request", slackSigned(time.Now().Add(-10*time.Minute), mention), http.StatusUnauthorized, "timestamp_stale")
	if evs := e.slackEvents(); len(evs) != 0 {
		t.Fatalf("refused requests left events: %+v", evs)
	}

	// Slack's URL check, and a channel no scope claims.
	send("the url_verification challenge", slackSigned(time.Now(), []byte(`{"token":"legacy","challenge":"e2e-challenge-7","type":"url_verification"}`)), http.StatusOK, `"challenge":"e2e-challenge-7"`)
	send("an unclaimed channel", slackSigned(time.Now(), slackEvent("Ev0E2EELSE", map[string]any{"type": "app_mention", "channel": "C0ELSEWHERE", "user": "U0ALICE", "text": "hi", "ts": "1712345000.000100"})),
		http.StatusOK, `"unclaimed"`)
	if evs := e.slackEvents(); len(evs) != 0 {
		t.Fatalf("an unclaimed channel left events: %+v", evs)
	}

	// The mention starts a Work; Slack's retry of it is the same Event.
	send("a mention", slackSigned(time.Now(), mention), http.StatusOK, `"accepted"`)
	retry := slackSigned(time.Now(), mention)
	retry.retry = "1"
	send("a retry", retry, http.StatusOK, `"replayed":true`)
	evs := e.slackEvents()
	if len(evs) != 1 || evs[0].Type != "slack.app_mention" || evs[0].Scope != "ops" || evs[0].CorrelationKey != "C0OPS:"+root {
		t.Fatalf("events %+v", evs)
	}
	var works page[work]
	until(t, "the route starting a Work", func() bool {
		e.must("GET", "/v1/work?scope=ops", nil, nil, &works)
		return len(works.Items) == 1
	})
	w1 := works.Items[0].ID
	x1 := e.runningExecution(w1)
	a1 := agentOf(t, ctl, x1.ID)
	execTokens := []string{e.execToken(x1.ID)}

	// The shell execution reads its thread and answers in it.
	if out := a1.mustSh("os call slack.context"); !strings.Contains(out, `"user": "U0ALICE"`) || !strings.Contains(out, root) {
		t.Fatalf("slack.context: %s", out)
	}
	if out := a1.mustSh(`os call slack.thread --input '{"limit":10}'`); !strings.Contains(out, "I think it is make deploy") || !strings.Contains(out, "how do I deploy?") {
		t.Fatalf("slack.thread: %s", out)
	}
	if out := a1.mustSh(`os call slack.reply --request-id reply-1 --input '{"text":"Run make deploy, then check the dashboard."}'`); !strings.Contains(out, `"thread_ts": "`+root+`"`) {
		t.Fatalf("slack.reply: %s", out)
	}
	var replies []slacktest.Message
	for _, m := range fake.Messages("C0OPS") {
		if m.BotID != "" {
			replies = append(replies, m)
		}
	}
	if len(replies) != 1 || replies[0].ThreadTS != root || replies[0].Text != "Run make deploy, then check the dashboard." {
		t.Fatalf("Slack holds the replies %+v", replies)
	}
	var methods []string
	for _, r := range fake.Requests() {
		methods = append(methods, r.Method)
	}
	// The reply with a request ID first looks for one it posted before.
	if want := []string{"conversations.replies", "conversations.replies", "chat.postMessage"}; !slices.Equal(methods, want) {
		t.Fatalf("Slack saw %q, want %q", methods, want)
	}

	// It waits for the next reply and stops.
	if out := a1.mustSh(`os call slack.wait.reply --input '{"timeout":"1h"}'`); !strings.Contains(out, `"declared": "wait"`) || !strings.Contains(out, "C0OPS:"+root) {
		t.Fatalf("slack.wait.reply: %s", out)
	}
	a1.exit(0)
	e.waitWork(w1, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) })
	var waits page[struct {
		waitRecord
		Keys         []string `json:"keys"`
		Registration string   `json:"registration"`
	}]
	e.must("GET", "/v1/waits?work="+url.QueryEscape(w1), nil, nil, &waits)
	if len(waits.Items) != 1 || waits.Items[0].State != "active" || !slices.Equal(waits.Items[0].Keys, []string{"C0OPS:" + root}) || waits.Items[0].Registration != "slack" {
		t.Fatalf("waits %+v", waits.Items)
	}

	// The app's own reply comes back from Slack as a message: dropped.
	send("the app's own reply", slackSigned(time.Now(), slackEvent("Ev0E2EOWN", map[string]any{"type": "message", "channel": "C0OPS", "user": "U0FAKEBOT", "bot_id": "B0FAKEBOT",
		"text": replies[0].Text, "ts": replies[0].TS, "thread_ts": root})), http.StatusOK, `"bot_message"`)

	// A person's reply in the thread wakes the Work.
	answer := fake.Say("C0OPS", root, "U0ALICE", "thanks, it worked")
	send("a reply in the thread", slackSigned(time.Now(), slackEvent("Ev0E2EREPLY", map[string]any{"type": "message", "channel": "C0OPS", "user": "U0ALICE",
		"text": "thanks, it worked", "ts": answer, "thread_ts": root, "channel_type": "channel"})), http.StatusOK, `"accepted"`)
	x2 := e.runningExecution(w1, x1.ID)
	a2 := agentOf(t, ctl, x2.ID)
	execTokens = append(execTokens, e.execToken(x2.ID))
	if out := a2.mustSh("os call read_context"); !strings.Contains(out, "slack.message") || !strings.Contains(out, "thanks, it worked") {
		t.Fatalf("the woken attempt's context: %s", out)
	}
	a2.mustSh("os outcome succeeded --message answered")
	a2.exit(0)
	if w := e.waitWork(w1, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
		t.Fatalf("the Work ended %s (%s)\n%s", w.State, w.OutcomeMessage, e.allLogs())
	}
	if evs := e.slackEvents(); len(evs) != 2 {
		t.Fatalf("%d Slack events, want the mention and the reply: %+v", len(evs), evs)
	}

	// Canary: no signing secret, bot token or execution token in a
	// response, a log line, the database or any file the run left.
	canaries := map[string]string{"the signing secret": slackSigning, "the bot token": slackBot}
	for i, tok := range execTokens {
		canaries[fmt.Sprintf("execution token %d", i)] = tok
	}
	logs := e.noSecrets(canaries, responses, "/v1/config", "/v1/events?limit=500", "/v1/work", "/v1/toolbelt/calls?limit=500", "/v1/waits", "/v1/executions?work="+w1, "/v1/scopes/ops")
	if !strings.Contains(logs, "signature_mismatch") || !strings.Contains(logs, "timestamp_stale") || !strings.Contains(logs, "unclaimed") {
		t.Fatalf("the refusals and the drop are not logged with their reasons:\n%s", logs)
	}
}

// The offline config check knows the Slack extension: a listener beyond
// loopback is warned about, a signing secret no secret names is an unknown
// reference, and a binding on the responder's playbook without its
// operations is warned about.
func TestSlackConfigThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	doc := func(f func(sl map[string]any, doc map[string]any)) string {
		var d map[string]any
		if err := json.Unmarshal(e.slackConfig(8788, filepath.Join(e.root, "c"), "http://127.0.0.1:9/api/"), &d); err != nil {
			t.Fatal(err)
		}
		f(d["extensions"].(map[string]any)["slack"].(map[string]any)["config"].(map[string]any), d)
		b, _ := json.Marshal(d)
		return writeFile(t, filepath.Join(e.root, "slack.json"), b)
	}
	type finding struct {
		Pointer string `json:"pointer"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	var checked struct {
		Valid       bool      `json:"valid"`
		Diagnostics []finding `json:"diagnostics"`
		Warnings    []finding `json:"warnings"`
	}
	wide := doc(func(sl, d map[string]any) {
		sl["ingress"].(map[string]any)["listen"] = "0.0.0.0:8788"
		sl["ingress"].(map[string]any)["allow_non_loopback"] = true
		bindings := d["scopes"].(map[string]any)["ops"].(map[string]any)["bindings"].(map[string]any)
		bindings["asker"] = map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"true"}},
			"operations": []string{"slack.context", "declare_outcome"}, "playbook": "slack-responder"}
	})
	e.cliJSON(&checked, "config", "check", wide)
	var codes []string
	for _, w := range checked.Warnings {
		codes = append(codes, w.Pointer+" "+w.Code)
	}
	slices.Sort(codes)
	want := []string{"/extensions/slack/config/ingress/listen slack_ingress_not_loopback", "/scopes/ops/bindings/asker/playbook playbook_not_granted"}
	if !checked.Valid || !slices.Equal(codes, want) {
		t.Fatalf("config check: %+v, warnings %q, want %q", checked, codes, want)
	}
	dangling := doc(func(sl, _ map[string]any) {
		sl["ingress"].(map[string]any)["signing_secret"] = "nope"
	})
	code, stdout, _ := e.cli("config", "check", dangling, "--json")
	if code == 0 || !strings.Contains(stdout, `"/extensions/slack/config/ingress/signing_secret"`) || !strings.Contains(stdout, "unknown_reference") || strings.Contains(stdout, "nope") {
		t.Fatalf("a dangling signing secret: exit %d %s", code, stdout)
	}
}
