package slack

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
)

func problems(t *testing.T, raw string) []string {
	t.Helper()
	_, err := parseConfig(json.RawMessage(raw))
	if err == nil {
		return nil
	}
	var ce *extension.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %T %v", raw, err, err)
	}
	var out []string
	for _, p := range ce.Problems {
		out = append(out, p.Pointer+" "+p.Code)
		for _, v := range []string{"0.0.0.0", "Bad-Name", "ftp:", "nowhere", "c0lower"} {
			if strings.Contains(p.Remedy, v) {
				t.Errorf("a remedy quotes %q: %s", v, p.Remedy)
			}
		}
	}
	return out
}

func TestConfig(t *testing.T) {
	good := `{"ingress":{"enabled":true,"signing_secret":"slack-signing"},"api":{"token":"slack-bot","url":"http://127.0.0.1:9/api/"},"channels":{"C0OPS":{"scope":"ops"}}}`
	if ps := problems(t, good); ps != nil {
		t.Fatalf("a good config: %q", ps)
	}
	if ps := problems(t, `{}`); ps != nil {
		t.Fatalf("an empty config: %q", ps)
	}
	cases := []struct{ raw, want string }{
		{`{"ingress":{"enabled":true}}`, "/ingress missing_field"},
		{`{"ingress":{"signing_secret":"Bad-Name"}}`, "/ingress/signing_secret invalid_value"},
		{`{"ingress":{"listen":"0.0.0.0:8788"}}`, "/ingress/listen invalid_value"},
		{`{"ingress":{"listen":"nowhere"}}`, "/ingress/listen invalid_value"},
		{`{"api":{}}`, "/api missing_field"},
		{`{"api":{"token":"slack-bot","url":"ftp://slack.com/api/"}}`, "/api/url invalid_value"},
		{`{"api":{"token":"slack-bot","url":"http://slack.com/api/"}}`, "/api/url invalid_value"},
		{`{"api":{"token":"slack-bot","url":"https://slack.com/api"}}`, "/api/url invalid_value"},
		{`{"channels":{"c0lower":{"scope":"ops"}}}`, "/channels invalid_value"},
		{`{"channels":{"C0OPS":{}}}`, "/channels/C0OPS missing_field"},
		{`{"channels":{"C0OPS":{"scope":"ops","extra":1}}}`, "/channels/C0OPS/extra unknown_field"},
		{`{"ingress":{"enabled":"yes"}}`, "/ingress/enabled wrong_type"},
	}
	for _, c := range cases {
		if got := problems(t, c.raw); !slices.Equal(got, []string{c.want}) {
			t.Errorf("%s: %q, want %q", c.raw, got, c.want)
		}
	}
	wide := `{"ingress":{"enabled":true,"listen":"0.0.0.0:8788","allow_non_loopback":true,"signing_secret":"slack-signing"},"api":{"token":"slack-bot"},"channels":{"C0OPS":{"scope":"ops"}}}`
	if ps := problems(t, wide); ps != nil {
		t.Fatalf("an allowed wide listener: %q", ps)
	}
	rep := (&Extension{}).InspectConfig(json.RawMessage(wide))
	if len(rep.Warnings) != 1 || rep.Warnings[0].Code != WarnIngressNotLoopback || rep.Warnings[0].Pointer != "/ingress/listen" {
		t.Fatalf("warnings %+v", rep.Warnings)
	}
	secrets := []extension.ConfigReference{{Pointer: "/ingress/signing_secret", Name: "slack-signing"}, {Pointer: "/api/token", Name: "slack-bot"}}
	if !slices.Equal(rep.Secrets, secrets) || !slices.Equal(rep.Scopes, []extension.ConfigReference{{Pointer: "/channels/C0OPS/scope", Name: "ops"}}) {
		t.Fatalf("report %+v", rep)
	}
	in := ingress{ext: &Extension{}}
	if !in.AdmitsTrace(json.RawMessage(wide), "ops") || in.AdmitsTrace(json.RawMessage(wide), "other") {
		t.Fatal("AdmitsTrace does not follow the channels' claims")
	}
}

// A listen member on loopback is accepted for one release and warned
// about, the warning saying where the address goes now.
func TestTheListenMemberIsDeprecated(t *testing.T) {
	rep := (&Extension{}).InspectConfig(json.RawMessage(`{"ingress":{"enabled":true,"listen":"127.0.0.1:9123","signing_secret":"slack-signing"}}`))
	if len(rep.Warnings) != 1 || rep.Warnings[0].Code != WarnIngressListenDeprecated || rep.Warnings[0].Pointer != "/ingress/listen" ||
		!strings.Contains(rep.Warnings[0].Remedy, "top-level ingress.listen") || strings.Contains(rep.Warnings[0].Remedy, "9123") {
		t.Fatalf("warnings %v", rep.Warnings)
	}
}
