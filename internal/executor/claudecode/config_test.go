package claudecode

import (
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

func TestConfigDefaultsAndPlaybook(t *testing.T) {
	raw := []byte(`{"model": "claude-sonnet-4-5", "prompt": "p", "playbook": "answer-issue"}`)
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Binary != "claude" || cfg.Secrets["api_key"] != "ANTHROPIC_API_KEY" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if got := Namer.PlaybookName(raw); got != "answer-issue" {
		t.Fatalf("playbook %q", got)
	}
	if got := Namer.PlaybookName([]byte(`{"model": "m"}`)); got != "" {
		t.Fatalf("a config that does not parse names no playbook, got %q", got)
	}
	var ce *agent.ConfigError
	if err := ValidateConfig([]byte(`{"prompt": "p"}`)); !errors.As(err, &ce) || ce.Problems[0].Pointer != "/model" {
		t.Fatalf("got %v", err)
	}
}
