package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

var spec = agent.Spec{Executor: "test-agent", Binary: "agent", Secrets: map[string]string{"api_key": "K"}}

func parse(t *testing.T, raw string) agent.Config {
	t.Helper()
	cfg, err := agent.ParseConfig(spec, json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRenderPromptSeesTheDocumentedFields(t *testing.T) {
	cfg := parse(t, `{"model": "m", "prompt": "{{.WorkID}} {{.BindingID}}:{{range .Events}} {{.Seq}} {{.Type}} {{.Source}} {{.CorrelationKey}} {{.Data.issue.title}} {{.DataJSON}}{{end}}"}`)
	req := executor.RunRequest{WorkID: "w-1", BindingID: "b", Events: []executor.Event{
		{ID: "e1", Seq: 3, Type: "issue.opened", Source: "github", CorrelationKey: "k", Data: json.RawMessage(`{"issue": {"title": "Crash"}}`)},
	}}
	got, err := RenderPrompt(cfg, req)
	if want := `w-1 b: 3 issue.opened github k Crash {"issue": {"title": "Crash"}}`; err != nil || got != want {
		t.Errorf("prompt %q, %v; want %q", got, err, want)
	}
}

func TestRenderPromptErrorsQuoteNothing(t *testing.T) {
	const secret = "SECRET-DATA"
	req := executor.RunRequest{Events: []executor.Event{{Type: "x", Data: json.RawMessage(`{"v": "` + secret + `"}`)}}}
	for _, tmpl := range []string{`{{.Nope}}`, `{{range .Events}}{{.Data.v.deeper}}{{end}}`, `{{" "}}`} {
		_, err := RenderPrompt(parse(t, `{"model": "m", "prompt": "`+strings.ReplaceAll(tmpl, `"`, `\"`)+`"}`), req)
		if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "Nope") {
			t.Errorf("template %s: %v", tmpl, err)
		}
	}
	big := parse(t, `{"model": "m", "prompt": "{{range .Events}}{{.DataJSON}}{{end}}"}`)
	huge := executor.RunRequest{Events: []executor.Event{{Data: json.RawMessage(`"` + strings.Repeat("a", MaxPrompt) + `"`)}}}
	if _, err := RenderPrompt(big, huge); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("an oversized prompt: %v", err)
	}
}

func TestResumePromptListsTheWakingEvents(t *testing.T) {
	got := ResumePrompt([]executor.Event{{ID: "e2", Type: "review.done", Source: "op", CorrelationKey: "pr-1", Data: json.RawMessage(`{"ok":true}`)}, {ID: "e3", Type: "t", Source: "s"}})
	for _, want := range []string{"woken by these input Events", "- review.done from op (event e2, correlation key pr-1): {\"ok\":true}\n", "- t from s (event e3): null\n", "Continue the task"} {
		if !strings.Contains(got, want) {
			t.Errorf("resume prompt lacks %q:\n%s", want, got)
		}
	}
	if got := ResumePrompt(nil); !strings.Contains(got, "no new input Events") {
		t.Errorf("resume prompt without Events: %q", got)
	}
}

type lines struct{ got []string }

func (l *lines) Line(b []byte)    { l.got = append(l.got, string(b)) }
func (l *lines) Summary() Summary { return Summary{} }

// TestFeedSplitsLinesAcrossChunks: the follower's reader hands on whole
// lines whatever the chunks, and skips one longer than agent.MaxLine.
func TestFeedSplitsLinesAcrossChunks(t *testing.T) {
	var l lines
	var partial []byte
	over := false
	long := strings.Repeat("x", agent.MaxLine+1)
	for _, chunk := range []string{"a", "b\nc", "\r\n", long[:10], long[10:], "\nd\n", "tail"} {
		partial, over = feed(&l, partial, over, []byte(chunk))
	}
	if strings.Join(l.got, "|") != "ab|c|d" || string(partial) != "tail" {
		t.Errorf("lines %q, partial %q", l.got, partial)
	}
}

func TestOutcomeOrder(t *testing.T) {
	if lastOf([]string{WaitTool, "x", OutcomeTool}, WaitTool, OutcomeTool) != OutcomeTool || lastOf([]string{OutcomeTool, WaitTool}, WaitTool, OutcomeTool) != WaitTool || lastOf(nil, WaitTool, OutcomeTool) != "" {
		t.Error("lastOf")
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not on PATH")
		}
		t.Skip("git is not on PATH: install git (e.g. apt-get install git) to run this test")
	}
}

// TestEachWorkGetsItsOwnCheckout clones a real repository at a ref, once
// per Work, and the sweep removes a succeeded Work's checkout, keeps a
// failed one's for the keep time, then removes it, and keeps a running
// Work's.
func TestEachWorkGetsItsOwnCheckout(t *testing.T) {
	needGit(t)
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	os.MkdirAll(repo, 0o700)
	git(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "f"), []byte("one\n"), 0o600)
	git(t, repo, "add", "f")
	git(t, repo, "commit", "-q", "-m", "one")
	git(t, repo, "tag", "v1")
	os.WriteFile(filepath.Join(repo, "f"), []byte("two\n"), 0o600)
	git(t, repo, "commit", "-q", "-am", "two")

	fake := clock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	e, err := New(spec, executor.Info{Name: "test-agent"}, nil, Options{Supervisor: "x", Clock: fake, Workspaces: filepath.Join(tmp, "ws")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, `{"model": "m", "prompt": "p", "workdir": {"git": {"repository": "`+repo+`", "ref": "v1"}}}`)
	dirs := map[string]string{}
	for _, w := range []string{"w-ok", "w-failed", "w-running"} {
		dir, err := e.workdir(context.Background(), executor.RunRequest{WorkID: w, Dir: tmp}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "one\n" {
			t.Errorf("%s checkout holds %q, want the tag's", w, b)
		}
		dirs[w] = dir
	}
	again, err := e.workdir(context.Background(), executor.RunRequest{WorkID: "w-ok", Dir: tmp}, cfg)
	if err != nil || again != dirs["w-ok"] || dirs["w-ok"] == dirs["w-failed"] {
		t.Errorf("a Work's second checkout is %q (%v), first %q", again, err, dirs["w-ok"])
	}
	bad := parse(t, `{"model": "m", "prompt": "p", "workdir": {"git": {"repository": "`+filepath.Join(tmp, "none")+`"}}}`)
	if _, err := e.workdir(context.Background(), executor.RunRequest{WorkID: "w-bad", Dir: tmp}, bad); err == nil || strings.Contains(err.Error(), tmp) {
		t.Errorf("a missing repository: %v", err)
	}

	ended := fake.Now()
	status := func(_ context.Context, id string) (WorkEnd, error) {
		switch id {
		case "w-ok":
			return WorkEnd{Known: true, Ended: true, EndedAt: ended}, nil
		case "w-failed":
			return WorkEnd{Known: true, Ended: true, Failed: true, EndedAt: ended}, nil
		case "w-bad":
			return WorkEnd{}, errors.New("cannot tell now")
		}
		return WorkEnd{Known: true}, nil
	}
	root := filepath.Join(tmp, "ws")
	n, err := SweepWorkspaces(context.Background(), root, fake.Now(), 0, status)
	if err != nil || n != 1 || exists(dirs["w-ok"]) || !exists(dirs["w-failed"]) || !exists(dirs["w-running"]) {
		t.Fatalf("first sweep removed %d (%v)", n, err)
	}
	n, err = SweepWorkspaces(context.Background(), root, fake.Advance(DefaultKeepFailed), 0, status)
	if err != nil || n != 1 || exists(dirs["w-failed"]) || !exists(dirs["w-running"]) {
		t.Fatalf("sweep after the keep time removed %d (%v)", n, err)
	}
}

func TestLiveLogIsTheCurrentSegmentsStderr(t *testing.T) {
	var e Executor
	dir := t.TempDir()
	// Before the segment exists: its own epoch's directory.
	if got, ok := e.LiveLog(dir, 3); !ok || got != filepath.Join(segmentDir(dir, 3), "output.log") {
		t.Fatalf("LiveLog before any segment = %q, %v", got, ok)
	}
	// An adopted segment keeps the directory its epoch started in.
	if err := os.MkdirAll(segmentDir(dir, 2), 0o700); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.LiveLog(dir, 3); got != filepath.Join(segmentDir(dir, 2), "output.log") {
		t.Fatalf("LiveLog of an adopted segment = %q", got)
	}
	if err := os.MkdirAll(segmentDir(dir, 3), 0o700); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.LiveLog(dir, 3); got != filepath.Join(segmentDir(dir, 3), "output.log") {
		t.Fatalf("LiveLog of its own segment = %q", got)
	}
}
