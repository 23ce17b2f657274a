package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github/ghapi"
	"github.com/open-conduit/open-conduit/extensions/github/ghtest"
)

// secretHost is an IngressHost whose Secret answers from a map (an error
// value for a name resolves to that error).
type secretHost struct {
	*fakeHost
	mu      sync.Mutex
	secrets map[string]any
	asked   []string
}

func (h *secretHost) Secret(_ context.Context, name string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, name)
	switch v := h.secrets[name].(type) {
	case string:
		return v, nil
	case error:
		return "", v
	}
	return "", fmt.Errorf("%w: no such secret", extension.ErrNotFound)
}

func apiConfig(url, scope string) json.RawMessage {
	return json.RawMessage(`{"api": {"url": "` + url + `", "app": {"id": "gh-app-id", "private_key": "gh-app-key"}},
		"repositories": {"Octo-Org/Hello-World": {"scope": "` + scope + `"}, "octo-org/other": {"scope": "elsewhere"}}}`)
}

// run serves the extension's ingress (its listener off) with cfg and host
// until the test ends, and answers the extension's handlers by name.
func run(t *testing.T, ext *Extension, cfg json.RawMessage, host extension.IngressHost) (map[string]extension.Operation, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ext.Ingress().Serve(ctx, cfg, host) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	eventually(t, "the run attached", func() bool {
		ext.live.mu.Lock()
		defer ext.live.mu.Unlock()
		return ext.live.host != nil
	})
	ops := map[string]extension.Operation{}
	for _, op := range ext.Operations() {
		ops[op.Name] = op
	}
	return ops, stop
}

func code(err error) string {
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return fmt.Sprintf("not an OperationError: %v", err)
}

func TestOperationsCallGitHubAsTheApp(t *testing.T) {
	fake := ghtest.New(t, ghtest.Options{})
	ext := &Extension{Now: time.Now}
	cfg := apiConfig(fake.APIURL(), "ops")
	host := &secretHost{fakeHost: newFakeHost(), secrets: map[string]any{"gh-app-id": fmt.Sprint(fake.AppID()), "gh-app-key": fake.KeyPEM}}
	ops, stop := run(t, ext, cfg, host)
	auth := extension.Authority{Scope: "ops", Work: "wrk_1", Config: cfg}

	out, err := ops[ghapi.OpIssueComment].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo-org/hello-world","number":42,"body":"on it"}`))
	if err != nil || !strings.Contains(string(out), `"id"`) {
		t.Fatalf("comment: %s %v", out, err)
	}
	reqs := fake.Requests()
	var auths []string
	for _, r := range reqs {
		auths = append(auths, r.Method+" "+r.Path+" "+r.Auth)
	}
	want := []string{
		"GET /api/v3/repos/octo-org/hello-world/installation jwt",
		"POST /api/v3/app/installations/77/access_tokens jwt",
		"POST /api/v3/repos/octo-org/hello-world/issues/42/comments token octo-org/hello-world",
	}
	if !slices.Equal(auths, want) || !strings.Contains(reqs[1].Body, `"hello-world"`) || !strings.Contains(reqs[2].Body, "on it") {
		t.Fatalf("requests %q, want %q (%+v)", auths, want, reqs)
	}

	// A repository the scope does not claim, or a call of another scope.
	for _, c := range []struct {
		scope, repo string
	}{{"ops", "octo-org/other"}, {"elsewhere", "octo-org/hello-world"}, {"ops", "octo-org/unknown"}} {
		a := auth
		a.Scope = c.scope
		_, err := ops[ghapi.OpIssueComment].Handler(context.Background(), a, json.RawMessage(`{"repo":"`+c.repo+`","number":1,"body":"x"}`))
		if code(err) != ghapi.CodeRepoNotAllowed {
			t.Errorf("scope %s, repo %s: %v", c.scope, c.repo, err)
		}
	}
	if n := len(fake.Requests()); n != 3 {
		t.Fatalf("a refused call reached GitHub: %d requests", n)
	}

	// git.credential without a path: the scope's one repository.
	out, err = ops[ghapi.OpGitCredential].Handler(context.Background(), auth, json.RawMessage(`{"protocol":"http","host":"`+fake.Host()+`"}`))
	if err != nil || !strings.Contains(string(out), ghtest.TokenPrefix) {
		t.Fatalf("git credential: %v", err)
	}
	// The token is never logged.
	if logs := host.logs.String(); strings.Contains(logs, ghtest.TokenPrefix) || strings.Contains(logs, "PRIVATE KEY") {
		t.Fatalf("the logs carry a credential: %s", logs)
	}

	// Once the run ends the credentials are gone.
	stop()
	if _, err := ops[ghapi.OpIssueComment].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo-org/hello-world","number":42,"body":"x"}`)); code(err) != ghapi.CodeNotConfigured {
		t.Fatalf("after the run: %v", err)
	}
}

func TestCredentialsThatDoNotResolve(t *testing.T) {
	fake := ghtest.New(t, ghtest.Options{})
	cfg := apiConfig(fake.APIURL(), "ops")
	auth := extension.Authority{Scope: "ops", Config: cfg}
	in := json.RawMessage(`{"repo":"octo-org/hello-world","number":1,"body":"x"}`)
	for _, c := range []struct {
		name    string
		secrets map[string]any
		code    string
		message string
	}{
		{"unresolvable key", map[string]any{"gh-app-id": "4242", "gh-app-key": errors.New("keyring_unavailable")}, CodeCredentialsUnavailable, "app.private_key could not be resolved (keyring_unavailable)"},
		{"unknown id", map[string]any{"gh-app-key": fake.KeyPEM}, CodeCredentialsUnavailable, "app.id could not be resolved (unknown_secret)"},
		{"an error text that is not a code", map[string]any{"gh-app-id": errors.New("value s3cr3t leaked"), "gh-app-key": fake.KeyPEM}, CodeCredentialsUnavailable, "(secret_unavailable)"},
		{"id not a number", map[string]any{"gh-app-id": "forty-two", "gh-app-key": fake.KeyPEM}, CodeCredentialsInvalid, "numeric id"},
		{"key not PEM", map[string]any{"gh-app-id": "4242", "gh-app-key": "s3cr3t"}, CodeCredentialsInvalid, "RSA private key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ext := &Extension{Now: time.Now}
			host := &secretHost{fakeHost: newFakeHost(), secrets: c.secrets}
			ops, _ := run(t, ext, cfg, host)
			_, err := ops[ghapi.OpIssueComment].Handler(context.Background(), auth, in)
			var oe *extension.OperationError
			if !errors.As(err, &oe) || oe.Code != c.code || !strings.Contains(oe.Message, c.message) || strings.Contains(oe.Message, "s3cr3t") || strings.Contains(oe.Message, "gh-app") {
				t.Fatalf("%v, want %s %q", err, c.code, c.message)
			}
			// A failure is not kept: the next call resolves again.
			before := len(host.asked)
			_, _ = ops[ghapi.OpIssueComment].Handler(context.Background(), auth, in)
			if len(host.asked) == before {
				t.Fatal("the second call did not resolve the secrets again")
			}
		})
	}
}

func TestATokenCredential(t *testing.T) {
	ext := &Extension{Now: time.Now}
	cfg := json.RawMessage(`{"api": {"token": "gh-token"}, "repositories": {"octo-org/hello-world": {"scope": "ops"}}}`)
	host := &secretHost{fakeHost: newFakeHost(), secrets: map[string]any{"gh-token": "ghp_plain\n"}}
	ops, _ := run(t, ext, cfg, host)
	hs, err := ext.handlers(context.Background())
	if err != nil || len(hs) != len(ops)-len(waitKinds)-1 {
		t.Fatalf("handlers %d of %d operations: %v", len(hs), len(ops), err)
	}
	// Without a clock the operations are registered for their names only.
	bare := &Extension{}
	bops, _ := run(t, bare, cfg, host)
	_, err = bops[ghapi.OpIssueView].Handler(context.Background(), extension.Authority{Scope: "ops", Config: cfg}, json.RawMessage(`{"repo":"octo-org/hello-world","number":1}`))
	if code(err) != ghapi.CodeNotConfigured {
		t.Fatalf("without a clock: %v", err)
	}
}

func TestTranslatedWaits(t *testing.T) {
	ext := &Extension{}
	cfg := apiConfig("https://ghe.example.com/api/v3/", "ops")
	ops := map[string]extension.Operation{}
	for _, op := range ext.Operations() {
		ops[op.Name] = op
	}
	auth := extension.Authority{Scope: "ops", Config: cfg}
	for _, w := range waitKinds {
		op := ops[w.op]
		if op.Wait == nil || op.Handler != nil || op.Emit != nil {
			t.Fatalf("%s is not a translated wait", w.op)
		}
		plan, err := op.Wait(context.Background(), auth, json.RawMessage(`{"repo":"octo-org/hello-world","number":7}`))
		// The key is spelled as configured, which is how the ingress spells
		// its Events' keys (the repository's full_name).
		if err != nil || !slices.Equal(plan.Keys, []string{"Octo-Org/Hello-World#7"}) || !slices.Equal(plan.Types, w.types) || plan.Timeout != DefaultWaitTimeout {
			t.Fatalf("%s: %+v %v", w.op, plan, err)
		}
	}
	wait := ops[OpWaitChecks].Wait
	if plan, err := wait(context.Background(), auth, json.RawMessage(`{"repo":"octo-org/hello-world","number":7,"timeout":"90m"}`)); err != nil || plan.Timeout != 90*time.Minute ||
		plan.Types[0] != "github.check_suite.completed" || !strings.Contains(string(plan.Output), `"key":"Octo-Org/Hello-World#7"`) {
		t.Fatalf("a timeout: %+v %v", plan, err)
	}
	for in, want := range map[string]string{
		`{"repo":"octo-org/hello-world","number":7,"timeout":"721h"}`: ghapi.CodeInvalidInput,
		`{"repo":"octo-org/hello-world","number":7,"timeout":"soon"}`: ghapi.CodeInvalidInput,
		`{"repo":"octo-org/hello-world","number":0}`:                  ghapi.CodeInvalidInput,
		`{"repo":"octo-org/hello-world","number":7,"extra":1}`:        ghapi.CodeInvalidInput,
		`{"repo":"octo-org/other","number":7}`:                        ghapi.CodeRepoNotAllowed,
	} {
		if _, err := wait(context.Background(), auth, json.RawMessage(in)); code(err) != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}

func TestReportIsATranslatedEmission(t *testing.T) {
	var op extension.Operation
	for _, o := range (&Extension{}).Operations() {
		if o.Name == OpReport {
			op = o
		}
	}
	auth := extension.Authority{Scope: "ops", Config: apiConfig("", "ops")}
	em, err := op.Emit(context.Background(), auth, json.RawMessage(`{"repo":"octo-org/hello-world","number":42,"state":"done","summary":"PR opened","url":"https://x/pull/43"}`))
	if err != nil || em.Type != "github.report.done" || em.CorrelationKey != "Octo-Org/Hello-World#42" || !strings.Contains(string(em.Data), `"summary":"PR opened"`) {
		t.Fatalf("%+v %v", em, err)
	}
	em, err = op.Emit(context.Background(), auth, json.RawMessage(`{"repo":"octo-org/hello-world","state":"progress","summary":"cloned"}`))
	if err != nil || em.CorrelationKey != "" || strings.Contains(string(em.Data), "number") {
		t.Fatalf("without a number: %+v %v", em, err)
	}
	for in, want := range map[string]string{
		`{"repo":"octo-org/hello-world","state":"merged","summary":"x"}`: ghapi.CodeInvalidInput,
		`{"repo":"octo-org/hello-world","state":"done","summary":""}`:    ghapi.CodeInvalidInput,
		`{"repo":"octo-org/other","state":"done","summary":"x"}`:         ghapi.CodeRepoNotAllowed,
	} {
		if _, err := op.Emit(context.Background(), auth, json.RawMessage(in)); code(err) != want {
			t.Errorf("%s: %v, want %s", in, err, want)
		}
	}
}

func TestToolsetsAndPlaybooks(t *testing.T) {
	ext := &Extension{}
	names := map[string]bool{}
	for _, op := range ext.Operations() {
		names[op.Name] = true
	}
	sets := map[string][]string{}
	for _, ts := range ext.Toolsets() {
		if err := extension.CheckToolset(Name, ts); err != nil {
			t.Fatal(err)
		}
		for _, op := range ts.Operations {
			if !ghapi.InDefaultToolsets(op.Name) || (!names[op.Name] && !extension.IsBuiltin(op.Name)) || op.Since == "" {
				t.Errorf("%s holds %s (since %q)", ts.Name, op.Name, op.Since)
			}
		}
		sets[ts.Name] = ts.Names()
	}
	if len(sets) != 3 || !slices.Contains(sets[ToolsetAuthor], ghapi.OpGitCredential) || !slices.Contains(sets[ToolsetAuthor], ghapi.OpPRCreate) ||
		!slices.Contains(sets[ToolsetReviewer], ghapi.OpReview) || slices.Contains(sets[ToolsetReader], ghapi.OpIssueComment) {
		t.Fatalf("toolsets %v", sets)
	}
	role := map[string]string{PlaybookAuthor: ToolsetAuthor, PlaybookReviewer: ToolsetReviewer}
	for _, pb := range ext.Playbooks() {
		if err := extension.CheckPlaybook(pb); err != nil {
			t.Fatal(err)
		}
		ops, _ := extension.PlaybookOperations(pb.Markdown)
		for _, op := range ops {
			// A binding granted the role's toolset is granted all its
			// playbook uses: no grant warning.
			if !slices.Contains(sets[role[pb.Name]], op) {
				t.Errorf("playbook %s uses %s, which @%s lacks", pb.Name, op, role[pb.Name])
			}
		}
	}
}

func TestAPIConfigValidation(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want []string
	}{
		{`{"api": {"app": {"id": "gh-app-id", "private_key": "gh-app-key"}}}`, nil},
		{`{"api": {"token": "gh-token", "url": "https://ghe.example.com/api/v3/"}}`, nil},
		{`{"api": {"token": "gh-token", "url": "http://127.0.0.1:8080/api/v3/"}}`, nil},
		{`{"api": {}}`, []string{"/api missing_field"}},
		{`{"api": {"token": "gh-token", "app": {"id": "a", "private_key": "b"}}}`, []string{"/api invalid_value"}},
		{`{"api": {"app": {"id": "gh-app-id"}}}`, []string{"/api/app/private_key missing_field"}},
		{`{"api": {"token": "Bad_Name"}}`, []string{"/api/token invalid_value"}},
		{`{"api": {"token": "t", "url": "http://ghe.example.com/api/v3/"}}`, []string{"/api/url invalid_value"}},
		{`{"api": {"token": "t", "url": "https://user:pw@ghe.example.com/"}}`, []string{"/api/url invalid_value"}},
		{`{"api": {"token": "t", "key": "inline"}}`, []string{"/api/key unknown_field"}},
	} {
		if got := problems(t, c.raw); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.raw, got, c.want)
		}
	}
	rep := (&Extension{}).InspectConfig(json.RawMessage(`{"api": {"app": {"id": "gh-app-id", "private_key": "gh-app-key"}}}`))
	if !slices.Equal(rep.Secrets, []extension.ConfigReference{{Pointer: "/api/app/id", Name: "gh-app-id"}, {Pointer: "/api/app/private_key", Name: "gh-app-key"}}) {
		t.Fatalf("secrets %v", rep.Secrets)
	}
}
