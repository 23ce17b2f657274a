package slack

import (
	"encoding/json"
	"strings"
	"testing"
)

func envelopeOf(ev map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "event_callback", "team_id": "T0TEAM", "api_app_id": "A0APP", "event_id": "Ev0001",
		"authorizations": []any{map[string]any{"user_id": "U0BOT", "is_bot": true}},
		"event":          ev,
	})
	return b
}

func TestMapRequest(t *testing.T) {
	cases := []struct {
		name   string
		ev     map[string]any
		reason string
		typ    string
		key    string
	}{
		{"a mention starts a thread", map[string]any{"type": "app_mention", "channel": "C0OPS", "user": "U0ALICE", "text": "<@U0BOT> deploy?", "ts": "1712345678.000100"},
			"", TypeAppMention, "C0OPS:1712345678.000100"},
		{"a mention inside a thread", map[string]any{"type": "app_mention", "channel": "C0OPS", "user": "U0ALICE", "text": "<@U0BOT> and now?", "ts": "1712345699.000200", "thread_ts": "1712345678.000100"},
			"", TypeAppMention, "C0OPS:1712345678.000100"},
		{"a reply in a thread", map[string]any{"type": "message", "channel": "C0OPS", "user": "U0BOB", "text": "yes", "ts": "1712345680.000300", "thread_ts": "1712345678.000100", "channel_type": "channel"},
			"", TypeMessage, "C0OPS:1712345678.000100"},
		{"a broadcast reply", map[string]any{"type": "message", "subtype": "thread_broadcast", "channel": "C0OPS", "user": "U0BOB", "text": "fyi", "ts": "1712345681.000300", "thread_ts": "1712345678.000100"},
			"", TypeMessage, "C0OPS:1712345678.000100"},
		{"the app's own reply", map[string]any{"type": "message", "channel": "C0OPS", "user": "U0BOT", "bot_id": "B0BOT", "text": "done", "ts": "1712345682.000300", "thread_ts": "1712345678.000100"},
			reasonBotMessage, "", ""},
		{"an edit", map[string]any{"type": "message", "subtype": "message_changed", "channel": "C0OPS", "ts": "1712345683.000300"},
			reasonSubtype, "", ""},
		{"the message twin of a mention", map[string]any{"type": "message", "channel": "C0OPS", "user": "U0ALICE", "text": "<@U0BOT> deploy?", "ts": "1712345678.000100"},
			reasonMentionDuplicate, "", ""},
		{"a reaction", map[string]any{"type": "reaction_added", "user": "U0ALICE"}, reasonEventUnsupported, "", ""},
		{"no channel", map[string]any{"type": "message", "user": "U0ALICE", "text": "x", "ts": "1712345678.000100"}, reasonPayloadInvalid, "", ""},
		{"a bad ts", map[string]any{"type": "message", "channel": "C0OPS", "user": "U0ALICE", "text": "x", "ts": "now"}, reasonPayloadInvalid, "", ""},
	}
	for _, c := range cases {
		m, reason := mapRequest(envelopeOf(c.ev))
		if reason != c.reason || m.Type != c.typ || m.Key != c.key {
			t.Errorf("%s: %q %q %q, want %q %q %q", c.name, reason, m.Type, m.Key, c.reason, c.typ, c.key)
			continue
		}
		if reason == "" && (m.EventID != "Ev0001" || m.Channel != "C0OPS" || m.Data["thread_ts"] != "1712345678.000100" || m.Data["team"] != "T0TEAM" || m.Data["user"] == nil) {
			t.Errorf("%s: mapped %+v", c.name, m)
		}
	}
}

func TestMapRequestOtherShapes(t *testing.T) {
	m, reason := mapRequest([]byte(`{"token":"legacy-token","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`))
	if reason != "" || m.Challenge != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("url_verification: %+v %q", m, reason)
	}
	if _, reason := mapRequest([]byte(`{"type":"app_rate_limited"}`)); reason != reasonTypeUnsupported {
		t.Fatalf("app_rate_limited: %q", reason)
	}
	if _, reason := mapRequest([]byte(`{"type":`)); reason != reasonPayloadInvalid {
		t.Fatalf("not JSON: %q", reason)
	}
	if _, reason := mapRequest([]byte(`{"type":"event_callback","event_id":"Ev 1","event":{"type":"message"}}`)); reason != reasonPayloadInvalid {
		t.Fatalf("a bad event id: %q", reason)
	}
	long := strings.Repeat("é", maxTextBytes) // two bytes each
	m, reason = mapRequest(envelopeOf(map[string]any{"type": "message", "channel": "C0OPS", "user": "U0ALICE", "text": long, "ts": "1712345678.000100"}))
	if reason != "" || len(m.Data["text"].(string)) != maxTextBytes || m.Data["text_truncated"] != true {
		t.Fatalf("a long text: %q %d %v", reason, len(m.Data["text"].(string)), m.Data["text_truncated"])
	}
	if c, r, ok := splitKey(m.Key); !ok || c != "C0OPS" || r != "1712345678.000100" {
		t.Fatalf("splitKey(%q) = %q %q %v", m.Key, c, r, ok)
	}
	for _, bad := range []string{"", "C0OPS", "c0ops:1.2", "C0OPS:1712345678", "C0OPS:1.2:3"} {
		if _, _, ok := splitKey(bad); ok {
			t.Errorf("splitKey(%q) accepted", bad)
		}
	}
}
