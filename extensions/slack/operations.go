package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/open-conduit/open-conduit/extension"
)

// The operations.
const (
	OpContext   = "slack.context"
	OpThread    = "slack.thread"
	OpReply     = "slack.reply"
	OpPost      = "slack.post"
	OpWaitReply = "slack.wait.reply"
)

// Bounds of the operations.
const (
	// MaxTextBytes bounds a reply (Slack truncates a message's text at
	// 40,000 characters; a reply is a message a person reads).
	MaxTextBytes = 12000
	// DefaultPage and MaxPage bound a page of slack.thread.
	DefaultPage = 50
	MaxPage     = 200
	// DefaultWaitTimeout and MaxWaitTimeout bound slack.wait.reply.
	DefaultWaitTimeout = 24 * time.Hour
	MaxWaitTimeout     = 30 * 24 * time.Hour
	// dedupePages bounds the pages of 200 read to find a message an
	// earlier run of the same request posted: the thread's first 1,000
	// messages (conversations.replies answers oldest first), or the
	// channel's 1,000 newest top-level messages for a post without a
	// thread (conversations.history answers newest first).
	dedupePages = 5
)

// replyMetadata is the event_type of the metadata every message the
// operations post carries: the Work, the execution and the call's request
// ID (the host's request record is the execution's), so a call run again
// after a crash finds the message it posted instead of posting it twice.
const replyMetadata = "open_conduit_reply"

// thread is the calling Work's own thread, from the Event a route started
// it on.
type thread struct {
	Channel, Root, User, Text, TS, Type, Team, Event string
}

func opError(code, msg string) error { return &extension.OperationError{Code: code, Message: msg} }

// ownThread finds the calling Work's thread: the Slack Event that caused
// its core.work.created, in the Work's scope, whose channel the scope
// still claims.
func (e *Extension) ownThread(ctx context.Context, op string, auth extension.Authority) (thread, Config, error) {
	c, err := parseConfig(auth.Config)
	if err != nil {
		return thread{}, Config{}, opError(CodeNotConfigured, "the Slack extension's configuration does not parse")
	}
	if e.Port == nil {
		return thread{}, Config{}, opError(CodeNotConfigured, "the Slack extension cannot read the Work's thread here")
	}
	noThread := opError(CodeNoThread, op+": this Work was not started on a Slack message, so it has no thread of its own")
	w, err := e.Port.Work(ctx, auth.Work)
	if err != nil || w.Scope != auth.Scope || w.CreatedEvent == "" {
		return thread{}, Config{}, noThread
	}
	created, err := e.Port.Event(ctx, w.CreatedEvent)
	if err != nil || created.Parent == "" {
		return thread{}, Config{}, noThread
	}
	ev, err := e.Port.Event(ctx, created.Parent)
	if err != nil || ev.Source != Source || ev.Scope != auth.Scope || !strings.HasPrefix(ev.Type, EventPrefix) {
		return thread{}, Config{}, noThread
	}
	channel, root, ok := splitKey(ev.CorrelationKey)
	if !ok {
		return thread{}, Config{}, noThread
	}
	if !c.claims(auth.Scope, channel) {
		return thread{}, Config{}, opError(CodeChannelNotAllowed, op+": the thread's channel is no longer one this Work's scope claims")
	}
	var d struct {
		User string `json:"user"`
		Text string `json:"text"`
		TS   string `json:"ts"`
		Team string `json:"team"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	return thread{Channel: channel, Root: root, User: d.User, Text: d.Text, TS: d.TS, Type: ev.Type, Team: d.Team, Event: ev.ID}, c, nil
}

// decodeStrict reads input into v: an unknown member, a wrong type or
// trailing data is refused.
func decodeStrict(op string, input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data")
	}
	if err != nil {
		return opError(CodeInvalidInput, "the input of "+op+" does not match its schema (see its guidance)")
	}
	return nil
}

const (
	contextSchema = `{"type":"object","additionalProperties":false,"properties":{}}`
	threadSchema  = `{"type":"object","additionalProperties":false,"properties":{` +
		`"cursor":{"type":"string","description":"next_cursor of the previous page"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":200,"description":"messages per page (default 50)"}}}`
	replySchema = `{"type":"object","additionalProperties":false,"required":["text"],"properties":{` +
		`"text":{"type":"string","minLength":1,"maxLength":12000,"description":"the reply, in Slack's mrkdwn"},` +
		`"broadcast":{"type":"boolean","description":"also send it to the channel (default false)"}}}`
	postSchema = `{"type":"object","additionalProperties":false,"required":["channel","text"],"properties":{` +
		`"channel":{"type":"string","description":"a channel id this Work's scope claims"},` +
		`"thread_ts":{"type":"string","description":"the root ts of a thread in that channel (absent: a new message)"},` +
		`"text":{"type":"string","minLength":1,"maxLength":12000,"description":"the message, in Slack's mrkdwn"}}}`
	waitSchema = `{"type":"object","additionalProperties":false,"properties":{` +
		`"timeout":{"type":"string","description":"a Go duration such as 30m or 6h: how long to wait before waking with core.wait.timed_out (default 24h, at most 720h)"}}}`
)

func (e *Extension) Operations() []extension.Operation {
	return []extension.Operation{
		{Name: OpContext, Summary: "Say which Slack thread this Work answers: its channel, its root message and who asked.",
			InputSchema: json.RawMessage(contextSchema), Handler: e.context,
			Guidance: "Call with `{}` first: it answers `{\"channel\", \"thread_ts\", \"key\", \"user\", \"text\", \"ts\", \"type\", \"team\"}` of the Slack message this Work was started on " +
				"(`user` is who asked, `thread_ts` the thread's root). slack_no_thread: the Work was not started from Slack."},
		{Name: OpThread, Summary: "Read this Work's Slack thread, oldest message first, a page at a time.",
			InputSchema: json.RawMessage(threadSchema), Handler: e.thread,
			Guidance: "`{\"cursor\"?, \"limit\"?}` answers `{\"channel\", \"thread_ts\", \"messages\": [{\"ts\", \"user\", \"bot\", \"text\"}], \"next_cursor\"}`; " +
				"pass next_cursor back for the next page until it is empty. The root message comes first. slack_rate_limited: retry after the time it says."},
		{Name: OpReply, Summary: "Post a reply in this Work's own Slack thread.",
			InputSchema: json.RawMessage(replySchema), Handler: e.reply,
			Guidance: "`{\"text\": \"...\", \"broadcast\"?: false}` posts in the thread this Work was started on (never elsewhere; slack.post, when granted, posts in other threads). " +
				"Answers `{\"channel\", \"ts\", \"thread_ts\"}`. Pass a request ID: a retry finds the reply it posted instead of posting it again."},
		{Name: OpPost, Summary: "Post a message in a channel this Work's scope claims, or in one of its threads.",
			InputSchema: json.RawMessage(postSchema), Handler: e.post,
			Guidance: "`{\"channel\": \"C…\", \"thread_ts\"?: \"1712345678.000100\", \"text\": \"...\"}`: only channels the scope claims (slack_channel_not_allowed otherwise). " +
				"Granted separately from slack.reply, because it reaches beyond the Work's own thread. Answers `{\"channel\", \"ts\", \"thread_ts\"}`."},
		{Name: OpWaitReply, Summary: "Wait until someone replies in this Work's Slack thread.",
			InputSchema: json.RawMessage(waitSchema), Wait: e.waitReply,
			Guidance: "Declare a wait, as `wait` does, until the next message or mention in this Work's thread: `{\"timeout\"?: \"6h\"}`. " +
				"Your authority is released at once: stop and exit. The Work wakes on the slack.message (or slack.app_mention) Event, its correlation key `<channel>:<thread_ts>`, " +
				"or with core.wait.timed_out after the timeout (default 24h); read the new message with read_context or slack.thread. The app's own replies never wake it."},
	}
}

func (e *Extension) context(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	if err := decodeStrict(OpContext, input, &struct{}{}); err != nil {
		return nil, err
	}
	t, _, err := e.ownThread(ctx, OpContext, auth)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"channel": t.Channel, "thread_ts": t.Root, "key": Key(t.Channel, t.Root),
		"user": t.User, "text": t.Text, "ts": t.TS, "type": t.Type, "team": t.Team, "event": t.Event})
}

type message struct {
	TS       string `json:"ts"`
	User     string `json:"user,omitempty"`
	Bot      bool   `json:"bot"`
	Text     string `json:"text"`
	ThreadTS string `json:"thread_ts,omitempty"`
}

func (e *Extension) thread(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
	}
	if err := decodeStrict(OpThread, input, &in); err != nil {
		return nil, err
	}
	if in.Limit == 0 {
		in.Limit = DefaultPage
	}
	if in.Limit < 0 || in.Limit > MaxPage || len(in.Cursor) > 512 {
		return nil, opError(CodeInvalidInput, OpThread+": limit is 1 to 200")
	}
	t, _, err := e.ownThread(ctx, OpThread, auth)
	if err != nil {
		return nil, err
	}
	cl, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	msgs, _, next, err := cl.GetConversationRepliesContext(ctx, &slackapi.GetConversationRepliesParameters{ChannelID: t.Channel, Timestamp: t.Root, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, slackError(OpThread, err)
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, message{TS: m.Timestamp, User: m.User, Bot: m.BotID != "", Text: m.Text, ThreadTS: m.ThreadTimestamp})
	}
	return json.Marshal(map[string]any{"channel": t.Channel, "thread_ts": t.Root, "messages": out, "next_cursor": next})
}

func checkText(op, text string) error {
	if strings.TrimSpace(text) == "" || len(text) > MaxTextBytes {
		return opError(CodeInvalidInput, op+": text is 1 to 12000 bytes, not only white space")
	}
	return nil
}

func (e *Extension) reply(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Text      string `json:"text"`
		Broadcast bool   `json:"broadcast"`
	}
	if err := decodeStrict(OpReply, input, &in); err != nil {
		return nil, err
	}
	if err := checkText(OpReply, in.Text); err != nil {
		return nil, err
	}
	t, _, err := e.ownThread(ctx, OpReply, auth)
	if err != nil {
		return nil, err
	}
	return e.send(ctx, OpReply, auth, t.Channel, t.Root, in.Text, in.Broadcast)
}

func (e *Extension) post(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Channel  string `json:"channel"`
		ThreadTS string `json:"thread_ts"`
		Text     string `json:"text"`
	}
	if err := decodeStrict(OpPost, input, &in); err != nil {
		return nil, err
	}
	if err := checkText(OpPost, in.Text); err != nil {
		return nil, err
	}
	if !idRule.MatchString(in.Channel) || in.ThreadTS != "" && !tsRule.MatchString(in.ThreadTS) {
		return nil, opError(CodeInvalidInput, OpPost+": channel is a channel id (C…) and thread_ts a Slack ts such as 1712345678.000100")
	}
	c, err := parseConfig(auth.Config)
	if err != nil {
		return nil, opError(CodeNotConfigured, "the Slack extension's configuration does not parse")
	}
	if !c.claims(auth.Scope, in.Channel) {
		return nil, opError(CodeChannelNotAllowed, OpPost+": this Work's scope does not claim that channel")
	}
	return e.send(ctx, OpPost, auth, in.Channel, in.ThreadTS, in.Text, false)
}

// send posts text in channel (in the thread root when given), marked with
// the Work, the execution and the request ID. With a request ID, a
// message an earlier run of the same request posted is answered instead.
func (e *Extension) send(ctx context.Context, op string, auth extension.Authority, channel, root, text string, broadcast bool) (json.RawMessage, error) {
	cl, err := e.client(ctx)
	if err != nil {
		return nil, err
	}
	if auth.RequestID != "" {
		ts, err := findPosted(ctx, cl, channel, root, auth)
		if err != nil {
			return nil, slackError(op, err)
		}
		if ts != "" {
			thread := root
			if thread == "" {
				thread = ts
			}
			return json.Marshal(map[string]any{"channel": channel, "ts": ts, "thread_ts": thread, "replayed": true})
		}
	}
	opts := []slackapi.MsgOption{slackapi.MsgOptionText(text, false),
		slackapi.MsgOptionMetadata(slackapi.SlackMetadata{EventType: replyMetadata,
			EventPayload: map[string]any{"work": auth.Work, "execution": auth.Execution, "request": auth.RequestID}})}
	if root != "" {
		opts = append(opts, slackapi.MsgOptionTS(root))
		if broadcast {
			opts = append(opts, slackapi.MsgOptionBroadcast())
		}
	}
	gotChannel, ts, err := cl.PostMessageContext(ctx, channel, opts...)
	if err != nil {
		return nil, slackError(op, err)
	}
	if gotChannel == "" {
		gotChannel = channel
	}
	out := map[string]any{"channel": gotChannel, "ts": ts, "thread_ts": root}
	if root == "" {
		out["thread_ts"] = ts
	}
	return json.Marshal(out)
}

// findPosted looks for the message this execution posted under auth's
// request ID, and answers its ts ("" when there is none): in the thread
// root, or among the channel's newest top-level messages when root is "".
// Only a bot's message counts (metadata is an app's to set), and Slack
// answers metadata only when include_all_metadata asks for it.
func findPosted(ctx context.Context, cl *slackapi.Client, channel, root string, auth extension.Authority) (string, error) {
	cursor := ""
	for range dedupePages {
		var msgs []slackapi.Message
		var next string
		if root != "" {
			var err error
			msgs, _, next, err = cl.GetConversationRepliesContext(ctx, &slackapi.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: root, Cursor: cursor, Limit: MaxPage, IncludeAllMetadata: true})
			if err != nil {
				return "", err
			}
		} else {
			h, err := cl.GetConversationHistoryContext(ctx, &slackapi.GetConversationHistoryParameters{
				ChannelID: channel, Cursor: cursor, Limit: MaxPage, IncludeAllMetadata: true})
			if err != nil {
				return "", err
			}
			msgs, next = h.Messages, h.ResponseMetaData.NextCursor
		}
		for _, m := range msgs {
			if posted(m, auth) {
				return m.Timestamp, nil
			}
		}
		if next == "" {
			return "", nil
		}
		cursor = next
	}
	return "", nil
}

// posted reports whether m is a bot's message marked with auth's Work,
// execution and request ID.
func posted(m slackapi.Message, auth extension.Authority) bool {
	md := m.Metadata
	return m.BotID != "" && md.EventType == replyMetadata && md.EventPayload["work"] == auth.Work &&
		md.EventPayload["execution"] == auth.Execution && md.EventPayload["request"] == auth.RequestID
}

func (e *Extension) waitReply(ctx context.Context, auth extension.Authority, input json.RawMessage) (extension.WaitPlan, error) {
	var in struct {
		Timeout string `json:"timeout"`
	}
	if err := decodeStrict(OpWaitReply, input, &in); err != nil {
		return extension.WaitPlan{}, err
	}
	timeout := DefaultWaitTimeout
	if in.Timeout != "" {
		d, err := time.ParseDuration(in.Timeout)
		if err != nil || d <= 0 || d > MaxWaitTimeout {
			return extension.WaitPlan{}, opError(CodeInvalidInput, OpWaitReply+": timeout is a positive Go duration of at most 720h, such as 30m or 6h")
		}
		timeout = d
	}
	t, _, err := e.ownThread(ctx, OpWaitReply, auth)
	if err != nil {
		return extension.WaitPlan{}, err
	}
	key := Key(t.Channel, t.Root)
	out, _ := json.Marshal(map[string]any{"channel": t.Channel, "thread_ts": t.Root, "key": key})
	return extension.WaitPlan{Types: []string{TypeMessage, TypeAppMention}, Keys: []string{key}, Timeout: timeout, Output: out}, nil
}
