package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// An execution shows the exit code the daemon observed, and "-" (nothing,
// in JSON) when it observed none: a stop it confirmed without the
// process's own result must not read as exit code 0.
func TestExecutionsShowOnlyAnObservedExitCode(t *testing.T) {
	s := serveStack(t)
	ctx := context.Background()
	finish := func(exe string, code *int) string {
		t.Helper()
		id := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
		err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
			now := s.Clock.Now()
			if _, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: exe, Work: id, Scope: "setup", Binding: "shell",
				Executor: "shell", Generation: 1, Owner: "d", LeaseExpiresAt: now.Add(time.Minute), Deadline: now.Add(time.Hour), CreatedAt: now}); err != nil {
				return err
			}
			st, res := storage.ExecutionFinished, storage.ResultCancelled
			_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exe, Epoch: 1, State: &st, Result: &res, ExitCode: code, Now: now})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	three := 3
	unknown := finish("exe_unknown", nil)
	finish("exe_three", &three)

	if out := mustRun(t, 0, "executions", "get", "exe_unknown"); !regexp.MustCompile(`(?m)^exit code\s+-$`).MatchString(out) {
		t.Errorf("get of an execution with no observed exit said %q", out)
	}
	if out := mustRun(t, 0, "executions", "get", "exe_three"); !regexp.MustCompile(`(?m)^exit code\s+3$`).MatchString(out) {
		t.Errorf("get of an execution that exited 3 said %q", out)
	}
	if out := mustRun(t, 0, "executions", "list", "--work", unknown); !regexp.MustCompile(`exe_unknown\s.*\scancelled\s+-\s+1\s`).MatchString(out) {
		t.Errorf("list said %q", out)
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, 0, "executions", "get", "exe_unknown", "--json")), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["exit_code"]; ok || raw["result"] != "cancelled" {
		t.Errorf("--json of an execution with no observed exit = %v", raw)
	}
}

// An agent execution shows the session it continues and what it consumed;
// an execution without them shows neither, and its JSON has no such
// members.
func TestExecutionsGetShowsSessionAndUsage(t *testing.T) {
	s := serveStack(t)
	ctx := context.Background()
	insert := func(exe string, session *string, usage *storage.Usage) {
		t.Helper()
		id := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
		err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
			now := s.Clock.Now()
			if _, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: exe, Work: id, Scope: "setup", Binding: "shell",
				Executor: "shell", Generation: 1, Owner: "d", LeaseExpiresAt: now.Add(time.Minute), Deadline: now.Add(time.Hour), CreatedAt: now}); err != nil {
				return err
			}
			_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: exe, Epoch: 1, Session: session, AddUsage: usage, Now: now})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	session := "sess-42"
	insert("exe_agent", &session, &storage.Usage{InputTokens: 1205, OutputTokens: 340, CacheReadTokens: 56, CacheCreationTokens: 78, CostUSD: 0.125, Turns: 3})
	insert("exe_plain", nil, nil)

	out := mustRun(t, 0, "executions", "get", "exe_agent")
	for _, want := range []string{
		`(?m)^session\s+sess-42$`,
		`(?m)^tokens\s+1205 input, 340 output, 56 cache read, 78 cache creation$`,
		`(?m)^turns\s+3$`,
		`(?m)^cost\s+0\.1250 USD \(the agent's estimate\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("get of an agent execution lacks %s: %q", want, out)
		}
	}
	var raw struct {
		Session string         `json:"session"`
		Usage   map[string]any `json:"usage"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "executions", "get", "exe_agent", "--json")), &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Session != session || raw.Usage["input_tokens"] != 1205.0 || raw.Usage["cost_usd"] != 0.125 || raw.Usage["turns"] != 3.0 {
		t.Errorf("--json of an agent execution = %+v", raw)
	}

	if out := mustRun(t, 0, "executions", "get", "exe_plain"); regexp.MustCompile(`(?m)^(session|tokens|turns|cost)\s`).MatchString(out) {
		t.Errorf("get of an execution without a session or usage shows them: %q", out)
	}
	var plain map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, 0, "executions", "get", "exe_plain", "--json")), &plain); err != nil {
		t.Fatal(err)
	}
	if _, ok := plain["session"]; ok {
		t.Errorf("--json of an execution without a session has one: %v", plain)
	}
	if _, ok := plain["usage"]; ok {
		t.Errorf("--json of an execution without usage has it: %v", plain)
	}
}
