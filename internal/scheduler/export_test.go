package scheduler

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The steps of applying a completed segment, for the tests of each step
// alone.

// PathOf names apply's choice: result, wait or outcome.
func PathOf(d kernel.Declaration, ok bool, res executor.Result) string {
	return [...]string{applyResult: "result", applyWait: "wait", applyOutcome: "outcome"}[pathOf(d, ok, res)]
}

// Parks is whether a declared wait parks the execution.
func Parks(res executor.Result, ex executor.Executor) bool { return parks(res, ex) }

// ExecutorVerdict is what the executor's own result makes of the
// execution and the Work.
func ExecutorVerdict(res executor.Result) (storage.ExecutionResult, storage.WorkState, string) {
	return executorVerdict(res)
}

// GoesOn is whether a succeeded Work is ready again.
func GoesOn(w storage.Work, exe storage.Execution) bool { return goesOn(w, exe) }

// Fence is the fence step.
func (s *Scheduler) Fence(ctx context.Context, tx storage.Tx, executionID string, epoch int64) (storage.Execution, bool, error) {
	return s.fence(ctx, tx, executionID, epoch)
}

// ReadDeclaration is the declaration step.
func ReadDeclaration(ctx context.Context, tx storage.Tx, exe storage.Execution) (kernel.Declaration, bool, error) {
	d, ok, err := readDeclaration(ctx, tx, exe)
	return d.d, ok, err
}

// ApplyWait reads the segment's pending declaration and applies it as a
// declared wait.
func (s *Scheduler) ApplyWait(ctx context.Context, tx storage.Tx, exe storage.Execution, res executor.Result) error {
	d, _, err := readDeclaration(ctx, tx, exe)
	if err != nil {
		return err
	}
	return s.applyWait(ctx, tx, exe, d, res, &res.ExitCode)
}

// QueuedLaunchMarks is how many launch marks wait for the batch being
// written.
func (s *Scheduler) QueuedLaunchMarks() int {
	s.marks.mu.Lock()
	defer s.marks.mu.Unlock()
	return len(s.marks.queue)
}

// SetMaxDirSweep sets how many directories one SweepExecutionDirs pass
// removes, until the test ends.
func SetMaxDirSweep(t interface{ Cleanup(func()) }, n int) {
	old := maxDirSweep
	maxDirSweep = n
	t.Cleanup(func() { maxDirSweep = old })
}
