package scheduler_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// withShell adds the real shell executor, supervised by this test binary,
// and binding "bs", whose command tells the test it runs (by writing to
// the FIFO) and then sleeps until it is stopped.
func withShell(t *testing.T, fifo string) func(*scheduler.Options) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shell.New(shell.Options{Supervisor: self, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"command": []string{"sh", "-c", `echo running > "$READY"; exec sleep 600`},
		"env":     map[string]string{"READY": fifo},
	})
	return func(o *scheduler.Options) {
		o.Executors["shell"] = sh
		o.StopGrace = 30 * time.Second
		bindings := o.Bindings
		o.Bindings = func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			if q.Binding == "bs" {
				return scheduler.Binding{Executor: "shell", Config: cfg, Generation: 1}, nil
			}
			return bindings(ctx, q)
		}
	}
}

// awaitRunning blocks until the command wrote to the FIFO, with a generous
// failure guard.
func awaitRunning(t *testing.T, fifo string) {
	t.Helper()
	read := make(chan error, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		if err == nil && strings.TrimSpace(string(b)) != "running" {
			err = os.ErrInvalid
		}
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command never started")
	}
}

// An operator's cancel of a running shell attempt, of the execution or of
// its Work, records what the host observed: the execution finishes
// cancelled, says who cancelled it and how the command ended, keeps the
// exit code the executor saw (-1: killed by a signal) and its log; nothing
// of the executor's result is thrown away.
func TestCancelOfARunningShellAttemptRecordsItsEnd(t *testing.T) {
	for _, what := range []string{"execution", "work"} {
		t.Run(what, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "ready")
			if err := unix.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			logs := make(logTap, 1024)
			h := newHarness(t, func(o *scheduler.Options) {
				withShell(t, fifo)(o)
				o.Logger = slog.New(logs)
			})
			ctx := context.Background()
			w := h.create("bs")
			h.tick()
			awaitRunning(t, fifo)
			exes, _ := h.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: w.ID})
			if len(exes) != 1 {
				t.Fatalf("executions = %+v", exes)
			}
			id := exes[0].ID
			var err error
			if what == "execution" {
				_, err = h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: id})
			} else {
				_, err = h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID})
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := h.execution(id); got.State != storage.ExecutionStopping || got.ExitCode != nil {
				t.Fatalf("a cancelled attempt before its stop: %+v", got)
			}
			h.tick() // stops the process
			h.waitEpoch(id, 1)
			h.tick() // applies its end
			exe := h.execution(id)
			if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled || exe.Epoch != 1 {
				t.Fatalf("execution = %+v", exe)
			}
			if exe.ExitCode == nil || *exe.ExitCode != -1 {
				t.Fatalf("exit code %v, want -1 (killed by a signal) as the executor saw it", exe.ExitCode)
			}
			if !strings.Contains(exe.Message, "cancelled") || !strings.Contains(exe.Message, "operator:ann") || !strings.Contains(exe.Message, "SIGTERM") {
				t.Fatalf("message %q does not say who cancelled it and how it ended", exe.Message)
			}
			if arts, _ := h.store.ListArtifacts(ctx, &storage.ListArtifactsParams{Execution: id}); len(arts) != 1 || arts[0].Name != "log" {
				t.Fatalf("artifacts = %+v", arts)
			}
			got := h.work(w.ID)
			if what == "execution" && (got.State != storage.WorkReady || got.BlockedReason != kernel.HoldOperatorCancelled) ||
				what == "work" && got.State != storage.WorkCancelled {
				t.Fatalf("work = %+v", got)
			}
			// Fencing holds: the cancelled epoch can never act again.
			mustCode(t, h.s.Complete(ctx, id, 1, executor.Result{Outcome: executor.Succeeded}), "stale_epoch")
			if _, err := h.rt.LeaseGuard(ctx, h.store, id, 1, h.owner); err == nil {
				t.Fatal("the lease guard admits the cancelled epoch")
			}
			// Nothing of the segment's end was dropped as superseded.
			h.s.Close()
			for len(logs) > 0 {
				if r := <-logs; strings.Contains(r.Message, "superseded") || r.Level >= slog.LevelWarn {
					t.Fatalf("logged %q (level %v)", r.Message, r.Level)
				}
			}
		})
	}
}
