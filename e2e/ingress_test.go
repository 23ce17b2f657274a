package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The GitHub and Slack ingresses share the daemon's one webhook listener:
// with both on, a signed GitHub delivery and a signed Slack request are
// accepted on one port, each at its own path, and each ingress still
// refuses what its signature does not cover; with neither on, nothing
// listens there.

func sharedIngressConfig(port int, github, slack bool) []byte {
	cfg := map[string]any{
		"version": 1,
		"secrets": map[string]any{"gh-hook": "env:OC_E2E_GH_HOOK", "slack-signing": "env:OC_E2E_SLACK_SIGNING"},
		"ingress": map[string]any{"listen": "127.0.0.1:" + strconv.Itoa(port)},
		"scopes":  map[string]any{"ops": map[string]any{}},
		"extensions": map[string]any{
			"github": map[string]any{"config": map[string]any{
				"ingress":      map[string]any{"enabled": github, "secret": "gh-hook"},
				"repositories": map[string]any{"octo-org/hello-world": map[string]any{"scope": "ops"}},
			}},
			"slack": map[string]any{"config": map[string]any{
				"ingress":  map[string]any{"enabled": slack, "signing_secret": "slack-signing"},
				"channels": map[string]any{"C0OPS": map[string]any{"scope": "ops"}},
			}},
		},
	}
	b, _ := json.Marshal(cfg)
	return b
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func TestGitHubAndSlackShareOneListener(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	writeFile(t, filepath.Join(e.state, "config.json"), sharedIngressConfig(port, true, true))
	d := e.start("OC_E2E_GH_HOOK="+ghSecret, "OC_E2E_SLACK_SIGNING="+slackSigning)
	until(t, "the webhook listener listening", func() bool { return listening(addr) })

	// GitHub's path: a wrong signature is refused, a signed delivery is
	// one Event.
	bad := signed("issues", "e2e-shared-bad", issueOpened("octo-org/hello-world", 7))
	bad.signature = "sha256=" + strings.Repeat("0", 64)
	if code, body := deliver(t, "http://"+addr+"/github/webhook", bad); code != http.StatusUnauthorized {
		t.Fatalf("a wrong GitHub signature: %d %s", code, body)
	}
	if code, body := deliver(t, "http://"+addr+"/github/webhook", signed("issues", "e2e-shared-1", issueOpened("octo-org/hello-world", 7))); code != http.StatusAccepted || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("a signed GitHub delivery: %d %s", code, body)
	}

	// Slack's path on the same port: a GitHub signature is no Slack
	// signature, and a signed request is one Event.
	mention := slackEvent("Ev0E2ESHARED", map[string]any{"type": "app_mention", "channel": "C0OPS", "user": "U0ALICE", "text": "<@U0FAKEBOT> hi", "ts": "1712345678.000100"})
	wrong := slackSigned(time.Now(), mention)
	wrong.sig = "v0=" + strings.Repeat("0", 64)
	if code, body := wrong.post(t, "http://"+addr+"/slack/events"); code != http.StatusUnauthorized || !strings.Contains(body, "signature_mismatch") {
		t.Fatalf("a wrong Slack signature: %d %s", code, body)
	}
	if code, body := slackSigned(time.Now(), mention).post(t, "http://"+addr+"/slack/events"); code != http.StatusOK || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("a signed Slack request: %d %s", code, body)
	}
	// A path no ingress serves.
	if code, body := deliver(t, "http://"+addr+"/other/webhook", signed("issues", "e2e-shared-2", issueOpened("octo-org/hello-world", 8))); code != http.StatusNotFound {
		t.Fatalf("another path: %d %s", code, body)
	}
	gh, sl := e.githubEvents(), e.slackEvents()
	if len(gh) != 1 || gh[0].Scope != "ops" || gh[0].Type != "github.issues.opened" || len(sl) != 1 || sl[0].Scope != "ops" || sl[0].Type != "slack.app_mention" {
		t.Fatalf("events: github %+v, slack %+v", gh, sl)
	}
	// The daemon logged the listener's address once.
	if n := strings.Count(d.logs.String(), `"msg":"webhook listener listening"`); n != 1 {
		t.Fatalf("the listener's address was logged %d times:\n%s", n, d.logs)
	}

	// Slack alone keeps the listener; neither stops it.
	for gen, c := range []struct{ github, slack, listens bool }{{false, true, true}, {false, false, false}} {
		var applied struct {
			Generation int64 `json:"generation"`
		}
		e.must("POST", "/v1/config/apply", map[string]any{"config": json.RawMessage(sharedIngressConfig(port, c.github, c.slack)), "expected_generation": gen + 1}, key(), &applied)
		if applied.Generation != int64(gen+2) {
			t.Fatalf("apply: generation %d", applied.Generation)
		}
		if c.listens {
			code, body := deliver(t, "http://"+addr+"/github/webhook", signed("issues", "e2e-shared-3", issueOpened("octo-org/hello-world", 9)))
			if code != http.StatusNotFound {
				t.Fatalf("GitHub's path with its ingress off: %d %s", code, body)
			}
			if code, body := slackSigned(time.Now(), mention).post(t, "http://"+addr+"/slack/events"); code != http.StatusOK || !strings.Contains(body, `"replayed":true`) {
				t.Fatalf("Slack's path after the apply: %d %s", code, body)
			}
			continue
		}
		until(t, "the webhook listener gone", func() bool { return !listening(addr) })
	}
	if strings.Contains(d.logs.String(), ghSecret) || strings.Contains(d.logs.String(), slackSigning) {
		t.Fatal("the daemon's log carries a signing secret")
	}
}

// A daemon whose configuration turns no ingress on opens no listener,
// even with the top-level ingress member naming an address.
func TestNoIngressNoListener(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	writeFile(t, filepath.Join(e.state, "config.json"), sharedIngressConfig(port, false, false))
	d := e.start("OC_E2E_GH_HOOK="+ghSecret, "OC_E2E_SLACK_SIGNING="+slackSigning)
	if listening("127.0.0.1:" + strconv.Itoa(port)) {
		t.Fatal("a daemon with no ingress on listens for webhooks")
	}
	if strings.Contains(d.logs.String(), "webhook listener") {
		t.Fatalf("a daemon with no ingress on logged a webhook listener:\n%s", d.logs)
	}
}
