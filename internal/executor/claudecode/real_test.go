package claudecode

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun/agentruntest"
)

// TestTheRealClaude runs the pinned Claude Code against a scripted model
// server and a toolbelt double served through the real os mcp: the agent
// is offered exactly the granted operations, reads its context, waits (the
// segment is Suspended with its session), and the resume continues the
// same session (the model server sees the earlier conversation) and
// declares the outcome. No file of the execution holds the API key or the
// token.
func TestTheRealClaude(t *testing.T) {
	bin := agenttest.Claude(t)
	b := setup(t)
	agentruntest.BuildOS(t, b.Ctx.ToolbeltDir)
	tb := agentruntest.NewToolbelt(t, b.Ctx.ToolbeltEndpoint, tokenCanary)
	var tools []string
	for _, op := range agentruntest.Operations {
		tools = append(tools, "mcp__os__"+op)
	}
	srv := agenttest.Anthropic(t, agenttest.Options{
		APIKey: apiKeyCanary, Model: "claude-sonnet-4-5", Tools: tools,
		Script: []agenttest.Step{
			agenttest.Call("mcp__os__read_context", nil),
			agenttest.Call("mcp__os__wait", map[string]any{"reason": "waiting for review"}),
			agenttest.Reply("Waiting for the review."),
			agenttest.Call("mcp__os__declare_outcome", map[string]any{"outcome": "succeeded", "message": "answered"}),
			agenttest.Reply("Done."),
		},
	})
	cfg := `{"sandbox": {"enabled": false}, "binary": "` + bin + `", "model": "claude-sonnet-4-5", "playbook": "answer-issue", "base_url": "` + srv.URL + `",
		"prompt": "Answer {{range .Events}}{{.Type}} #{{.Data.issue.number}}{{end}}"}`
	req := b.Request(1)
	req.Config = json.RawMessage(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := b.Exec.Run(ctx, req)
	logSegment(t, b.Dir, "1")
	if err != nil || res.Outcome != executor.Suspended || res.Session == "" || res.Usage == nil {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got := tb.Called(); !slices.Equal(got, []string{"read_context", "wait"}) {
		t.Errorf("first segment called %q", got)
	}

	req = b.Request(2)
	req.Config = json.RawMessage(cfg)
	req.Session = res.Session
	req.Events = []executor.Event{{ID: "ev-2", Seq: 2, Type: "review.done", Source: "operator", Data: json.RawMessage(`{"approved":true}`)}}
	res2, err := b.Exec.Resume(ctx, req)
	logSegment(t, b.Dir, "2")
	if err != nil || res2.Outcome != executor.Succeeded || res2.Session != res.Session {
		t.Fatalf("Resume = %+v, %v", res2, err)
	}
	if got := tb.Called(); !slices.Equal(got, []string{"read_context", "wait", "declare_outcome"}) {
		t.Errorf("calls %q", got)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if !last.Has("text", "Answer issue.opened #42") || !last.Has("text", "review.done from operator") {
		t.Errorf("the resumed conversation lacks the first turn or the waking Event: %+v", last.Items)
	}
	if !reqs[0].Has("text", "Answer the issue.") {
		t.Errorf("the first turn did not start on the playbook: %+v", reqs[0].Items)
	}
	if tb.Refused() != 0 {
		t.Errorf("%d toolbelt requests carried another token", tb.Refused())
	}
	noCanary(t, b.Dir)
}

func logSegment(t *testing.T, dir, epoch string) {
	t.Helper()
	for _, name := range []string{"output.log", "stream.jsonl", "supervisor.log"} {
		b, _ := os.ReadFile(filepath.Join(dir, "segments", epoch, name))
		t.Logf("segment %s %s:\n%s", epoch, name, strings.TrimSpace(string(b)))
	}
}
