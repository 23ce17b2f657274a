package codex

import (
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor/agentrun/agentruntest"
)

// The bench the tests share with the other agent executor.
const (
	apiKeyCanary = agentruntest.APIKeyCanary
	tokenCanary  = agentruntest.TokenCanary
	guard        = agentruntest.Guard
	parkGrace    = agentruntest.ParkGrace
)

var (
	start     = agentruntest.Start
	await     = agentruntest.Await
	noCanary  = agentruntest.NoCanary
	groupGone = agentruntest.GroupGone
	mustRun   = agentruntest.MustRun
	write     = agentruntest.Write
)

type bundle = agentruntest.Bench

var theAgent = agentruntest.Agent{Binary: "codex", Model: "gpt-5-codex", KeyVar: "OPENAI_API_KEY", New: New}

func setup(t *testing.T) *bundle {
	t.Helper()
	return agentruntest.NewBench(t, theAgent)
}
