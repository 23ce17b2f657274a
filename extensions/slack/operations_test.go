package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/slack/slacktest"
)

// fakePort holds Work and Events as the daemon's port answers them.
type fakePort struct {
	works  map[string]api.Work
	events map[string]api.Event
}

func (p *fakePort) Work(_ context.Context, id string) (api.Work, error) {
	if w, ok := p.works[id]; ok {
		return w, nil
	}
	return api.Work{}, fmt.Errorf("%w: work", extension.ErrNotFound)
}

func (p *fakePort) Event(_ context.Context, id string) (api.Event, error) {
	if e, ok := p.events[id]; ok {
		return e, nil
	}
	return api.Event{}, fmt.Errorf("%w: event", extension.ErrNotFound)
}

// started records a Work started in scope on a Slack Event keyed key.
func (p *fakePort) started(work, scope, source, key string) {
	trigger := "evt_t_" + work
	p.events[trigger] = api.Event{ID: trigger, Type: TypeAppMention, Source: source, Scope: scope, CorrelationKey: key,
		Data: json.RawMessage(`{"user":"U0ALICE","text":"<@U0BOT> how do I deploy?","ts":"` + strings.SplitN(key, ":", 2)[1] + `","team":"T0TEAM"}`)}
	p.events["evt_c_"+work] = api.Event{ID: "evt_c_" + work, Type: "core.work.created", Source: "core.router", Scope: scope, Parent: trigger}
	p.works[work] = api.Work{ID: work, Scope: scope, CreatedEvent: "evt_c_" + work}
}

type opsFixture struct {
	ext  *Extension
	fake *slacktest.Server
	root string
	ops  map[string]extension.Operation
	cfg  json.RawMessage
	host *fakeHost
}

func newOps(t *testing.T) *opsFixture {
	t.Helper()
	fake := slacktest.New(botCanary)
	t.Cleanup(fake.Close)
	fake.AddChannel("C0OPS")
	fake.AddChannel("C0ELSE")
	root := fake.Say("C0OPS", "", "U0ALICE", "<@U0BOT> how do I deploy?")
	fake.Say("C0OPS", root, "U0BOB", "I think it is make deploy")
	port := &fakePort{works: map[string]api.Work{}, events: map[string]api.Event{}}
	port.started("wrk_1", "ops", Source, Key("C0OPS", root))
	port.works["wrk_manual"] = api.Work{ID: "wrk_manual", Scope: "ops", CreatedEvent: "evt_m"}
	port.events["evt_m"] = api.Event{ID: "evt_m", Type: "core.work.created", Source: "core.manual", Scope: "ops"}
	port.started("wrk_forged", "ops", "manual", Key("C0OPS", root))
	port.started("wrk_lost", "ops", Source, Key("C0GONE", root))

	ext := &Extension{Port: port}
	cfg := json.RawMessage(`{"api":{"token":"slack-bot","url":"` + fake.URL() + `"},"channels":{"C0OPS":{"scope":"ops"},"C0ELSE":{"scope":"ops"},"C0THEIRS":{"scope":"theirs"}}}`)
	c, err := parseConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost()
	run := ext.live.attach(h, c.API)
	t.Cleanup(func() { ext.live.detach(run) })
	ops := map[string]extension.Operation{}
	for _, op := range ext.Operations() {
		ops[op.Name] = op
	}
	return &opsFixture{ext: ext, fake: fake, root: root, ops: ops, cfg: cfg, host: h}
}

func (f *opsFixture) call(t *testing.T, op, work, request, input string) (map[string]any, error) {
	t.Helper()
	auth := extension.Authority{Scope: "ops", Work: work, Operation: op, RequestID: request, Config: f.cfg}
	out, err := f.ops[op].Handler(context.Background(), auth, json.RawMessage(input))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func codeOf(err error) string {
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return fmt.Sprintf("not an OperationError: %v", err)
}

func TestContextAndThread(t *testing.T) {
	f := newOps(t)
	got, err := f.call(t, OpContext, "wrk_1", "", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if got["channel"] != "C0OPS" || got["thread_ts"] != f.root || got["user"] != "U0ALICE" || got["key"] != "C0OPS:"+f.root || got["type"] != TypeAppMention {
		t.Fatalf("context %v", got)
	}
	for _, work := range []string{"wrk_manual", "wrk_forged", "wrk_nope"} {
		if _, err := f.call(t, OpContext, work, "", `{}`); codeOf(err) != CodeNoThread {
			t.Errorf("%s: %v", work, err)
		}
	}
	if _, err := f.call(t, OpContext, "wrk_lost", "", `{}`); codeOf(err) != CodeChannelNotAllowed {
		t.Errorf("a thread in a channel no longer claimed: %v", err)
	}

	// Paged: one message a page, the root first.
	page, err := f.call(t, OpThread, "wrk_1", "", `{"limit":1}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs := page["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["ts"] != f.root || page["next_cursor"] == "" {
		t.Fatalf("first page %v", page)
	}
	page, err = f.call(t, OpThread, "wrk_1", "", `{"limit":1,"cursor":"`+page["next_cursor"].(string)+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	msgs = page["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["text"] != "I think it is make deploy" || page["next_cursor"] != "" {
		t.Fatalf("second page %v", page)
	}
	req := f.fake.Requests()
	last := req[len(req)-1]
	if last.Method != "conversations.replies" || last.Form["channel"] != "C0OPS" || last.Form["ts"] != f.root || last.Form["limit"] != "1" {
		t.Fatalf("the client sent %+v", last)
	}
	if _, err := f.call(t, OpThread, "wrk_1", "", `{"limit":500}`); codeOf(err) != CodeInvalidInput {
		t.Fatalf("a page too large: %v", err)
	}
	if _, err := f.call(t, OpThread, "wrk_1", "", `{"channel":"C0ELSE"}`); codeOf(err) != CodeInvalidInput {
		t.Fatalf("another thread through slack.thread: %v", err)
	}
}

func TestReply(t *testing.T) {
	f := newOps(t)
	got, err := f.call(t, OpReply, "wrk_1", "req-1", `{"text":"Run make deploy."}`)
	if err != nil {
		t.Fatal(err)
	}
	if got["channel"] != "C0OPS" || got["thread_ts"] != f.root || got["ts"] == "" {
		t.Fatalf("reply %v", got)
	}
	// Run again with the same request ID (a crash before its result was
	// committed): the reply it posted is answered, nothing is posted.
	again, err := f.call(t, OpReply, "wrk_1", "req-1", `{"text":"Run make deploy."}`)
	if err != nil {
		t.Fatal(err)
	}
	if again["ts"] != got["ts"] || again["replayed"] != true {
		t.Fatalf("again %v, first %v", again, got)
	}
	if _, err := f.call(t, OpReply, "wrk_1", "req-2", `{"text":"And check the logs."}`); err != nil {
		t.Fatal(err)
	}
	msgs := f.fake.Messages("C0OPS")
	var bot []string
	for _, m := range msgs {
		if m.BotID != "" {
			bot = append(bot, m.Text)
			if m.ThreadTS != f.root {
				t.Errorf("a reply outside the thread: %+v", m)
			}
		}
	}
	if len(bot) != 2 || bot[0] != "Run make deploy." {
		t.Fatalf("posted %q", bot)
	}
	var posts int
	for _, r := range f.fake.Requests() {
		if r.Method == "chat.postMessage" {
			posts++
			if r.Form["channel"] != "C0OPS" || r.Form["thread_ts"] != f.root || !strings.Contains(r.Form["metadata"], `"work":"wrk_1"`) {
				t.Errorf("postMessage sent %+v", r)
			}
		}
	}
	if posts != 2 {
		t.Fatalf("%d posts, want 2", posts)
	}
	for input, code := range map[string]string{`{"text":"  "}`: CodeInvalidInput, `{"text":"x","channel":"C0ELSE"}`: CodeInvalidInput, `{}`: CodeInvalidInput} {
		if _, err := f.call(t, OpReply, "wrk_1", "", input); codeOf(err) != code {
			t.Errorf("%s: %v", input, err)
		}
	}
	if _, err := f.call(t, OpReply, "wrk_manual", "", `{"text":"hi"}`); codeOf(err) != CodeNoThread {
		t.Fatalf("a reply from a Work with no thread: %v", err)
	}
}

func TestPost(t *testing.T) {
	f := newOps(t)
	got, err := f.call(t, OpPost, "wrk_manual", "", `{"channel":"C0ELSE","text":"Deploy started."}`)
	if err != nil {
		t.Fatal(err)
	}
	if got["channel"] != "C0ELSE" || got["thread_ts"] != got["ts"] {
		t.Fatalf("post %v", got)
	}
	for _, input := range []string{`{"channel":"C0THEIRS","text":"x"}`, `{"channel":"C0NOBODY","text":"x"}`} {
		if _, err := f.call(t, OpPost, "wrk_1", "", input); codeOf(err) != CodeChannelNotAllowed {
			t.Errorf("%s: %v", input, err)
		}
	}
	if _, err := f.call(t, OpPost, "wrk_1", "", `{"channel":"C0OPS","thread_ts":"1.2","text":"x"}`); codeOf(err) != CodeNotFound {
		t.Fatalf("an unknown thread: %v", err)
	}
}

func TestSlackErrors(t *testing.T) {
	f := newOps(t)
	f.fake.RateLimit(1)
	_, err := f.call(t, OpThread, "wrk_1", "", `{}`)
	if codeOf(err) != CodeRateLimited || !strings.Contains(err.Error(), "7s") {
		t.Fatalf("rate limited: %v", err)
	}
	// The bot token the fake does not know.
	f.host = newFakeHost()
	other := &Extension{Port: f.ext.Port}
	c, _ := parseConfig(f.cfg)
	c.API.Token = "slack-missing"
	other.live.attach(f.host, c.API)
	auth := extension.Authority{Scope: "ops", Work: "wrk_1", Config: f.cfg}
	_, err = other.thread(context.Background(), auth, nil)
	if codeOf(err) != CodeCredentialsUnavailable || strings.Contains(err.Error(), "slack-missing") {
		t.Fatalf("an unresolved token: %v", err)
	}
	fake := slacktest.New("xoxb-another")
	defer fake.Close()
	c.API.Token, c.API.URL = "slack-bot", fake.URL()
	other.live.attach(f.host, c.API)
	_, err = other.thread(context.Background(), auth, nil)
	if codeOf(err) != CodeCredentialsInvalid || strings.Contains(err.Error(), botCanary) {
		t.Fatalf("a refused token: %v", err)
	}
	noAPI := &Extension{Port: f.ext.Port}
	if _, err := noAPI.thread(context.Background(), auth, nil); codeOf(err) != CodeNotConfigured {
		t.Fatalf("no api: %v", err)
	}
}

func TestWaitReply(t *testing.T) {
	f := newOps(t)
	auth := extension.Authority{Scope: "ops", Work: "wrk_1", Config: f.cfg}
	plan, err := f.ops[OpWaitReply].Wait(context.Background(), auth, json.RawMessage(`{"timeout":"2h"}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(plan.Types, ",") != TypeMessage+","+TypeAppMention || len(plan.Keys) != 1 || plan.Keys[0] != "C0OPS:"+f.root || plan.Timeout.Hours() != 2 {
		t.Fatalf("plan %+v", plan)
	}
	for _, in := range []string{`{"timeout":"-1h"}`, `{"timeout":"9999h"}`, `{"key":"C0OPS:1.2"}`} {
		if _, err := f.ops[OpWaitReply].Wait(context.Background(), auth, json.RawMessage(in)); codeOf(err) != CodeInvalidInput {
			t.Errorf("%s: %v", in, err)
		}
	}
	auth.Work = "wrk_manual"
	if _, err := f.ops[OpWaitReply].Wait(context.Background(), auth, nil); codeOf(err) != CodeNoThread {
		t.Fatalf("a Work with no thread: %v", err)
	}
}
