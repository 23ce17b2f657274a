package codex

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent/agenttest"
	"github.com/open-conduit/open-conduit/internal/executor/agentrun/agentruntest"
)

// TestTheRealAgentSeesARefusedWait: a wait the toolbelt refuses reaches
// the agent as a tool error (the model server sees it), and the segment
// does not park: it ends by the agent's own result.
func TestTheRealAgentSeesARefusedWait(t *testing.T) {
	bin := agenttest.Codex(t)
	b := setup(t)
	agentruntest.BuildOS(t, b.Ctx.ToolbeltDir)
	tb := agentruntest.NewToolbelt(t, b.Ctx.ToolbeltEndpoint, tokenCanary)
	tb.Refuse("wait")
	srv := agenttest.OpenAI(t, agenttest.Options{
		APIKey: apiKeyCanary, Model: "gpt-5-codex",
		Script: []agenttest.Step{agenttest.Call("mcp__os__wait", nil), agenttest.Reply("The wait was refused.")},
	})
	req := b.Request(1)
	req.Config = json.RawMessage(`{"sandbox": {"enabled": false}, "binary": "` + bin + `", "model": "gpt-5-codex", "base_url": "` + srv.URL + `/v1", "prompt": "wait"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := b.Exec.Run(ctx, req)
	logSegment(t, b.Dir, "1")
	if err != nil || res.Outcome != executor.Succeeded {
		t.Fatalf("Run = %+v, %v; want it to end by the agent's result, not parked", res, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !reqs[1].Has("tool_result", "refused") {
		t.Errorf("the model never saw the refusal: %+v", reqs)
	}
}
