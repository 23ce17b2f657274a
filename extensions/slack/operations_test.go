package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	slackapi "github.com/slack-go/slack"

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

// callAs runs op as execution exe of work with request ID request.
func (f *opsFixture) callAs(t *testing.T, op, work, exe, request, input string) map[string]any {
	t.Helper()
	auth := extension.Authority{Scope: "ops", Work: work, Execution: exe, Operation: op, RequestID: request, Config: f.cfg}
	out, err := f.ops[op].Handler(context.Background(), auth, json.RawMessage(input))
	if err != nil {
		t.Fatalf("%s %s %s: %v", op, exe, request, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *opsFixture) requests(method string) []slacktest.Request {
	var out []slacktest.Request
	for _, r := range f.fake.Requests() {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

func TestPostsAreIdempotentOnRequestID(t *testing.T) {
	f := newOps(t)
	// A reply is keyed by the execution too: another execution's request
	// with the same ID is a new request to the host, and posts.
	r1 := f.callAs(t, OpReply, "wrk_1", "exe_1", "r-1", `{"text":"one"}`)
	if again := f.callAs(t, OpReply, "wrk_1", "exe_1", "r-1", `{"text":"one"}`); again["ts"] != r1["ts"] || again["replayed"] != true {
		t.Fatalf("again %v, first %v", again, r1)
	}
	if other := f.callAs(t, OpReply, "wrk_1", "exe_2", "r-1", `{"text":"one"}`); other["ts"] == r1["ts"] || other["replayed"] != nil {
		t.Fatalf("another execution: %v", other)
	}
	if n := len(f.requests("chat.postMessage")); n != 2 {
		t.Fatalf("%d posts, want 2", n)
	}
	for _, r := range f.requests("conversations.replies") {
		if r.Form["include_all_metadata"] != "1" {
			t.Fatalf("the thread was read without its metadata: %+v", r.Form)
		}
	}

	// A post in a thread, and a post of a new message (looked for among
	// the channel's newest messages), each twice.
	p1 := f.callAs(t, OpPost, "wrk_manual", "exe_3", "p-1", `{"channel":"C0OPS","thread_ts":"`+f.root+`","text":"in the thread"}`)
	if again := f.callAs(t, OpPost, "wrk_manual", "exe_3", "p-1", `{"channel":"C0OPS","thread_ts":"`+f.root+`","text":"in the thread"}`); again["ts"] != p1["ts"] || again["replayed"] != true {
		t.Fatalf("post in a thread again %v, first %v", again, p1)
	}
	f.fake.Say("C0ELSE", "", "U0BOB", "before")
	p2 := f.callAs(t, OpPost, "wrk_manual", "exe_3", "p-2", `{"channel":"C0ELSE","text":"new message"}`)
	f.fake.Say("C0ELSE", "", "U0BOB", "after")
	f.fake.Say("C0ELSE", p2["ts"].(string), "U0BOB", "a reply to it")
	again := f.callAs(t, OpPost, "wrk_manual", "exe_3", "p-2", `{"channel":"C0ELSE","text":"new message"}`)
	if again["ts"] != p2["ts"] || again["thread_ts"] != p2["ts"] || again["channel"] != "C0ELSE" || again["replayed"] != true {
		t.Fatalf("new message again %v, first %v", again, p2)
	}
	hist := f.requests("conversations.history")
	if len(hist) != 2 || hist[1].Form["channel"] != "C0ELSE" || hist[1].Form["include_all_metadata"] != "1" {
		t.Fatalf("history requests %+v", hist)
	}
	// Another request ID posts again.
	if p3 := f.callAs(t, OpPost, "wrk_manual", "exe_3", "p-3", `{"channel":"C0ELSE","text":"new message"}`); p3["ts"] == p2["ts"] || p3["replayed"] != nil {
		t.Fatalf("another request: %v", p3)
	}
	if n := len(f.requests("chat.postMessage")); n != 5 {
		t.Fatalf("%d posts, want 5", n)
	}
	var marked int
	for _, m := range f.fake.Messages("C0ELSE") {
		if m.Metadata["event_type"] == replyMetadata {
			marked++
			p, _ := m.Metadata["event_payload"].(map[string]any)
			if p["work"] != "wrk_manual" || p["execution"] != "exe_3" || (p["request"] != "p-2" && p["request"] != "p-3") {
				t.Errorf("metadata %v", m.Metadata)
			}
		}
	}
	if marked != 2 {
		t.Fatalf("%d marked messages in C0ELSE, want 2", marked)
	}
}

func TestOnlyABotsMarkedMessageIsTakenForAPost(t *testing.T) {
	auth := extension.Authority{Work: "wrk_1", Execution: "exe_1", RequestID: "r-1"}
	md := slackapi.SlackMetadata{EventType: replyMetadata, EventPayload: map[string]any{"work": "wrk_1", "execution": "exe_1", "request": "r-1"}}
	if !posted(slackapi.Message{Msg: slackapi.Msg{BotID: "B0BOT", Metadata: md}}, auth) {
		t.Fatal("the bot's own marked message is not found")
	}
	for name, m := range map[string]slackapi.Message{
		"a person's":             {Msg: slackapi.Msg{User: "U0ALICE", Metadata: md}},
		"another event type":     {Msg: slackapi.Msg{BotID: "B0BOT", Metadata: slackapi.SlackMetadata{EventType: "other", EventPayload: md.EventPayload}}},
		"another request":        {Msg: slackapi.Msg{BotID: "B0BOT", Metadata: slackapi.SlackMetadata{EventType: replyMetadata, EventPayload: map[string]any{"work": "wrk_1", "execution": "exe_1", "request": "r-2"}}}},
		"another execution":      {Msg: slackapi.Msg{BotID: "B0BOT", Metadata: slackapi.SlackMetadata{EventType: replyMetadata, EventPayload: map[string]any{"work": "wrk_1", "execution": "exe_2", "request": "r-1"}}}},
		"metadata not asked for": {Msg: slackapi.Msg{BotID: "B0BOT"}},
	} {
		if posted(m, auth) {
			t.Errorf("%s message is taken for the post", name)
		}
	}
}

func TestFakeAnswersMetadataOnlyWhenAsked(t *testing.T) {
	f := newOps(t)
	f.callAs(t, OpReply, "wrk_1", "exe_1", "r-1", `{"text":"one"}`)
	cl := slackapi.New(botCanary, slackapi.OptionAPIURL(f.fake.URL()))
	for _, all := range []bool{false, true} {
		msgs, _, _, err := cl.GetConversationReplies(&slackapi.GetConversationRepliesParameters{ChannelID: "C0OPS", Timestamp: f.root, IncludeAllMetadata: all})
		if err != nil {
			t.Fatal(err)
		}
		got := msgs[len(msgs)-1].Metadata.EventType
		if (got == replyMetadata) != all {
			t.Fatalf("include_all_metadata %v: event_type %q", all, got)
		}
	}
	// Metadata Slack would refuse is refused.
	if _, _, err := cl.PostMessage("C0OPS", slackapi.MsgOptionText("x", false), slackapi.MsgOptionMetadata(slackapi.SlackMetadata{EventType: "bad type!"})); err == nil || !strings.Contains(err.Error(), "invalid_metadata_schema") {
		t.Fatalf("bad metadata: %v", err)
	}
}
