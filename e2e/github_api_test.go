package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extensions/github/ghtest"
)

// The GitHub extension's operations end to end with the real daemon and a
// fake GitHub on 127.0.0.1 (extensions/github/ghtest: the App's token
// exchange checked against its JWT, issue comments checked against the
// installation tokens it issued, and git over smart HTTP through git's
// own http-backend, admitting only such a token). A signed delivery
// starts a Work through a route; its shell job comments through the real
// client, clones and pushes with real git whose credential helper is `os
// git-credential`, and parks on github.wait.checks until a
// check_suite.completed delivery wakes it. A binding without the grant is
// refused; once an apply removes github.git.credential from the scope,
// git fails and os git-credential says why. No webhook secret, App key,
// installation token or execution token is stored, logged or answered.

// needGit skips a test that needs git and its http-backend where they are
// missing, and fails it under CI.
func needGit(t *testing.T) {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err == nil {
		_, err = os.Stat(filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git with git-http-backend is required: %v", err)
		}
		t.Skipf("git with git-http-backend is not installed (apt-get install git, or brew install git): %v", err)
	}
}

const ghRepo = "octo-org/hello-world"

// gitIn runs git in dir for the test itself (seeding and checking the
// bare repository), never with a credential.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.test",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// seedRepo makes root/octo-org/hello-world.git, a bare repository with
// one commit on main.
func seedRepo(t *testing.T, root string) string {
	t.Helper()
	bare := filepath.Join(root, ghRepo+".git")
	if err := os.MkdirAll(bare, 0o700); err != nil {
		t.Fatal(err)
	}
	gitIn(t, bare, "init", "--bare", "-b", "main")
	work := t.TempDir()
	gitIn(t, work, "init", "-b", "main")
	writeFile(t, filepath.Join(work, "README.md"), []byte("hello\n"))
	gitIn(t, work, "add", "README.md")
	gitIn(t, work, "commit", "-m", "first")
	gitIn(t, work, "push", bare, "main")
	return bare
}

func (e *env) githubAPIConfig(port int, ctl, apiURL string, scopeOps []string) []byte {
	e.t.Helper()
	binding := func(ops ...string) map[string]any {
		return map[string]any{"executor": "shell", "operations": ops,
			"config": map[string]any{"command": []string{"sh", "-c", agentScript}, "env": map[string]string{"CTL": ctl}}}
	}
	cfg := map[string]any{
		"version": 1,
		"secrets": map[string]any{"gh-hook": "env:OC_E2E_GH_HOOK", "gh-app-id": "env:OC_E2E_GH_APP_ID", "gh-app-key": "env:OC_E2E_GH_APP_KEY"},
		"scopes": map[string]any{"ops": map[string]any{
			"authorization": map[string]any{"operations": scopeOps, "reads": []string{"work", "events"}},
			"bindings":      map[string]any{"author": binding("@github.author"), "reader": binding("@github.reader", "declare_outcome")},
			"routes": []any{
				map[string]any{"id": "author", "match": map[string]any{"type": "github.issues.opened", "source": "github.webhook"}, "binding": "author"},
				map[string]any{"id": "reader", "match": map[string]any{"type": "github.issues.labeled", "source": "github.webhook"}, "binding": "reader"},
			},
		}},
		"extensions": map[string]any{"github": map[string]any{"config": map[string]any{
			"ingress":      map[string]any{"enabled": true, "listen": "127.0.0.1:" + strconv.Itoa(port), "secret": "gh-hook"},
			"repositories": map[string]any{ghRepo: map[string]any{"scope": "ops"}},
			"api":          map[string]any{"url": apiURL, "app": map[string]any{"id": "gh-app-id", "private_key": "gh-app-key"}},
		}}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func ghPayload(v map[string]any) []byte {
	v["repository"] = map[string]any{"full_name": ghRepo, "name": "hello-world"}
	v["sender"] = map[string]any{"login": "mona"}
	v["installation"] = map[string]any{"id": 77}
	b, _ := json.Marshal(v)
	return b
}

func TestGitHubExtensionEndToEnd(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	gitRoot := filepath.Join(e.root, "git")
	bare := seedRepo(t, gitRoot)
	fake := ghtest.New(t, ghtest.Options{GitRoot: gitRoot, Repositories: []string{ghRepo}})
	ctl := filepath.Join(e.root, "c")
	for _, dir := range []string{e.state, ctl} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	ceiling := []string{"@github.author", "@github.reader"}
	writeFile(t, filepath.Join(e.state, "config.json"), e.githubAPIConfig(port, ctl, fake.APIURL(), ceiling))
	e.start("OC_E2E_GH_HOOK="+ghSecret, "OC_E2E_GH_APP_ID="+strconv.FormatInt(fake.AppID(), 10), "OC_E2E_GH_APP_KEY="+fake.KeyPEM)
	hookURL := "http://127.0.0.1:" + strconv.Itoa(port) + "/github/webhook"
	until(t, "the ingress listening", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	var responses []string
	var execTokens []string
	deliverOK := func(d ghDelivery) {
		t.Helper()
		code, body := deliver(t, hookURL, d)
		responses = append(responses, body)
		if code != http.StatusAccepted || !strings.Contains(body, `"accepted"`) {
			t.Fatalf("delivery %s: %d %s", d.id, code, body)
		}
	}

	// A signed delivery starts the author's Work through its route.
	deliverOK(signed("issues", "e2e-gh-api-1", issueOpened(ghRepo, 42)))
	var works page[work]
	until(t, "the route starting a Work", func() bool {
		e.must("GET", "/v1/work?scope=ops", nil, nil, &works)
		return len(works.Items) == 1
	})
	w1 := works.Items[0].ID
	x1 := e.runningExecution(w1)
	a1 := agentOf(t, ctl, x1.ID)
	execTokens = append(execTokens, e.execToken(x1.ID))

	// os call github.issue.comment reaches GitHub as the App's
	// installation: the JWT exchange first, then the comment with the
	// installation token.
	out := a1.mustSh(`os call github.issue.comment --input '{"repo":"octo-org/hello-world","number":42,"body":"Working on it"}'`)
	if !strings.Contains(out, `"id"`) {
		t.Fatalf("the comment's result: %s", out)
	}
	var seen []string
	for _, r := range fake.Requests() {
		seen = append(seen, r.Method+" "+r.Path+" "+r.Auth+" "+strconv.Itoa(r.Status))
	}
	want := []string{
		"GET /api/v3/repos/octo-org/hello-world/installation jwt 200",
		"POST /api/v3/app/installations/77/access_tokens jwt 201",
		"POST /api/v3/repos/octo-org/hello-world/issues/42/comments token octo-org/hello-world 201",
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("GitHub saw %q, want %q", seen, want)
	}

	// Real git clones and pushes through os git-credential, with the
	// installation token the fake App issued.
	git := `HOME="$CTL" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_ASKPASS= SSH_ASKPASS= git -c credential.helper= -c 'credential.helper=!os git-credential' -c credential.useHttpPath=true -c user.name=agent -c user.email=agent@example.test `
	repoURL := fake.URL + "/" + ghRepo + ".git"
	a1.mustSh(`(cd "$CTL" && ` + git + `clone ` + repoURL + ` clone-42 && cd clone-42 && echo fixed > FIX && ` + git + `add FIX && ` + git + `commit -q -m "fix #42" && ` + git + `push origin HEAD:refs/heads/fix-42)`)
	if got := gitIn(t, bare, "log", "--format=%s", "-1", "fix-42"); got != "fix #42" {
		t.Fatalf("the pushed branch's head is %q", got)
	}
	var pushed, anonymous bool
	for _, r := range fake.Requests() {
		pushed = pushed || (r.Path == "/"+ghRepo+".git/git-receive-pack" && r.Auth == "basic "+ghRepo)
		anonymous = anonymous || (strings.HasPrefix(r.Path, "/"+ghRepo+".git/") && r.Status == http.StatusUnauthorized)
	}
	if !pushed || !anonymous {
		t.Fatalf("git pushed with the token: %v; was first refused without one: %v", pushed, anonymous)
	}

	// A wait for the PR's checks parks the Work ...
	out = a1.mustSh(`os call github.wait.checks --input '{"repo":"octo-org/hello-world","number":43,"timeout":"1h"}'`)
	if !strings.Contains(out, `"declared": "wait"`) || !strings.Contains(out, `octo-org/hello-world#43`) {
		t.Fatalf("github.wait.checks: %s", out)
	}
	a1.exit(0)
	e.waitWork(w1, "waiting", func(w work) bool { return w.State == "waiting" || terminal(w.State) })
	var waits page[struct {
		waitRecord
		Keys         []string `json:"keys"`
		Registration string   `json:"registration"`
	}]
	e.must("GET", "/v1/waits?work="+url.QueryEscape(w1), nil, nil, &waits)
	if len(waits.Items) != 1 || waits.Items[0].State != "active" || !slices.Equal(waits.Items[0].Types, []string{"github.check_suite.completed"}) ||
		!slices.Equal(waits.Items[0].Keys, []string{ghRepo + "#43"}) || waits.Items[0].Registration != "github" {
		t.Fatalf("waits %+v", waits.Items)
	}
	// ... and a check_suite.completed delivery for the PR wakes it.
	deliverOK(signed("check_suite", "e2e-gh-api-checks", ghPayload(map[string]any{"action": "completed",
		"check_suite": map[string]any{"id": 9, "status": "completed", "conclusion": "success", "head_branch": "fix-42", "head_sha": "abc", "pull_requests": []any{map[string]any{"number": 43}}}})))
	x2 := e.runningExecution(w1, x1.ID)
	a2 := agentOf(t, ctl, x2.ID)
	execTokens = append(execTokens, e.execToken(x2.ID))
	if out := a2.mustSh("os call read_context"); !strings.Contains(out, "github.check_suite.completed") {
		t.Fatalf("the woken attempt's context: %s", out)
	}

	// A binding without the grant is refused.
	deliverOK(signed("issues", "e2e-gh-api-label", ghPayload(map[string]any{"action": "labeled", "label": map[string]any{"name": "question"},
		"issue": map[string]any{"number": 44, "title": "Why?", "state": "open", "user": map[string]any{"login": "mona"}}})))
	until(t, "the reader's Work", func() bool {
		e.must("GET", "/v1/work?scope=ops", nil, nil, &works)
		return len(works.Items) == 2
	})
	w2 := works.Items[0].ID
	if w2 == w1 {
		w2 = works.Items[1].ID
	}
	x3 := e.runningExecution(w2)
	a3 := agentOf(t, ctl, x3.ID)
	execTokens = append(execTokens, e.execToken(x3.ID))
	before := len(fake.Requests())
	code, _, stderr := a3.sh(`os call github.issue.comment --input '{"repo":"octo-org/hello-world","number":44,"body":"not mine to say"}'`)
	if code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("a comment without the grant: exit %d %q", code, stderr)
	}
	if len(fake.Requests()) != before {
		t.Fatal("a refused call reached GitHub")
	}
	if rejected := e.toolbeltCalls(url.Values{"execution": {x3.ID}, "kind": {"toolbelt.rejected"}}); len(rejected) != 1 || rejected[0].Operation != "github.issue.comment" {
		t.Fatalf("rejections %+v", rejected)
	}
	a3.mustSh("os outcome succeeded --message read-only")
	a3.exit(0)

	// With github.git.credential removed from the scope, the running
	// author's git fails and os git-credential says why.
	file := writeFile(t, filepath.Join(e.root, "narrowed.json"), e.githubAPIConfig(port, ctl, fake.APIURL(), append(ceiling, "!github.git.credential")))
	if code, out, stderr := e.cli("config", "apply", file); code != 0 {
		t.Fatalf("config apply: exit %d %s %s", code, out, stderr)
	}
	code, _, stderr = a2.sh(`(cd "$CTL/clone-42" && ` + git + `push origin HEAD:refs/heads/fix-42-again)`)
	if code == 0 || !strings.Contains(stderr, "os git-credential: no operation granted to this execution serves git.credential") {
		t.Fatalf("git without the grant: exit %d %q", code, stderr)
	}
	if _, err := exec.Command("git", "--git-dir", bare, "rev-parse", "--verify", "-q", "refs/heads/fix-42-again").Output(); err == nil {
		t.Fatal("git pushed without the grant")
	}
	a2.mustSh("os outcome succeeded --message checks-done")
	a2.exit(0)
	for _, id := range []string{w1, w2} {
		if w := e.waitWork(id, "terminal", func(w work) bool { return terminal(w.State) }); w.State != "succeeded" {
			t.Fatalf("Work %s ended %s (%s)\n%s", id, w.State, w.OutcomeMessage, e.allLogs())
		}
	}

	// Canary: no webhook secret, App key, installation token or execution
	// token in a response, a log line, the database or any file the test
	// run left (artifacts, run and control directories).
	keyLines := strings.Split(strings.TrimSpace(fake.KeyPEM), "\n")
	canaries := map[string]string{"the webhook secret": ghSecret, "the App's key": keyLines[len(keyLines)/2], "an installation token": ghtest.TokenPrefix}
	if toks := fake.Tokens(); len(toks) == 0 {
		t.Fatal("the fake issued no installation token")
	}
	for i, tok := range execTokens {
		canaries[fmt.Sprintf("execution token %d", i)] = tok
	}
	e.noSecrets(canaries, responses, "/v1/config", "/v1/events?limit=500", "/v1/work", "/v1/toolbelt/calls?limit=500", "/v1/waits", "/v1/executions?work="+w1)
}

// The offline config check knows the GitHub playbooks and what they use: a
// binding on the author's playbook granted @github.author draws no
// warning; one on the reviewer's playbook granted only @github.reader is
// warned that the playbook uses operations it is not granted.
func TestGitHubPlaybooksThroughConfigCheck(t *testing.T) {
	e := newEnv(t)
	binding := func(playbook string, ops ...string) map[string]any {
		return map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"true"}}, "operations": ops, "playbook": playbook}
	}
	cfg := map[string]any{
		"version": 1,
		"scopes": map[string]any{"ops": map[string]any{
			"authorization": map[string]any{"operations": []string{"@github.author", "@github.reviewer"}},
			"bindings": map[string]any{
				"author":   binding("github-author", "@github.author"),
				"reviewer": binding("github-reviewer", "@github.reader", "declare_outcome"),
			},
		}},
		"extensions": map[string]any{"github": map[string]any{"config": map[string]any{"repositories": map[string]any{ghRepo: map[string]any{"scope": "ops"}}}}},
	}
	b, _ := json.Marshal(cfg)
	file := writeFile(t, filepath.Join(e.root, "playbooks.json"), b)
	var checked struct {
		Valid    bool `json:"valid"`
		Warnings []struct {
			Pointer string `json:"pointer"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"warnings"`
	}
	e.cliJSON(&checked, "config", "check", file)
	if !checked.Valid || len(checked.Warnings) != 1 || checked.Warnings[0].Code != "playbook_not_granted" ||
		!strings.Contains(checked.Warnings[0].Pointer, "/bindings/reviewer") || !strings.Contains(checked.Warnings[0].Message, "github.pr.review") {
		t.Fatalf("config check: %+v", checked)
	}
}
