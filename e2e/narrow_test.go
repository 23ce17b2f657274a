package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An applied configuration narrows a running execution's authority at
// once: the toolbelt asks the active ceiling on every call.
func TestApplyNarrowsALiveTokenAtOnce(t *testing.T) {
	e := newEnv(t)
	fifo, mark := e.fifoJob("", "")
	e.start()
	w := e.createWork("t")
	waitStarted(t, mark, 1)
	exes := e.executions(w.ID)
	if len(exes) != 1 {
		t.Fatalf("executions %+v", exes)
	}
	runDir := filepath.Join(e.state, "runs", runKey(exes[0].ID))
	osEnv := []string{"OS_ENDPOINT=" + filepath.Join(runDir, "toolbelt.sock"), "OS_TOKEN_FILE=" + filepath.Join(runDir, "token", "token")}
	if code, out, stderr := e.run(bins.os, osEnv, "call", "read_context"); code != 0 || !strings.Contains(out, w.ID) {
		t.Fatalf("read_context before the apply: exit %d %q %q", code, out, stderr)
	}

	cfg, err := os.ReadFile(filepath.Join(e.state, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	narrowed := strings.ReplaceAll(string(cfg), `"declare_outcome", "read_context", "emit"`, `"declare_outcome", "emit"`)
	if narrowed == string(cfg) {
		t.Fatal("the test's config did not change")
	}
	var applied struct {
		Generation int64 `json:"generation"`
	}
	e.must("POST", "/v1/config/apply", map[string]any{"config": json.RawMessage(narrowed), "expected_generation": 1}, key(), &applied)
	if applied.Generation != 2 {
		t.Fatalf("apply: generation %d, want 2", applied.Generation)
	}
	if code, _, stderr := e.run(bins.os, osEnv, "call", "read_context"); code != 1 || !strings.Contains(stderr, "forbidden") {
		t.Fatalf("read_context after the apply: exit %d %q, want 1 forbidden", code, stderr)
	}
	release(t, fifo, 0)
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
}
