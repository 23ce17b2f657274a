package slack

import (
	"strings"

	"github.com/open-conduit/open-conduit/extension"
)

// Since is the version the toolset's first members joined in.
const Since = "0.1.0"

// ToolsetResponder is granted as @slack.responder: what answering in the
// Work's own thread needs. slack.post is in no toolset: it reaches beyond
// the Work's thread, so a binding grants it by name.
const ToolsetResponder = "slack.responder"

var responderOps = []string{"read_context", OpContext, OpThread, OpReply, OpWaitReply, "declare_outcome"}

// Toolsets are the extension's roles.
func (*Extension) Toolsets() []extension.Toolset {
	t := extension.Toolset{Name: ToolsetResponder}
	for _, op := range responderOps {
		t.Operations = append(t.Operations, extension.ToolsetOperation{Name: op, Since: Since})
	}
	return []extension.Toolset{t}
}

// PlaybookResponder is the playbook of answering in a thread.
const PlaybookResponder = "slack-responder"

var responderPlaybookOps = []string{"read_context", OpContext, OpThread, OpReply, OpWaitReply, "declare_outcome"}

// Playbooks are the skill of answering in a Slack thread; it declares the
// operations it uses, so the grant warnings and config_drift know them.
func (*Extension) Playbooks() []extension.Playbook {
	return []extension.Playbook{{Name: PlaybookResponder, Markdown: "---\nname: " + PlaybookResponder +
		"\ndescription: Answer a question asked in a Slack thread.\noperations: [" + strings.Join(responderPlaybookOps, ", ") + "]\n---\n" + responderPlaybook}}
}

const responderPlaybook = `
# Answering in a Slack thread

You were started on a Slack message: someone mentioned the app, or wrote in
a channel it listens to. Everything you say goes to that thread.

1. Call slack.context: the channel, the thread's root (thread_ts), who
   asked (user) and what they wrote (text).
2. Read the whole thread with slack.thread, following next_cursor until it
   is empty: earlier messages often hold what the question depends on.
3. Do what was asked. Keep the person informed: a short reply with
   slack.reply when you start something long is better than silence.
4. Answer with slack.reply: plain sentences, Slack's mrkdwn for code
   (` + "```" + ` blocks), no more than the thread needs. Pass a request ID, so a
   retry does not post twice.
5. If you need an answer from a person, ask in the thread with slack.reply,
   then wait with slack.wait.reply and stop: you are started again when
   someone replies (read it with read_context or slack.thread), or when the
   wait times out.
6. End with declare_outcome: succeeded with what you answered, or failed
   with why you could not.

slack_rate_limited: wait the time it says and try once more.
slack_forbidden or slack_channel_not_allowed: the app may not do that here;
do not retry, say so in your outcome.
`
