package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// An agent executor of this release describes itself and runs nothing:
// Run and Resume are ErrNotImplemented naming the executor, Recover finds
// nothing, Stop has nothing to stop.
func TestExecutorRunsNothing(t *testing.T) {
	info := executor.Info{Name: "agent-x", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt, executor.CapResume}}
	e := Executor{Spec: Spec{Executor: "agent-x", Binary: "x"}, Desc: info}
	if e.Info().Name != "agent-x" || !e.Info().Has(executor.CapResume) || e.Info().Transport != executor.TransportOS {
		t.Fatalf("info %+v", e.Info())
	}
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"run":    func() error { _, err := e.Run(ctx, executor.RunRequest{}); return err },
		"resume": func() error { _, err := e.Resume(ctx, executor.RunRequest{}); return err },
	} {
		err := call()
		if !errors.Is(err, ErrNotImplemented) || !strings.Contains(err.Error(), "agent-x") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := e.Recover(ctx, executor.RunRequest{}); !errors.Is(err, executor.ErrGone) {
		t.Fatalf("recover: %v", err)
	}
	if err := e.Stop(ctx, executor.RunRequest{}, 0); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
