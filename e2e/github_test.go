package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
)

// The GitHub extension's webhook ingress end to end: the real daemon
// listens on a real loopback TCP port; a delivery signed with the right
// secret starts a Work through a route, a wrong signature is 401 and
// leaves no Event, a redelivery is one Event, a repository no scope claims
// is 202 with nothing accepted, and the webhook secret is nowhere.

const ghSecret = "whsec-e2e-canary-8c41b7"

// freePort finds a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (e *env) githubConfig(port int, mark string) []byte {
	e.t.Helper()
	cfg := map[string]any{
		"version": 1,
		"secrets": map[string]any{"gh-hook": "env:OC_E2E_GH_HOOK"},
		"scopes": map[string]any{
			"ops": map[string]any{
				"authorization": map[string]any{"operations": []string{"read_context", "declare_outcome"}, "reads": []string{"work", "events"}},
				"bindings": map[string]any{"triage": map[string]any{
					"executor":   "shell",
					"config":     map[string]any{"command": []string{"sh", "-c", `os call read_context >> "$MARK"`}, "env": map[string]any{"MARK": mark}},
					"operations": []string{"read_context", "declare_outcome"},
				}},
				"routes": []any{map[string]any{"id": "issues", "match": map[string]any{"type": "github.issues.*", "source": "github.webhook"}, "binding": "triage"}},
			},
			"other": map[string]any{},
		},
		"ingress": map[string]any{"listen": "127.0.0.1:" + strconv.Itoa(port)},
		"extensions": map[string]any{"github": map[string]any{"config": map[string]any{
			"ingress":      map[string]any{"enabled": true, "secret": "gh-hook"},
			"repositories": map[string]any{"octo-org/hello-world": map[string]any{"scope": "ops"}},
		}}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

type ghDelivery struct {
	event, id, signature string
	body                 []byte
}

func signed(event, id string, body []byte) ghDelivery {
	mac := hmac.New(sha256.New, []byte(ghSecret))
	mac.Write(body)
	return ghDelivery{event: event, id: id, body: body, signature: "sha256=" + hex.EncodeToString(mac.Sum(nil))}
}

// deliver posts a delivery as GitHub does and returns its status and body.
func deliver(t *testing.T, hookURL string, d ghDelivery) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, hookURL, bytes.NewReader(d.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/e2e")
	req.Header.Set("X-GitHub-Event", d.event)
	req.Header.Set("X-GitHub-Delivery", d.id)
	if d.signature != "" {
		req.Header.Set("X-Hub-Signature-256", d.signature)
	}
	// No connection is kept: the suite leaves no goroutine behind.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: guard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func issueOpened(repo string, number int) []byte {
	b, _ := json.Marshal(map[string]any{
		"action":     "opened",
		"issue":      map[string]any{"number": number, "title": "Crash on empty config", "state": "open", "user": map[string]any{"login": "mona"}, "html_url": "https://github.com/" + repo + "/issues/" + strconv.Itoa(number)},
		"repository": map[string]any{"full_name": repo, "name": strings.SplitN(repo, "/", 2)[1]},
		"sender":     map[string]any{"login": "mona"},
	})
	return b
}

func (e *env) githubEvents() []eventRecord {
	e.t.Helper()
	var out []eventRecord
	for _, id := range e.eventIDs() {
		if ev := e.event(id); ev.Source == "github.webhook" {
			out = append(out, ev)
		}
	}
	return out
}

func TestGitHubWebhookIngress(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	mark := filepath.Join(e.root, "mark")
	writeFile(t, filepath.Join(e.state, "config.json"), e.githubConfig(port, mark))
	e.start("OC_E2E_GH_HOOK=" + ghSecret)
	hookURL := "http://127.0.0.1:" + strconv.Itoa(port) + "/github/webhook"
	var responses []string
	until(t, "the ingress listening", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// A wrong signature: 401, nothing accepted.
	bad := signed("issues", "e2e-delivery-bad", issueOpened("octo-org/hello-world", 41))
	bad.signature = "sha256=" + strings.Repeat("0", 64)
	code, body := deliver(t, hookURL, bad)
	responses = append(responses, body)
	if code != http.StatusUnauthorized {
		t.Fatalf("a wrong signature: %d %s", code, body)
	}
	missing := bad
	missing.signature = ""
	if code, body = deliver(t, hookURL, missing); code != http.StatusUnauthorized {
		t.Fatalf("no signature: %d %s", code, body)
	}
	if evs := e.githubEvents(); len(evs) != 0 {
		t.Fatalf("a refused delivery left events: %+v", evs)
	}

	// A repository no scope claims: 202, nothing accepted.
	code, body = deliver(t, hookURL, signed("issues", "e2e-delivery-unclaimed", issueOpened("octo-org/elsewhere", 1)))
	responses = append(responses, body)
	if code != http.StatusAccepted || !strings.Contains(body, `"unclaimed"`) {
		t.Fatalf("an unclaimed repository: %d %s", code, body)
	}
	if evs := e.githubEvents(); len(evs) != 0 {
		t.Fatalf("an unclaimed delivery left events: %+v", evs)
	}

	// The right signature: one Event, which starts a Work through the
	// route; its redelivery is the same Event.
	good := signed("issues", "e2e-delivery-1", issueOpened("octo-org/hello-world", 42))
	code, body = deliver(t, hookURL, good)
	responses = append(responses, body)
	if code != http.StatusAccepted || !strings.Contains(body, `"accepted"`) {
		t.Fatalf("a signed delivery: %d %s", code, body)
	}
	code, body = deliver(t, hookURL, good)
	responses = append(responses, body)
	if code != http.StatusAccepted || !strings.Contains(body, `"replayed":true`) {
		t.Fatalf("a redelivery: %d %s", code, body)
	}
	evs := e.githubEvents()
	if len(evs) != 1 {
		t.Fatalf("%d events from github, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Type != "github.issues.opened" || ev.Scope != "ops" || ev.CorrelationKey != "octo-org/hello-world#42" || ev.Actor != "" ||
		!strings.Contains(string(ev.Data), `"number":42`) || strings.Contains(string(ev.Data), "e2e-delivery") {
		t.Fatalf("event %+v", ev)
	}
	var works page[work]
	e.must("GET", "/v1/work?scope=ops", nil, nil, &works)
	if len(works.Items) != 1 {
		t.Fatalf("work %+v, want the one the route started", works.Items)
	}
	w := e.waitWork(works.Items[0].ID, "terminal", func(w work) bool { return terminal(w.State) })
	if w.State != "succeeded" {
		t.Fatalf("the Work ended %s (%s)\n%s", w.State, w.OutcomeMessage, e.allLogs())
	}
	if b, _ := os.ReadFile(mark); !strings.Contains(string(b), "octo-org/hello-world#42") {
		t.Fatalf("the job did not see its input event: %s", b)
	}

	// Route trace admits the github source in its own scope only.
	trace := func(scope string) (*client.Response, error) {
		return e.do("POST", "/v1/scopes/"+scope+"/route/trace", map[string]any{"type": "github.issues.opened", "source": "github.webhook", "correlation_key": "octo-org/hello-world#43"}, nil, nil)
	}
	resp, err := trace("ops")
	if err != nil || !strings.Contains(string(resp.Body), `"effect":"start"`) {
		t.Fatalf("trace in ops: %v %s", err, bodyOf(resp))
	}
	responses = append(responses, string(resp.Body))
	if _, err := trace("other"); !client.IsInvalidRequest(err) {
		t.Fatalf("trace in a scope the ingress sends nothing to: %v", err)
	}

	// The ingress offers samples in its scope, and one traces by name
	// through the real CLI as the delivery it stands for would route.
	samples := string(e.must("GET", "/v1/scopes/ops/route/samples", nil, nil, nil).Body)
	if !strings.Contains(samples, `"github-issue-opened"`) || !strings.Contains(samples, `"github.webhook"`) {
		t.Fatalf("the ingress's samples in ops: %s", samples)
	}
	if code, out, errOut := e.cli("route", "--trace", "github-issue-opened", "--scope", "ops", "--json"); code != 0 || !strings.Contains(out, `"effect":"start"`) {
		t.Fatalf("route --trace of the sample: %d %s %s", code, out, errOut)
	}

	// The webhook secret appears in no response, log line or stored file,
	// and a refused delivery's header in no log line.
	logs := e.noSecrets(map[string]string{"the webhook secret": ghSecret, "a refused delivery's header": "e2e-delivery-bad"}, responses,
		"/v1/config", "/v1/events", "/v1/work", "/v1/scopes/ops", "/v1/toolbelt/calls")
	if !strings.Contains(logs, "signature_mismatch") || !strings.Contains(logs, "unclaimed") {
		t.Fatalf("the refusal and the drop are not logged with their reasons:\n%s", logs)
	}
}

func bodyOf(resp *client.Response) string {
	if resp == nil {
		return ""
	}
	return string(resp.Body)
}

// The offline config check knows the GitHub extension: a listener beyond
// loopback is refused unless allowed, and then warned about; a webhook
// secret no secret names and a scope no scope has are unknown references.
func TestGitHubIngressConfigThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	edit := func(name string, f func(gh map[string]any, doc map[string]any)) string {
		var doc map[string]any
		if err := json.Unmarshal(e.githubConfig(8787, filepath.Join(e.root, "mark")), &doc); err != nil {
			t.Fatal(err)
		}
		f(doc["extensions"].(map[string]any)["github"].(map[string]any)["config"].(map[string]any), doc)
		b, _ := json.Marshal(doc)
		return writeFile(t, filepath.Join(e.root, name), b)
	}
	var checked struct {
		Valid       bool `json:"valid"`
		Diagnostics []struct {
			Pointer string `json:"pointer"`
			Code    string `json:"code"`
		} `json:"diagnostics"`
		Warnings []struct {
			Pointer string `json:"pointer"`
			Code    string `json:"code"`
		} `json:"warnings"`
	}
	wide := edit("wide.json", func(gh, _ map[string]any) {
		gh["ingress"].(map[string]any)["listen"] = "0.0.0.0:8787"
		gh["ingress"].(map[string]any)["allow_non_loopback"] = true
	})
	e.cliJSON(&checked, "config", "check", wide)
	if !checked.Valid || !slices.ContainsFunc(checked.Warnings, func(w struct {
		Pointer string `json:"pointer"`
		Code    string `json:"code"`
	}) bool {
		return w.Pointer == "/extensions/github/config/ingress/listen" && w.Code == "github_ingress_not_loopback"
	}) {
		t.Fatalf("a listener beyond loopback: %+v", checked)
	}
	diagnostics := func(file string) []string {
		t.Helper()
		code, stdout, _ := e.cli("config", "check", file, "--json")
		if code == 0 {
			t.Fatalf("config check accepted %s", stdout)
		}
		if strings.Contains(stdout, "0.0.0.0") || strings.Contains(stdout, "nowhere") || strings.Contains(stdout, "nope") {
			t.Fatalf("config check quotes a configured value: %s", stdout)
		}
		checked.Diagnostics = nil
		if err := json.Unmarshal([]byte(stdout), &checked); err != nil {
			t.Fatalf("config check printed %q: %v", stdout, err)
		}
		var got []string
		for _, d := range checked.Diagnostics {
			got = append(got, d.Pointer+" "+d.Code)
		}
		return got
	}
	refused := edit("refused.json", func(gh, _ map[string]any) {
		gh["ingress"].(map[string]any)["listen"] = "0.0.0.0:8787"
	})
	if got, want := diagnostics(refused), []string{"/extensions/github/config/ingress/listen invalid_value"}; !slices.Equal(got, want) {
		t.Fatalf("diagnostics %q, want %q", got, want)
	}
	dangling := edit("dangling.json", func(gh, _ map[string]any) {
		gh["ingress"].(map[string]any)["secret"] = "nope"
		gh["repositories"].(map[string]any)["octo-org/hello-world"] = map[string]any{"scope": "nowhere"}
	})
	want := []string{
		"/extensions/github/config/ingress/secret unknown_reference",
		// The repository's name is a configured value: the pointer stops
		// before it.
		"/extensions/github/config/repositories unknown_reference",
	}
	if got := diagnostics(dangling); !slices.Equal(got, want) {
		t.Fatalf("diagnostics %q, want %q", got, want)
	}
}
