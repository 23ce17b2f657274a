package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// A shell binding that grants no operation runs without a toolbelt: no
// token is issued, and the command has neither OS_ENDPOINT nor
// OS_TOKEN_FILE. A binding that grants one only through a grant still gets
// both, as does one with operations of its own.
func TestBindingWithoutOperationsRunsWithoutAToolbelt(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	script := `echo "endpoint=${OS_ENDPOINT:-none} token=${OS_TOKEN_FILE:-none}"`
	shellJob := map[string]any{"command": []string{"sh", "-c", script}}
	cfg := map[string]any{
		"version": 1,
		"scopes": map[string]any{"t": map[string]any{
			"authorization": map[string]any{"operations": []string{"emit"}},
			"bindings": map[string]any{
				"bare":    map[string]any{"executor": "shell", "config": shellJob},
				"granted": map[string]any{"executor": "shell", "config": shellJob, "grants": map[string]any{"g": map[string]any{"operations": []string{"emit"}}}},
				"own":     map[string]any{"executor": "shell", "config": shellJob, "operations": []string{"emit"}},
			},
		}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(state, ConfigFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	for binding, toolbelt := range map[string]bool{"bare": false, "granted": true, "own": true} {
		w := r.terminal(r.create("t", binding).ID)
		if w.State != storage.WorkSucceeded {
			t.Fatalf("%s: Work ended %s (%s)\nlogs:\n%s", binding, w.State, w.OutcomeMessage, r.logs)
		}
		exe := r.executions(w.ID)[0]
		out := r.log(exe)
		toks, err := r.d.store.ListExecutionTokens(context.Background(), exe.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !toolbelt {
			if !strings.Contains(out, "endpoint=none token=none") || len(toks) != 0 {
				t.Errorf("%s: log %q, %d tokens; want no endpoint, no token file and no token", binding, out, len(toks))
			}
			continue
		}
		if strings.Contains(out, "=none") || !strings.Contains(out, "toolbelt.sock") || len(toks) != 1 {
			t.Errorf("%s: log %q, %d tokens; want an endpoint, a token file and one token", binding, out, len(toks))
		}
	}
}
