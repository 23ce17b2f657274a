package slack

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	secret := []byte("signing-canary")
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"type":"event_callback"}`)
	good := Sign(secret, ts, body)
	old := strconv.FormatInt(now.Add(-MaxSkew-time.Second).Unix(), 10)
	edge := strconv.FormatInt(now.Add(-MaxSkew).Unix(), 10)
	future := strconv.FormatInt(now.Add(MaxSkew+time.Second).Unix(), 10)
	cases := []struct {
		name, ts, sig string
		body          []byte
		want          string
	}{
		{"good", ts, good, body, ""},
		{"five minutes old", edge, Sign(secret, edge, body), body, ""},
		{"stale", old, Sign(secret, old, body), body, reasonTimestampStale},
		{"from the future", future, Sign(secret, future, body), body, reasonTimestampStale},
		{"no timestamp", "", good, body, reasonTimestampMissing},
		{"not a number", "12ab", good, body, reasonTimestampMissing},
		{"no signature", ts, "", body, reasonSignatureMissing},
		{"another version", ts, "v1=" + strings.Repeat("0", 64), body, reasonSignatureMalformed},
		{"not hex", ts, "v0=" + strings.Repeat("z", 64), body, reasonSignatureMalformed},
		{"short", ts, good[:20], body, reasonSignatureMalformed},
		{"another body", ts, good, []byte(`{"type":"event_callback" }`), reasonSignatureMismatch},
		{"another timestamp signed", ts, Sign(secret, edge, body), body, reasonSignatureMismatch},
		{"another secret", ts, Sign([]byte("other"), ts, body), body, reasonSignatureMismatch},
	}
	for _, c := range cases {
		if got := verify(secret, c.body, c.ts, c.sig, now); got != c.want {
			t.Errorf("%s: verify = %q, want %q", c.name, got, c.want)
		}
	}
}

// Slack's documented example: the signature of its sample request.
func TestSignMatchesSlacksExample(t *testing.T) {
	body := "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	got := Sign([]byte("8f742231b10e8888abcd99yyyzzz85a5"), "1531420618", []byte(body))
	if want := "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"; got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}
