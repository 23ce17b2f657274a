package ghapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/osclient"
)

var (
	keyOnce         sync.Once
	testKey, altKey *rsa.PrivateKey
)

func keys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	keyOnce.Do(func() {
		var err error
		if testKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if altKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return testKey, altKey
}

func pemOf(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

const appID = 4242

// env is a fake GitHub, an App on it and the operations built on that App.
type env struct {
	t     *testing.T
	clock *fakeClock
	fake  *fakeGitHub
	app   *App
	logs  *bytes.Buffer
	ops   map[string]extension.Operation
	errs  []string // every error text a call answered
	outs  []string // every result but git.credential's
}

func newEnv(t *testing.T) *env {
	key, _ := keys(t)
	e := &env{t: t, clock: &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, logs: &bytes.Buffer{}}
	e.fake = newFake(t, e.clock, fmt.Sprint(appID), &key.PublicKey)
	app, err := NewApp(AppOptions{AppID: appID, PrivateKey: pemOf(key), BaseURL: e.fake.url(), Now: e.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.app = app
	e.ops = e.build(app)
	return e
}

func (e *env) build(c Credentials) map[string]extension.Operation {
	ops, err := Operations(Options{Credentials: c, BaseURL: e.fake.url(), Now: e.clock.Now,
		Allow: func(auth extension.Authority, repo string) bool {
			return auth.Scope == "ops" && (repo == "octo/hello" || repo == "octo/other")
		},
		WorkRepository: func(auth extension.Authority) (string, bool) { return "octo/hello", auth.Work == "wrk_1" },
	})
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]extension.Operation{}
	for _, op := range ops {
		m[op.Name] = op
	}
	return m
}

var auth = extension.Authority{Scope: "ops", Work: "wrk_1", Execution: "exe_1", Binding: "b"}

// call runs op and records its result or error text for the canary search.
func (e *env) call(op string, input string) (json.RawMessage, error) {
	e.t.Helper()
	o, ok := e.ops[op]
	if !ok {
		e.t.Fatalf("no operation %s", op)
	}
	out, err := o.Handler(context.Background(), auth, json.RawMessage(input))
	if err != nil {
		e.errs = append(e.errs, err.Error())
	} else if op != OpGitCredential {
		e.outs = append(e.outs, string(out))
	}
	return out, err
}

func (e *env) ok(op, input string) map[string]any {
	e.t.Helper()
	out, err := e.call(op, input)
	if err != nil {
		e.t.Fatalf("%s: %v", op, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		e.t.Fatalf("%s: result %s: %v", op, out, err)
	}
	return m
}

func codeOf(err error) string {
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	if err == nil {
		return ""
	}
	return "not an OperationError: " + err.Error()
}

// last answers the fake's last request that is not the App's own.
func (e *env) apiRequests() []seen {
	var out []seen
	for _, s := range e.fake.seen() {
		if !strings.HasPrefix(s.Path, "/app/") && !strings.HasSuffix(s.Path, "/installation") {
			out = append(out, s)
		}
	}
	return out
}

func TestAppMintsCachesAndRefreshesInstallationTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok, err := e.app.Token(ctx, "octo/hello")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Reveal() != tokenPrefix+"001" || !tok.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("token %q expires %v", tok.Reveal(), tok.ExpiresAt)
	}
	req := e.fake.seen()
	if len(req) != 2 || req[0].Method != "GET" || req[0].Path != "/repos/octo/hello/installation" ||
		req[1].Method != "POST" || req[1].Path != "/app/installations/77/access_tokens" {
		t.Fatalf("requests %+v", req)
	}
	for _, r := range req {
		if !strings.HasPrefix(r.Auth, "Bearer ey") { // a JWT, which the fake verified
			t.Fatalf("%s: Authorization is not the App's JWT", r.Path)
		}
	}
	var body map[string][]string
	if err := json.Unmarshal([]byte(req[1].Body), &body); err != nil || len(body["repositories"]) != 1 || body["repositories"][0] != "hello" {
		t.Fatalf("token request narrowed to %s", req[1].Body)
	}

	// Cached: no request until Margin before the expiry.
	e.fake.reset()
	e.clock.Advance(time.Hour - DefaultMargin - time.Second)
	if again, err := e.app.Token(ctx, "octo/hello"); err != nil || again.Reveal() != tok.Reveal() {
		t.Fatalf("cached token: %v", err)
	}
	if n := len(e.fake.seen()); n != 0 {
		t.Fatalf("a cached token sent %d requests", n)
	}
	// Another repository is its own token.
	if other, err := e.app.Token(ctx, "octo/other"); err != nil || other.Reveal() == tok.Reveal() {
		t.Fatalf("other repository: %v", err)
	}
	// Within the margin: minted again.
	e.fake.reset()
	e.clock.Advance(2 * time.Second)
	fresh, err := e.app.Token(ctx, "octo/hello")
	if err != nil || fresh.Reveal() == tok.Reveal() || len(e.fake.seen()) != 2 {
		t.Fatalf("refresh: %v, %d requests", err, len(e.fake.seen()))
	}
	// The old token, past its expiry, is refused by GitHub; the new one works.
	e.clock.Advance(DefaultMargin)
	if e.fake.tokenOK(tok.Reveal(), "/repos/octo/hello/issues/1") || !e.fake.tokenOK(fresh.Reveal(), "/repos/octo/hello/issues/1") {
		t.Fatal("the fake's expiry check is broken")
	}
	if !strings.Contains(e.logs.String(), "installation token minted") {
		t.Fatalf("no mint logged: %s", e.logs)
	}
}

func TestOperationsAgainstFakeGitHub(t *testing.T) {
	e := newEnv(t)
	f := e.fake
	f.route("GET /repos/octo/hello/issues/7", func(seen) reply {
		return reply{status: 200, body: map[string]any{"number": 7, "title": "Bug", "state": "open", "body": "It breaks", "user": map[string]any{"login": "alice"},
			"labels": []any{map[string]any{"name": "bug"}}, "assignees": []any{map[string]any{"login": "bob"}}, "html_url": "https://github.example/octo/hello/issues/7",
			"created_at": "2026-02-01T10:00:00Z"}}
	})
	f.route("GET /repos/octo/hello/issues/7/comments", func(s seen) reply {
		if strings.Contains(s.Query, "page=2") {
			return reply{status: 200, body: []any{map[string]any{"id": 2, "body": "second", "user": map[string]any{"login": "carol"}}}}
		}
		return reply{status: 200, header: map[string]string{"Link": `<` + f.srv.URL + `/repos/octo/hello/issues/7/comments?page=2&per_page=100>; rel="next"`},
			body: []any{map[string]any{"id": 1, "body": "first", "user": map[string]any{"login": "bob"}}}}
	})
	v := e.ok(OpIssueView, `{"repo":"Octo/Hello","number":7}`)
	if v["kind"] != "issue" || v["title"] != "Bug" || v["author"] != "alice" || fmt.Sprint(v["labels"]) != "[bug]" || fmt.Sprint(v["assignees"]) != "[bob]" ||
		len(v["comments"].([]any)) != 2 || v["comments_truncated"] != false || v["created_at"] != "2026-02-01T10:00:00Z" || v["pull_request"] != nil {
		t.Fatalf("issue.view %v", v)
	}

	// A pull request: its reviews and the check runs of its head too.
	f.route("GET /repos/octo/hello/issues/8", func(seen) reply {
		return reply{status: 200, body: map[string]any{"number": 8, "title": "Fix", "state": "open", "pull_request": map[string]any{"url": "x"}}}
	})
	f.route("GET /repos/octo/hello/issues/8/comments", func(seen) reply { return reply{status: 200, body: []any{}} })
	f.route("GET /repos/octo/hello/pulls/8", func(seen) reply {
		return reply{status: 200, body: map[string]any{"number": 8, "head": map[string]any{"ref": "fix", "sha": "abc123"}, "base": map[string]any{"ref": "main", "sha": "def"},
			"mergeable": true, "requested_reviewers": []any{map[string]any{"login": "dave"}}}}
	})
	f.route("GET /repos/octo/hello/pulls/8/reviews", func(seen) reply {
		return reply{status: 200, body: []any{map[string]any{"id": 5, "state": "APPROVED", "user": map[string]any{"login": "erin"}, "commit_id": "abc123"}}}
	})
	f.route("GET /repos/octo/hello/commits/abc123/check-runs", func(seen) reply {
		return reply{status: 200, body: map[string]any{"total_count": 1, "check_runs": []any{map[string]any{"id": 99, "name": "ci", "status": "completed", "conclusion": "success", "head_sha": "abc123"}}}}
	})
	v = e.ok(OpIssueView, `{"repo":"octo/hello","number":8}`)
	pr, _ := v["pull_request"].(map[string]any)
	if v["kind"] != "pull_request" || pr == nil || fmt.Sprint(pr["head"]) != "map[ref:fix sha:abc123]" || len(pr["reviews"].([]any)) != 1 ||
		pr["checks_total"] != float64(1) || fmt.Sprint(pr["requested_reviewers"]) != "[dave]" || pr["mergeable"] != true {
		t.Fatalf("issue.view of a PR %v", v)
	}

	// Writes: method, path and the JSON body GitHub gets.
	writes := []struct {
		op, input, route string
		answer           any
		wantBody         string
		check            func(map[string]any) bool
	}{
		{OpIssueComment, `{"repo":"octo/hello","number":7,"body":"On it."}`, "POST /repos/octo/hello/issues/7/comments",
			map[string]any{"id": 11, "html_url": "u"}, `{"body":"On it."}`, func(m map[string]any) bool { return m["id"] == float64(11) }},
		{OpIssueEdit, `{"repo":"octo/hello","number":7,"title":"Bug!","labels":[],"assignees":["bob","carol"]}`, "PATCH /repos/octo/hello/issues/7",
			map[string]any{"number": 7, "title": "Bug!"}, `{"assignees":["bob","carol"],"labels":[],"title":"Bug!"}`, func(m map[string]any) bool { return m["title"] == "Bug!" }},
		{OpPRCreate, `{"repo":"octo/hello","title":"Fix bug","head":"fix","base":"main","body":"Fixes #7","draft":true}`, "POST /repos/octo/hello/pulls",
			map[string]any{"number": 9, "html_url": "u", "head": map[string]any{"ref": "fix"}, "base": map[string]any{"ref": "main"}, "draft": true},
			`{"base":"main","body":"Fixes #7","draft":true,"head":"fix","title":"Fix bug"}`, func(m map[string]any) bool { return m["number"] == float64(9) && m["draft"] == true }},
		{OpReviewRequest, `{"repo":"octo/hello","number":9,"reviewers":["erin"],"team_reviewers":["core"]}`, "POST /repos/octo/hello/pulls/9/requested_reviewers",
			map[string]any{"number": 9, "requested_reviewers": []any{map[string]any{"login": "erin"}}, "requested_teams": []any{map[string]any{"slug": "core"}}},
			`{"reviewers":["erin"],"team_reviewers":["core"]}`, func(m map[string]any) bool { return fmt.Sprint(m["requested_teams"]) == "[core]" }},
		{OpReview, `{"repo":"octo/hello","number":9,"event":"request_changes","body":"Add a test.","commit_id":"abc123"}`, "POST /repos/octo/hello/pulls/9/reviews",
			map[string]any{"id": 21, "state": "CHANGES_REQUESTED"}, `{"body":"Add a test.","commit_id":"abc123","event":"REQUEST_CHANGES"}`,
			func(m map[string]any) bool { return m["state"] == "CHANGES_REQUESTED" }},
		{OpPRMerge, `{"repo":"octo/hello","number":9,"method":"squash","sha":"abc123"}`, "PUT /repos/octo/hello/pulls/9/merge",
			map[string]any{"merged": true, "sha": "fff"}, `{"merge_method":"squash","sha":"abc123"}`, func(m map[string]any) bool { return m["merged"] == true && m["sha"] == "fff" }},
	}
	for _, w := range writes {
		f.route(w.route, func(seen) reply { return reply{status: 200, body: w.answer} })
		f.reset()
		m := e.ok(w.op, w.input)
		if !w.check(m) {
			t.Errorf("%s: result %v", w.op, m)
		}
		reqs := e.apiRequests()
		if len(reqs) != 1 || reqs[0].Method+" "+reqs[0].Path != w.route {
			t.Fatalf("%s: requests %+v", w.op, reqs)
		}
		if got := canonical(t, reqs[0].Body); got != canonical(t, w.wantBody) {
			t.Errorf("%s: body %s, want %s", w.op, got, w.wantBody)
		}
		if !strings.HasPrefix(reqs[0].Auth, "Bearer "+tokenPrefix) {
			t.Errorf("%s: not the installation token", w.op)
		}
	}

	// Files.
	f.route("GET /repos/octo/hello/contents/docs/a.md", func(s seen) reply {
		if s.Query != "ref=main" {
			t.Errorf("contents query %q", s.Query)
		}
		return reply{status: 200, body: map[string]any{"type": "file", "path": "docs/a.md", "sha": "s1", "size": 5, "encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte("hello"))}}
	})
	v = e.ok(OpRepoFile, `{"repo":"octo/hello","path":"docs/a.md","ref":"main"}`)
	if v["content"] != "hello" || v["encoding"] != "utf-8" || v["sha"] != "s1" || v["size"] != float64(5) {
		t.Fatalf("repo.file %v", v)
	}
	f.route("GET /repos/octo/hello/contents/bin", func(seen) reply {
		return reply{status: 200, body: map[string]any{"type": "file", "path": "bin", "size": 2, "encoding": "base64", "content": base64.StdEncoding.EncodeToString([]byte{0xff, 0})}}
	})
	if v = e.ok(OpRepoFile, `{"repo":"octo/hello","path":"bin"}`); v["encoding"] != "base64" || v["content"] != "/wA=" {
		t.Fatalf("binary file %v", v)
	}
	f.route("GET /repos/octo/hello/contents/big", func(seen) reply {
		return reply{status: 200, body: map[string]any{"type": "file", "path": "big", "size": 300000, "encoding": "base64", "content": ""}}
	})
	if _, err := e.call(OpRepoFile, `{"repo":"octo/hello","path":"big"}`); codeOf(err) != CodeFileTooLarge {
		t.Fatalf("big file: %v", err)
	}
	f.route("GET /repos/octo/hello/contents/docs", func(seen) reply {
		return reply{status: 200, body: []any{map[string]any{"type": "file", "path": "docs/a.md"}}}
	})
	if _, err := e.call(OpRepoFile, `{"repo":"octo/hello","path":"docs"}`); codeOf(err) != CodeNotAFile {
		t.Fatalf("directory: %v", err)
	}

	// Checks: by ref, by pull request (its head), one run.
	f.reset()
	v = e.ok(OpChecksList, `{"repo":"octo/hello","number":8}`)
	if v["ref"] != "abc123" || v["total"] != float64(1) || len(v["check_runs"].([]any)) != 1 {
		t.Fatalf("checks.list %v", v)
	}
	if r := e.apiRequests(); len(r) != 2 || r[1].Path != "/repos/octo/hello/commits/abc123/check-runs" || !strings.Contains(r[1].Query, "per_page=100") {
		t.Fatalf("checks.list requests %+v", r)
	}
	f.route("GET /repos/octo/hello/check-runs/99", func(seen) reply {
		return reply{status: 200, body: map[string]any{"id": 99, "name": "ci", "status": "completed", "conclusion": "failure",
			"output": map[string]any{"title": "2 failed", "summary": "sum", "text": strings.Repeat("x", MaxCheckText+10)}}}
	})
	v = e.ok(OpChecksView, `{"repo":"octo/hello","id":99}`)
	out, _ := v["output"].(map[string]any)
	if v["conclusion"] != "failure" || out == nil || out["title"] != "2 failed" || out["text_truncated"] != true || len(out["text"].(string)) != MaxCheckText {
		t.Fatalf("checks.view %v", v)
	}
}

func canonical(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %s", s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestInputsAndScopeAreCheckedBeforeGitHub(t *testing.T) {
	e := newEnv(t)
	cases := []struct{ op, input, code string }{
		{OpIssueView, `{"repo":"octo/hello","number":1,"extra":1}`, CodeInvalidInput},
		{OpIssueView, `{"repo":"octo","number":1}`, CodeInvalidInput},
		{OpIssueView, `{"repo":"octo/hello/x","number":1}`, CodeInvalidInput},
		{OpIssueView, `{"repo":"octo/hello","number":0}`, CodeInvalidInput},
		{OpIssueView, `{"repo":"octo/hello","number":"1"}`, CodeInvalidInput},
		{OpIssueComment, `{"repo":"octo/hello","number":1,"body":" "}`, CodeInvalidInput},
		{OpIssueEdit, `{"repo":"octo/hello","number":1}`, CodeInvalidInput},
		{OpReview, `{"repo":"octo/hello","number":1,"event":"comment"}`, CodeInvalidInput},
		{OpReview, `{"repo":"octo/hello","number":1,"event":"APPROVE"}`, CodeInvalidInput},
		{OpRepoFile, `{"repo":"octo/hello","path":"../x"}`, CodeInvalidInput},
		{OpRepoFile, `{"repo":"octo/hello","path":"a","max_bytes":2000000}`, CodeInvalidInput},
		{OpChecksList, `{"repo":"octo/hello"}`, CodeInvalidInput},
		{OpPRMerge, `{"repo":"octo/hello","number":1,"method":"fast-forward"}`, CodeInvalidInput},
		{OpIssueView, `{"repo":"someone/else","number":1}`, CodeRepoNotAllowed},
		{OpPRMerge, `{"repo":"octo/secret","number":1}`, CodeRepoNotAllowed},
		{OpGitCredential, `{"protocol":"http","host":"` + strings.TrimPrefix(e.fake.srv.URL, "http://") + `","path":"someone/else.git"}`, CodeRepoNotAllowed},
	}
	for _, c := range cases {
		if _, err := e.call(c.op, c.input); codeOf(err) != c.code {
			t.Errorf("%s %s: %v, want %s", c.op, c.input, err, c.code)
		}
	}
	if n := len(e.fake.seen()); n != 0 {
		t.Fatalf("refused inputs sent %d requests to GitHub", n)
	}
	// Another scope's Work is refused for the same repository.
	other := auth
	other.Scope = "elsewhere"
	if _, err := e.ops[OpIssueView].Handler(context.Background(), other, json.RawMessage(`{"repo":"octo/hello","number":1}`)); codeOf(err) != CodeRepoNotAllowed {
		t.Fatalf("other scope: %v", err)
	}
	// Without credentials the names are registered, every call refused.
	for _, op := range e.build(nil) {
		if _, err := op.Handler(context.Background(), auth, json.RawMessage(`{}`)); err == nil {
			t.Fatalf("%s ran without credentials", op.Name)
		}
	}
	if _, err := e.build(nil)[OpIssueView].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo/hello","number":1}`)); codeOf(err) != CodeNotConfigured {
		t.Fatalf("no credentials: %v", err)
	}
}

func TestErrorMapping(t *testing.T) {
	e := newEnv(t)
	reset := e.clock.Now().Add(30 * time.Minute).Truncate(time.Second)
	cases := []struct {
		name    string
		r       reply
		code    string
		message string
	}{
		{"401", reply{status: 401}, CodeUnauthorized, ""},
		{"403", reply{status: 403}, CodeForbidden, ""},
		{"404", reply{status: 404}, CodeNotFound, ""},
		{"409", reply{status: 409}, CodeConflict, ""},
		{"422", reply{status: 422, body: map[string]any{"message": "Validation Failed CANARYbody", "errors": []any{map[string]any{"resource": "Issue", "field": "title", "code": "CANARYbody"}}}}, CodeValidationFailed, ""},
		{"429", reply{status: 429, header: map[string]string{"Retry-After": "120"}}, CodeRateLimited, e.clock.Now().Add(2 * time.Minute).Format(time.RFC3339)},
		{"primary", reply{status: 403, header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Reset": fmt.Sprint(reset.Unix())}}, CodeRateLimited, reset.Format(time.RFC3339)},
		{"secondary", reply{status: 403, header: map[string]string{"Retry-After": "60"}, body: map[string]any{"message": "You have exceeded a secondary rate limit CANARYbody",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}}, CodeRateLimited, e.clock.Now().Add(time.Minute).Format(time.RFC3339)},
		{"500", reply{status: 500}, CodeUnavailable, ""},
		{"502", reply{status: 502}, CodeUnavailable, ""},
		{"418", reply{status: 418}, CodeRequestFailed, ""},
	}
	for _, c := range cases {
		if c.r.body == nil {
			c.r.body = map[string]any{"message": "CANARYbody " + c.name}
		}
		e.fake.route("GET /repos/octo/hello/issues/5", func(seen) reply { return c.r })
		_, err := e.call(OpIssueView, `{"repo":"octo/hello","number":5}`)
		if codeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
			continue
		}
		if c.message != "" && !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: %q does not say %s", c.name, err, c.message)
		}
	}
	// A 405 on merge is its own code.
	e.fake.route("PUT /repos/octo/hello/pulls/5/merge", func(seen) reply { return reply{status: 405, body: map[string]any{"message": "CANARYbody"}} })
	if _, err := e.call(OpPRMerge, `{"repo":"octo/hello","number":5}`); codeOf(err) != CodeNotMergeable {
		t.Errorf("merge 405: %v", err)
	}
	// An answer larger than MaxResponseBytes is refused before decoding.
	huge := strings.Repeat("y", MaxResponseBytes)
	e.fake.route("GET /repos/octo/hello/issues/6", func(seen) reply { return reply{status: 200, body: map[string]any{"number": 6, "body": huge}} })
	if _, err := e.call(OpIssueView, `{"repo":"octo/hello","number":6}`); codeOf(err) != CodeResponseTooLarge {
		t.Errorf("huge answer: %v", err)
	}
	// The App not installed on the repository.
	e.fake.route("GET /repos/octo/other/installation", func(seen) reply { return reply{status: 404, body: map[string]any{"message": "CANARYbody"}} })
	if _, err := e.call(OpIssueView, `{"repo":"octo/other","number":1}`); codeOf(err) != CodeAppNotInstalled {
		t.Errorf("not installed: %v", err)
	}
	// GitHub unreachable.
	e.fake.srv.Close()
	if _, err := e.call(OpIssueView, `{"repo":"octo/hello","number":5}`); codeOf(err) != CodeUnavailable {
		t.Errorf("unreachable: %v", err)
	}
	for _, msg := range e.errs {
		if strings.Contains(msg, "CANARY") || strings.Contains(msg, "127.0.0.1") {
			t.Errorf("an error carries GitHub's body or URL: %q", msg)
		}
	}
}

func TestRevokedTokenIsForgottenAndMintedAgain(t *testing.T) {
	e := newEnv(t)
	e.fake.route("GET /repos/octo/hello/issues/1/comments", func(seen) reply { return reply{status: 200, body: []any{}} })
	e.fake.route("GET /repos/octo/hello/issues/1", func(seen) reply { return reply{status: 200, body: map[string]any{"number": 1}} })
	e.ok(OpIssueView, `{"repo":"octo/hello","number":1}`)
	e.fake.revoke()
	if _, err := e.call(OpIssueView, `{"repo":"octo/hello","number":1}`); codeOf(err) != CodeUnauthorized {
		t.Fatalf("revoked: %v", err)
	}
	e.ok(OpIssueView, `{"repo":"octo/hello","number":1}`)
	if e.fake.minted() != 2 {
		t.Fatalf("issued %d tokens, want 2", e.fake.minted())
	}
}

func TestGitCredential(t *testing.T) {
	e := newEnv(t)
	op := e.ops[OpGitCredential]
	if !op.IsSensitive() || len(op.Capabilities) != 1 || op.Capabilities[0] != extension.CapabilityGitCredential {
		t.Fatal("github.git.credential must serve git.credential and be sensitive")
	}
	host := strings.TrimPrefix(e.fake.srv.URL, "http://")
	out, err := e.call(OpGitCredential, `{"protocol":"http","host":"`+host+`","path":"octo/hello.git","username":"x"}`)
	if err != nil {
		t.Fatal(err)
	}
	var cred osclient.GitCredential // the shape os git-credential reads
	if err := json.Unmarshal(out, &cred); err != nil || cred.Username != "x-access-token" || !strings.HasPrefix(cred.Password, tokenPrefix) {
		t.Fatalf("credential %s", out)
	}
	// The token is narrowed to the repository and works for it.
	if !e.fake.tokenOK(cred.Password, "/repos/octo/hello/git") || e.fake.tokenOK(cred.Password, "/repos/octo/other/git") {
		t.Fatal("the token is not narrowed to the one repository")
	}
	// No path: the Work's repository.
	if out, err := e.call(OpGitCredential, `{"protocol":"http","host":"`+host+`"}`); err != nil || !strings.Contains(string(out), cred.Password) {
		t.Fatalf("Work's repository: %v", err)
	}
	other := auth
	other.Work = "wrk_2"
	if _, err := op.Handler(context.Background(), other, json.RawMessage(`{"protocol":"http","host":"`+host+`"}`)); codeOf(err) != CodeRepositoryUnknown {
		t.Fatalf("no repository: %v", err)
	}
	for _, in := range []string{`{"protocol":"https","host":"evil.example","path":"octo/hello"}`, `{"protocol":"ssh","host":"` + host + `","path":"octo/hello"}`} {
		if _, err := e.call(OpGitCredential, in); codeOf(err) != CodeWrongHost {
			t.Fatalf("%s: %v", in, err)
		}
	}
	// github.com's API answers for github.com's git host, over https only.
	ops, err := Operations(Options{Credentials: StaticToken("t"), Now: e.clock.Now, Allow: func(extension.Authority, string) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		if o.Name != OpGitCredential {
			continue
		}
		if out, err := o.Handler(context.Background(), auth, json.RawMessage(`{"protocol":"https","host":"github.com","path":"a/b"}`)); err != nil || string(out) != `{"password":"t","username":"x-access-token"}` {
			t.Fatalf("github.com: %s %v", out, err)
		}
		if _, err := o.Handler(context.Background(), auth, json.RawMessage(`{"protocol":"http","host":"github.com","path":"a/b"}`)); codeOf(err) != CodeWrongHost {
			t.Fatalf("http to github.com: %v", err)
		}
	}
}

func TestStaticTokenIsSentAsBearer(t *testing.T) {
	e := newEnv(t)
	e.fake.static = "ghp_CANARYstatic"
	ops := e.build(StaticToken("ghp_CANARYstatic"))
	e.fake.route("POST /repos/octo/hello/issues/3/comments", func(seen) reply { return reply{status: 201, body: map[string]any{"id": 1}} })
	if _, err := ops[OpIssueComment].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo/hello","number":3,"body":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	r := e.fake.seen()
	if len(r) != 1 || r[0].Auth != "Bearer ghp_CANARYstatic" {
		t.Fatalf("requests %+v", r)
	}
}

// expiredReuser is a deliberately wrong credential source: it keeps
// handing out the first token it got, past its expiry.
type expiredReuser struct {
	inner Credentials
	mu    sync.Mutex
	first *Token
}

func (x *expiredReuser) Token(ctx context.Context, repo string) (Token, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.first != nil {
		return *x.first, nil
	}
	t, err := x.inner.Token(ctx, repo)
	if err == nil {
		x.first = &t
	}
	return t, err
}

func (x *expiredReuser) Invalidate(string, Token) {}

// TestNegativeControls: deliberately wrong credentials that the fake, and
// so these tests, must reject.
func TestNegativeControls(t *testing.T) {
	e := newEnv(t)
	_, alt := keys(t)
	e.fake.route("GET /repos/octo/hello/issues/1/comments", func(seen) reply { return reply{status: 200, body: []any{}} })
	e.fake.route("GET /repos/octo/hello/issues/1", func(seen) reply { return reply{status: 200, body: map[string]any{"number": 1}} })

	// An App signing with another key: its JWT is refused.
	wrong, err := NewApp(AppOptions{AppID: appID, PrivateKey: pemOf(alt), BaseURL: e.fake.url(), Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.build(wrong)[OpIssueView].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo/hello","number":1}`)); codeOf(err) != CodeUnauthorized {
		t.Fatalf("wrong key: %v", err)
	}
	// Another App id with the right key: refused too.
	key, _ := keys(t)
	wrongID, _ := NewApp(AppOptions{AppID: appID + 1, PrivateKey: pemOf(key), BaseURL: e.fake.url(), Now: e.clock.Now})
	if _, err := wrongID.Token(context.Background(), "octo/hello"); codeOf(err) != CodeUnauthorized {
		t.Fatalf("wrong app id: %v", err)
	}
	// A JWT from a clock far off: outside its iat/exp window.
	skewed, _ := NewApp(AppOptions{AppID: appID, PrivateKey: pemOf(key), BaseURL: e.fake.url(), Now: func() time.Time { return e.clock.Now().Add(-time.Hour) }})
	if _, err := skewed.Token(context.Background(), "octo/hello"); codeOf(err) != CodeUnauthorized {
		t.Fatalf("skewed clock: %v", err)
	}
	// A source that reuses an expired token: refused once it expires.
	reuse := e.build(&expiredReuser{inner: e.app})
	if _, err := reuse[OpIssueView].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo/hello","number":1}`)); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	e.clock.Advance(time.Hour)
	if _, err := reuse[OpIssueView].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo/hello","number":1}`)); codeOf(err) != CodeUnauthorized {
		t.Fatalf("expired token reused: %v", err)
	}
	// The real App, at the same moment, mints a new token and passes.
	if _, err := e.ops[OpIssueView].Handler(context.Background(), auth, json.RawMessage(`{"repo":"octo/hello","number":1}`)); err != nil {
		t.Fatalf("the App after expiry: %v", err)
	}
}

func TestNoCredentialLeaks(t *testing.T) {
	e := newEnv(t)
	key, _ := keys(t)
	e.fake.route("GET /repos/octo/hello/issues/1/comments", func(seen) reply { return reply{status: 200, body: []any{}} })
	e.fake.route("GET /repos/octo/hello/issues/1", func(seen) reply { return reply{status: 200, body: map[string]any{"number": 1}} })
	e.fake.route("GET /repos/octo/hello/issues/2", func(seen) reply { return reply{status: 403, body: map[string]any{"message": "CANARYbody"}} })
	e.ok(OpIssueView, `{"repo":"octo/hello","number":1}`)
	e.call(OpIssueView, `{"repo":"octo/hello","number":2}`)
	e.clock.Advance(2 * time.Hour)
	e.ok(OpIssueView, `{"repo":"octo/hello","number":1}`)
	cred, err := e.call(OpGitCredential, `{"protocol":"http","host":"`+strings.TrimPrefix(e.fake.srv.URL, "http://")+`","path":"octo/hello"}`)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := e.app.Token(context.Background(), "octo/hello")
	printed := fmt.Sprintf("%v %+v %#v %s %q %s", tok, tok, tok, tok, tok, tok.String()+tok.GoString())
	js, _ := json.Marshal(struct{ T Token }{tok})
	var slogged bytes.Buffer
	slog.New(slog.NewTextHandler(&slogged, nil)).Info("x", "token", tok)

	jwtNow, _ := e.app.JWT()
	canaries := []string{tokenPrefix, "BEGIN RSA", strings.Split(pemOf(key), "\n")[1][:40], jwtNow[:40], "CANARYbody"}
	haystacks := map[string]string{"logs": e.logs.String(), "errors": strings.Join(e.errs, "\n"), "results": strings.Join(e.outs, "\n"),
		"printed": printed, "json": string(js), "slog": slogged.String()}
	for name, h := range haystacks {
		for _, c := range canaries {
			if strings.Contains(h, c) {
				t.Errorf("%s holds %q", name, c)
			}
		}
	}
	// The control: the canary search finds the token where it must be.
	if !strings.Contains(string(cred), tokenPrefix) || !strings.Contains(tok.Reveal(), tokenPrefix) {
		t.Fatal("the canary search would not find a token")
	}
	if _, err := NewApp(AppOptions{AppID: 1, PrivateKey: "not a key CANARYkey", Now: e.clock.Now}); err == nil || strings.Contains(err.Error(), "CANARY") {
		t.Fatalf("a bad key: %v", err)
	}
	if _, err := Operations(Options{BaseURL: "https://user:CANARYpw@example.com/"}); err == nil || strings.Contains(err.Error(), "CANARY") {
		t.Fatalf("a bad base URL: %v", err)
	}
}

func TestOperationsAreWellFormed(t *testing.T) {
	ops, err := Operations(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{OpIssueView, OpIssueComment, OpIssueEdit, OpPRCreate, OpReviewRequest, OpReview, OpRepoFile, OpChecksList, OpChecksView, OpPRMerge, OpGitCredential}
	if len(ops) != len(want) {
		t.Fatalf("%d operations", len(ops))
	}
	for i, op := range ops {
		if op.Name != want[i] || !extension.OwnsOperation("github", op.Name) || op.Summary == "" || op.Guidance == "" || op.Handler == nil {
			t.Errorf("%s is not complete", op.Name)
		}
		var s map[string]any
		if err := json.Unmarshal(op.InputSchema, &s); err != nil || s["type"] != "object" {
			t.Errorf("%s: schema %s", op.Name, op.InputSchema)
		}
		if op.IsSensitive() != (op.Name == OpGitCredential) {
			t.Errorf("%s: sensitive %v", op.Name, op.IsSensitive())
		}
		if InDefaultToolsets(op.Name) == (op.Name == OpPRMerge) {
			t.Errorf("%s: default toolsets %v", op.Name, InDefaultToolsets(op.Name))
		}
	}
}

func TestConcurrentCallsMintOnce(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := e.app.Token(context.Background(), "octo/hello")
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok.Reveal()
		}()
	}
	wg.Wait()
	if e.fake.minted() != 1 {
		t.Fatalf("%d tokens minted for one repository", e.fake.minted())
	}
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatal("callers got different tokens")
		}
	}
}

func TestBaseURLAndGitHost(t *testing.T) {
	now := func() time.Time { return time.Time{} }
	cases := []struct{ base, gitHost, want string }{
		{"", "", "github.com"},
		{"https://ghe.example.com/api/v3", "", "ghe.example.com"},
		{"https://ghe.example.com/api/v3/", "git.example.com", "git.example.com"},
	}
	for _, c := range cases {
		ops, err := Operations(Options{Credentials: StaticToken("t"), BaseURL: c.base, GitHost: c.gitHost, Now: now,
			Allow: func(extension.Authority, string) bool { return true }})
		if err != nil {
			t.Fatal(err)
		}
		h := ops[len(ops)-1].Handler
		if _, err := h(context.Background(), auth, json.RawMessage(`{"protocol":"https","host":"`+c.want+`","path":"a/b"}`)); err != nil {
			t.Errorf("%q: %v", c.base, err)
		}
	}
	if b, _ := baseURL("https://ghe.example.com/api/v3"); b != "https://ghe.example.com/api/v3/" {
		t.Fatalf("base %q", b)
	}
	for _, bad := range []string{"ftp://x/", "/api/v3/", "https://x/?q=1", "https://u:p@x/"} {
		if _, err := baseURL(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := Operations(Options{Credentials: StaticToken("t")}); err == nil {
		t.Fatal("credentials without a clock accepted")
	}
}
