package github

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
	err := (&Extension{}).CheckConfig(json.RawMessage(raw))
	if err == nil {
		return nil
	}
	var ce *extension.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %v is not a ConfigError", raw, err)
	}
	var out []string
	for _, p := range ce.Problems {
		if strings.Contains(p.Remedy, "10.1.2.3") || strings.Contains(p.Remedy, "Hook_Secret") || strings.Contains(p.Remedy, "octo") {
			t.Fatalf("%s: remedy %q quotes the config", raw, p.Remedy)
		}
		out = append(out, p.Pointer+" "+p.Code)
	}
	return out
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []string
	}{
		{`{}`, nil},
		{`{"ingress": {}}`, nil},
		{`{"ingress": {"enabled": false, "listen": "127.0.0.1:0"}}`, nil},
		{`{"ingress": {"enabled": true, "secret": "gh-hook"}, "repositories": {"octo/hello": {"scope": "ops"}}, "installations": {"42": {"scope": "ops"}}}`, nil},
		{`{"ingress": {"enabled": true, "listen": "[::1]:9000", "secret": "gh-hook"}}`, nil},
		{`{"ingress": {"enabled": true, "listen": "localhost:9000", "secret": "gh-hook"}}`, nil},
		{`{"ingress": {"enabled": true, "listen": "10.1.2.3:9000", "allow_non_loopback": true, "secret": "gh-hook"}}`, nil},
		{`{"ingress": {"enabled": true}}`, []string{"/ingress missing_field"}},
		{`{"ingress": {"enabled": true, "secret": "Hook_Secret"}}`, []string{"/ingress/secret invalid_value"}},
		{`{"ingress": {"listen": "10.1.2.3:9000"}}`, []string{"/ingress/listen invalid_value"}},
		{`{"ingress": {"listen": ":9000"}}`, []string{"/ingress/listen invalid_value"}},
		{`{"ingress": {"listen": "hooks.example.com:9000", "allow_non_loopback": true}}`, []string{"/ingress/listen invalid_value"}},
		{`{"ingress": {"listen": "127.0.0.1"}}`, []string{"/ingress/listen invalid_value"}},
		{`{"ingress": {"listen": "127.0.0.1:65536"}}`, []string{"/ingress/listen invalid_value"}},
		{`{"ingress": {"listen": "127.0.0.1:08"}}`, []string{"/ingress/listen invalid_value"}},
		{`{"ingress": {"enabled": "yes"}}`, []string{"/ingress/enabled wrong_type"}},
		{`{"ingress": {"port": 1}}`, []string{"/ingress/port unknown_field"}},
		{`{"ingress": {"secret": null}}`, []string{"/ingress/secret null_value"}},
		{`{"repositories": {"octo": {"scope": "ops"}}}`, []string{"/repositories/octo invalid_value"}},
		{`{"repositories": {"octo/a/b": {"scope": "ops"}}}`, []string{"/repositories/octo~1a~1b invalid_value"}},
		{`{"repositories": {"octo/..": {"scope": "ops"}}}`, []string{"/repositories/octo~1.. invalid_value"}},
		{`{"repositories": {"octo/hello": {}}}`, []string{"/repositories/octo~1hello missing_field"}},
		{`{"repositories": {"Octo/Hello": {"scope": "a"}, "octo/hello": {"scope": "b"}}}`, []string{"/repositories/octo~1hello duplicate_key"}},
		{`{"repositories": {"octo/hello": {"scope": "a"}, "octo/hello": {"scope": "b"}}}`, []string{"/repositories/octo~1hello duplicate_key"}},
		{`{"repositories": {"octo/hello": {"scope": "a", "api": 1}}}`, []string{"/repositories/octo~1hello/api unknown_field"}},
		{`{"installations": {"0x2a": {"scope": "ops"}}}`, []string{"/installations/0x2a invalid_value"}},
		{`{"installations": {"042": {"scope": "ops"}}}`, []string{"/installations/042 invalid_value"}},
		{`{"hooks": []}`, []string{"/hooks unknown_field"}},
	} {
		if got := problems(t, c.raw); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestInspectConfig(t *testing.T) {
	ext := &Extension{}
	rep := ext.InspectConfig(json.RawMessage(`{"ingress": {"enabled": true, "listen": "0.0.0.0:9000", "allow_non_loopback": true, "secret": "gh-hook"},
		"repositories": {"octo/hello": {"scope": "ops"}}, "installations": {"42": {"scope": "dev"}}}`))
	if !slices.Equal(rep.Secrets, []extension.ConfigReference{{Pointer: "/ingress/secret", Name: "gh-hook"}}) {
		t.Fatalf("secrets %v", rep.Secrets)
	}
	if !slices.Equal(rep.Scopes, []extension.ConfigReference{{Pointer: "/repositories/octo~1hello/scope", Name: "ops"}, {Pointer: "/installations/42/scope", Name: "dev"}}) {
		t.Fatalf("scopes %v", rep.Scopes)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Code != WarnIngressNotLoopback || rep.Warnings[0].Pointer != "/ingress/listen" || strings.Contains(rep.Warnings[0].Remedy, "0.0.0.0") {
		t.Fatalf("warnings %v", rep.Warnings)
	}
	if rep := ext.InspectConfig(json.RawMessage(`{"ingress": {"enabled": true, "secret": "gh-hook"}}`)); len(rep.Warnings) != 0 {
		t.Fatalf("loopback warned: %v", rep.Warnings)
	}
}

func TestAdmitsTraceInItsOwnScopes(t *testing.T) {
	ing := (&Extension{}).Ingress()
	cfg := json.RawMessage(`{"repositories": {"octo/hello": {"scope": "ops"}}, "installations": {"42": {"scope": "dev"}}}`)
	for scope, want := range map[string]bool{"ops": true, "dev": true, "other": false} {
		if got := ing.AdmitsTrace(cfg, scope); got != want {
			t.Errorf("AdmitsTrace(%s) = %v, want %v", scope, got, want)
		}
	}
	if ing.AdmitsTrace(json.RawMessage(`{}`), "ops") {
		t.Error("an empty config admits a scope")
	}
}

func TestRepositoryClaimsComeFirstAndIgnoreCase(t *testing.T) {
	c, err := parseConfig(json.RawMessage(`{"repositories": {"Octo/Hello": {"scope": "ops"}}, "installations": {"42": {"scope": "dev"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cl := claimsOf(c)
	for _, tc := range []struct {
		repo  string
		inst  int64
		scope string
		ok    bool
	}{
		{"octo/hello", 42, "ops", true}, {"OCTO/HELLO", 0, "ops", true}, {"octo/other", 42, "dev", true},
		{"octo/other", 0, "", false}, {"", 43, "", false}, {"", 42, "dev", true},
	} {
		if s, ok := cl.scope(tc.repo, tc.inst); s != tc.scope || ok != tc.ok {
			t.Errorf("%s %d: %q %v, want %q %v", tc.repo, tc.inst, s, ok, tc.scope, tc.ok)
		}
	}
}

// A listen member on loopback is accepted for one release and warned
// about, the warning saying where the address goes now.
func TestTheListenMemberIsDeprecated(t *testing.T) {
	rep := (&Extension{}).InspectConfig(json.RawMessage(`{"ingress": {"enabled": true, "listen": "127.0.0.1:9123", "secret": "gh-hook"}}`))
	if len(rep.Warnings) != 1 || rep.Warnings[0].Code != WarnIngressListenDeprecated || rep.Warnings[0].Pointer != "/ingress/listen" ||
		!strings.Contains(rep.Warnings[0].Remedy, "top-level ingress.listen") || strings.Contains(rep.Warnings[0].Remedy, "9123") {
		t.Fatalf("warnings %v", rep.Warnings)
	}
}
