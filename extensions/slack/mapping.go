package slack

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/extension"
)

// EventPrefix is the family of every Event the ingress accepts.
const EventPrefix = "slack."

// The Event types the ingress accepts.
const (
	TypeAppMention = "slack.app_mention"
	TypeMessage    = "slack.message"
)

// maxTextBytes bounds a message's text in an Event (Slack allows 40,000
// characters; an Event is a small, documented subset).
const maxTextBytes = 4096

// Reasons a verified request is dropped (answered 200, counted).
const (
	reasonPayloadInvalid   = "payload_invalid"
	reasonTypeUnsupported  = "type_unsupported"
	reasonEventUnsupported = "event_unsupported"
	reasonSubtype          = "subtype_unsupported"
	reasonBotMessage       = "bot_message"
	reasonMentionDuplicate = "mention_duplicate"
	reasonUnclaimed        = "unclaimed"
	// The host's drops of what Accept refuses.
	reasonScopeUnavailable = extension.WebhookScopeUnavailable
	reasonEventRefused     = extension.WebhookEventRefused
)

var (
	eventIDRule = regexp.MustCompile(`^[A-Za-z0-9]{1,128}$`)
	tsRule      = regexp.MustCompile(`^[0-9]{1,20}\.[0-9]{1,12}$`)
	idRule      = regexp.MustCompile(`^[A-Z0-9]{2,32}$`)
)

// subtypes are the message subtypes that are still a person's message in
// the thread; every other (edits, deletions, joins, bots) is dropped.
var subtypes = map[string]bool{"": true, "thread_broadcast": true, "file_share": true}

// envelope is what the mapping reads of an Events API request. Slack
// sends more; encoding/json ignores the rest.
type envelope struct {
	Type           string `json:"type"`
	Challenge      string `json:"challenge"`
	TeamID         string `json:"team_id"`
	EventID        string `json:"event_id"`
	Authorizations []struct {
		UserID string `json:"user_id"`
		IsBot  bool   `json:"is_bot"`
	} `json:"authorizations"`
	Event *struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		Channel     string `json:"channel"`
		ChannelType string `json:"channel_type"`
		User        string `json:"user"`
		BotID       string `json:"bot_id"`
		Text        string `json:"text"`
		TS          string `json:"ts"`
		ThreadTS    string `json:"thread_ts"`
	} `json:"event"`
}

// mapped is a verified request turned into an Event, before its scope is
// known; Challenge is set instead for url_verification.
type mapped struct {
	Challenge string
	Type      string
	Channel   string
	Key       string
	EventID   string
	Data      map[string]any
}

// Key is the correlation key of a thread: <channel>:<root ts>.
func Key(channel, rootTS string) string { return channel + ":" + rootTS }

// splitKey parses a thread's correlation key.
func splitKey(key string) (channel, root string, ok bool) {
	channel, root, ok = strings.Cut(key, ":")
	return channel, root, ok && idRule.MatchString(channel) && tsRule.MatchString(root)
}

// mapRequest maps a verified request's body to an Event or a challenge, or
// says why it is dropped.
func mapRequest(body []byte) (mapped, string) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return mapped{}, reasonPayloadInvalid
	}
	switch env.Type {
	case "url_verification":
		if env.Challenge == "" || len(env.Challenge) > 256 {
			return mapped{}, reasonPayloadInvalid
		}
		return mapped{Challenge: env.Challenge}, ""
	case "event_callback":
	default:
		return mapped{}, reasonTypeUnsupported
	}
	ev := env.Event
	if ev == nil || !eventIDRule.MatchString(env.EventID) {
		return mapped{}, reasonPayloadInvalid
	}
	var typ string
	switch ev.Type {
	case "app_mention":
		typ = TypeAppMention
	case "message":
		typ = TypeMessage
	default:
		return mapped{}, reasonEventUnsupported
	}
	if !subtypes[ev.Subtype] {
		return mapped{}, reasonSubtype
	}
	if ev.BotID != "" {
		// The app's own replies come back as messages: they never wake
		// the Work that posted them.
		return mapped{}, reasonBotMessage
	}
	if !idRule.MatchString(ev.Channel) || !idRule.MatchString(ev.User) || !tsRule.MatchString(ev.TS) ||
		ev.ThreadTS != "" && !tsRule.MatchString(ev.ThreadTS) {
		return mapped{}, reasonPayloadInvalid
	}
	if typ == TypeMessage {
		// A mention of the app arrives twice, as app_mention and as
		// message: the message is dropped so that one Event stands for it.
		for _, a := range env.Authorizations {
			if a.IsBot && a.UserID != "" && strings.Contains(ev.Text, "<@"+a.UserID+">") {
				return mapped{}, reasonMentionDuplicate
			}
		}
	}
	root := ev.ThreadTS
	if root == "" {
		root = ev.TS
	}
	d := map[string]any{"channel": ev.Channel, "user": ev.User, "ts": ev.TS, "thread_ts": root, "in_thread": ev.ThreadTS != "" && ev.ThreadTS != ev.TS}
	if idRule.MatchString(env.TeamID) {
		d["team"] = env.TeamID
	}
	if ev.ChannelType != "" && len(ev.ChannelType) <= 16 {
		d["channel_type"] = ev.ChannelType
	}
	d["text"] = clip(ev.Text, maxTextBytes, d, "text")
	return mapped{Type: typ, Channel: ev.Channel, Key: Key(ev.Channel, root), EventID: env.EventID, Data: d}, ""
}

// clip bounds s to at most max bytes, cut at a character boundary; when it
// cuts, it sets <name>_truncated in d.
func clip(s string, max int, d map[string]any, name string) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	d[name+"_truncated"] = true
	return s[:cut]
}
