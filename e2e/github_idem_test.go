package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extensions/github/ghtest"
)

// A comment whose answer from GitHub is lost to a daemon crash is not
// posted twice. The fake GitHub keeps the comment and holds its answer;
// the daemon is killed meanwhile, so the call's request record stays
// claimed. The next daemon adopts the execution, and the same os call with
// the same request ID runs the handler again (the host's replay window):
// it finds the comment by the mark it carries and answers it, replayed,
// without posting. Once that answer is committed, a further repeat is the
// host's own replay and reaches GitHub not at all.
func TestGitHubCommentRunAgainAfterACrash(t *testing.T) {
	e := newEnv(t)
	fake := ghtest.New(t, ghtest.Options{Repositories: []string{ghRepo}})
	ctl := filepath.Join(e.root, "c")
	for _, dir := range []string{e.state, ctl} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	writeFile(t, filepath.Join(e.state, "config.json"), e.githubAPIConfig(port, ctl, fake.APIURL(), []string{"@github.author", "@github.reader"}))
	secrets := []string{"OC_E2E_GH_HOOK=" + ghSecret, "OC_E2E_GH_APP_ID=" + strconv.FormatInt(fake.AppID(), 10), "OC_E2E_GH_APP_KEY=" + fake.KeyPEM}
	first := e.start(secrets...)
	until(t, "the ingress listening", func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, body := deliver(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/github/webhook", signed("issues", "e2e-gh-idem-1", issueOpened(ghRepo, 42))); code != http.StatusAccepted {
		t.Fatalf("delivery: %d %s", code, body)
	}
	var works page[work]
	until(t, "the route starting a Work", func() bool {
		e.must("GET", "/v1/work?scope=ops", nil, nil, &works)
		return len(works.Items) == 1
	})
	w := works.Items[0].ID
	x := e.runningExecution(w)
	a := agentOf(t, ctl, x.ID)
	oldToken := e.execToken(x.ID)

	call := `os call github.issue.comment --request-id crash-1 --input '{"repo":"octo-org/hello-world","number":42,"body":"Working on it"}'`
	fake.HoldCreations()
	a.send("OS_DIAL_RETRY=0 " + call)
	a.n++
	until(t, "the comment on GitHub", func() bool { return len(fake.Comments(ghRepo, 42)) == 1 })
	first.kill()
	until(t, "the interrupted os call", func() bool {
		_, err := os.Stat(filepath.Join(a.dir, strconv.Itoa(a.n)+".status"))
		return err == nil
	})
	if b, _ := os.ReadFile(filepath.Join(a.dir, strconv.Itoa(a.n)+".status")); strings.TrimSpace(string(b)) == "0" {
		t.Fatal("the os call the crash interrupted succeeded")
	}
	fake.ReleaseCreations()

	e.start(secrets...)
	until(t, "the execution's adoption", func() bool {
		exes := e.executions(w)
		return len(exes) == 1 && exes[0].Epoch == 2 && exes[0].State == "running"
	})
	e.untilServedAgain(x.ID, oldToken)
	posts := func() int {
		n := 0
		for _, r := range fake.Requests() {
			if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/issues/42/comments") {
				n++
			}
		}
		return n
	}
	out := a.mustSh(call)
	comments := fake.Comments(ghRepo, 42)
	if len(comments) != 1 || posts() != 1 || !strings.Contains(out, `"replayed": true`) || !strings.Contains(out, strconv.FormatInt(comments[0].ID, 10)) {
		t.Fatalf("the call run again answered %s; GitHub holds %+v after %d posts", out, comments, posts())
	}
	if want := "Working on it\n\n<!-- open-conduit:request=" + x.ID + "/crash-1 -->"; comments[0].Body != want {
		t.Fatalf("the comment's body %q, want %q", comments[0].Body, want)
	}
	before := len(fake.Requests())
	if again := a.mustSh(call); again != out || len(fake.Requests()) != before {
		t.Fatalf("the host's replay %s (first %s) sent %d requests", again, out, len(fake.Requests())-before)
	}
	a.mustSh("os outcome succeeded --message commented")
	a.exit(0)
	if got := e.waitWork(w, "terminal", func(w work) bool { return terminal(w.State) }); got.State != "succeeded" {
		t.Fatalf("Work ended %s (%s)", got.State, got.OutcomeMessage)
	}
}
