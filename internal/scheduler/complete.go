package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Dispositions of a declaration once Complete looked at it.
const (
	DeclarationApplied   = "applied"
	DeclarationDiscarded = "discarded"
)

// Complete applies what the trusted host observed of a segment: its
// result, at epoch, of an execution this daemon holds. It is refused with
// kernel.ErrStaleEpoch for anything but the current live epoch held by
// this owner (the check is the storage fence itself, so a superseded
// attempt can never act). In one transaction it records the artifacts and
// then:
//
//   - a pending declared wait, when the segment ended normally (succeeded
//     or suspended): the Wait is registered and its timeout armed, with
//     the watermark defaulting to the attempt's acknowledged input and a
//     backscan of the events accepted since; a resume-capable executor
//     that suspended parks the execution, any other ends it (finished)
//     and the Work waits;
//   - a pending declared outcome: it replaces the executor's; the
//     execution finishes and the Work ends with the declared outcome;
//   - no declaration: succeeded ends the Work succeeded, unless inputs
//     were queued after the attempt's watermark, in which case the Work is
//     ready again for the next attempt; failed and cancelled end it so;
//     suspended without a declared wait is a failure.
//
// A declared wait whose segment failed follows the failure policy and the
// declaration is discarded. A stopping (cancelled) attempt's result
// records its physical stop instead: the execution finishes cancelled
// with how the segment ended and the exit code the executor saw.
//
// res is what the executor observed: its ExitCode is recorded as seen.
func (s *Scheduler) Complete(ctx context.Context, executionID string, epoch int64, res executor.Result) error {
	return s.complete(ctx, executionID, epoch, res, true)
}

// errUnobservedStop: an executor error ended the observation of a stopping
// attempt, which does not show that its process is gone.
var errUnobservedStop = errors.New("scheduler: the executor lost sight of a stopping attempt; its stop confirms it")

// complete is Complete; observed is false for a result the scheduler made
// up because the executor failed to observe the segment: no exit code is
// recorded then, and a stopping attempt is not confirmed stopped by it.
func (s *Scheduler) complete(ctx context.Context, executionID string, epoch int64, res executor.Result, observed bool) error {
	var exit *int
	if observed {
		exit = &res.ExitCode
	}
	staged := s.stageArtifacts(executionID, res)
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		cur, err := tx.GetExecution(ctx, executionID)
		if errors.Is(err, storage.ErrNotFound) {
			return kernel.ErrExecutionNotFound
		}
		if err != nil {
			return err
		}
		if cur.State == storage.ExecutionStopping && cur.Epoch == epoch && cur.Owner == s.o.Owner {
			if !observed {
				return errUnobservedStop
			}
			if err := s.commitArtifacts(ctx, tx, cur, staged); err != nil {
				return err
			}
			_, err := s.rt.ConfirmStoppedInTx(ctx, tx, executionID, epoch, stopMessage(res), exit)
			return err
		}
		// The fence: nothing below runs unless this is the live epoch.
		exe, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: executionID, Epoch: epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning}, Now: s.now(),
		})
		if errors.Is(err, storage.ErrFenced) {
			return &kernel.Error{Code: kernel.ErrStaleEpoch.Code, Kind: extension.ErrForbidden,
				Message: fmt.Sprintf("epoch %d of execution %s is not the live one; its result is not applied", epoch, executionID)}
		}
		if err != nil {
			return err
		}
		if err := s.commitArtifacts(ctx, tx, exe, staged); err != nil {
			return err
		}
		return s.apply(ctx, tx, exe, res, exit)
	})
	if err != nil {
		for _, st := range staged {
			_ = st.Discard()
		}
	}
	return err
}

func stopMessage(res executor.Result) string {
	if res.Message != "" {
		return "stopped: " + res.Message
	}
	return "stopped"
}

func (s *Scheduler) stageArtifacts(executionID string, res executor.Result) []*artifactStage {
	if s.o.Artifacts == nil {
		return nil
	}
	var out []*artifactStage
	for _, a := range res.Artifacts {
		f, err := os.Open(a.Path)
		if err != nil {
			s.o.Logger.Warn("artifact not readable", "execution", executionID, "name", a.Name, "error", err)
			continue
		}
		st, err := s.o.Artifacts.Stage(s.o.IDs.New(ids.Artifact), f)
		f.Close()
		if err != nil {
			s.o.Logger.Warn("artifact not stored", "execution", executionID, "name", a.Name, "error", err)
			continue
		}
		out = append(out, &artifactStage{Staged: st, meta: a})
	}
	return out
}

type artifactStage struct {
	*storage.Staged
	meta executor.Artifact
}

func (s *Scheduler) commitArtifacts(ctx context.Context, tx storage.Tx, exe storage.Execution, staged []*artifactStage) error {
	for _, st := range staged {
		if _, err := st.Commit(ctx, tx, storage.Artifact{
			Execution: exe.ID, Work: exe.Work, Name: st.meta.Name, MediaType: st.meta.MediaType, CreatedAt: s.now(),
		}); err != nil {
			return err
		}
	}
	return nil
}

// finishExecution ends the live epoch with a result and the exit code the
// executor observed (nil: none was).
func (s *Scheduler) finishExecution(ctx context.Context, tx storage.Tx, exe storage.Execution, r storage.ExecutionResult, res executor.Result, exit *int) error {
	st := storage.ExecutionFinished
	msg := res.Message
	_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
		ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
		State: &st, Result: &r, Message: &msg, ExitCode: exit, Now: s.now(),
	})
	return err
}

func (s *Scheduler) apply(ctx context.Context, tx storage.Tx, exe storage.Execution, res executor.Result, exit *int) error {
	decl, err := tx.GetPendingDeclaration(ctx, exe.ID)
	hasDecl := err == nil
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	var d kernel.Declaration
	if hasDecl {
		if d, err = kernel.ParseDeclaration(decl); err != nil {
			return err
		}
	}
	mark := func(disposition string) error {
		if !hasDecl {
			return nil
		}
		return tx.MarkDeclarationApplied(ctx, &storage.MarkDeclarationAppliedParams{Execution: decl.Execution, Epoch: decl.Epoch, Disposition: disposition, At: s.now()})
	}
	endedWell := res.Outcome == executor.Succeeded || res.Outcome == executor.Suspended

	switch {
	case hasDecl && d.Wait != nil && endedWell:
		ex := s.o.Executors[exe.Executor]
		if res.Outcome == executor.Suspended && ex != nil && ex.Info().Has(executor.CapResume) {
			st := storage.ExecutionParked
			msg := "parked on a declared wait"
			if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
				ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
				State: &st, Message: &msg, ExitCode: exit, Now: s.now(),
			}); err != nil {
				return err
			}
		} else {
			if res.Message == "" {
				res.Message = "ended on a declared wait"
			}
			if err := s.finishExecution(ctx, tx, exe, storage.ResultSucceeded, res, exit); err != nil {
				return err
			}
		}
		waiting := storage.WorkWaiting
		if _, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: exe.Work, FromStates: []storage.WorkState{storage.WorkRunning}, State: &waiting, Now: s.now()}); err != nil {
			return err
		}
		mark0, err := s.inputSeq(ctx, tx, exe)
		if err != nil {
			return err
		}
		if _, err := s.rt.RegisterWaitInTx(ctx, tx, kernel.RegisterWait{
			Work: exe.Work, Execution: exe.ID, Epoch: exe.Epoch, Spec: *d.Wait, DefaultWatermark: mark0, DeclaredAt: decl.DeclaredAt,
		}); err != nil {
			return err
		}
		return mark(DeclarationApplied)

	case hasDecl && d.Outcome != nil:
		r := storage.ExecutionResult(d.Outcome.Outcome)
		if d.Outcome.Message != "" {
			res.Message = d.Outcome.Message
		}
		if err := s.finishExecution(ctx, tx, exe, r, res, exit); err != nil {
			return err
		}
		if _, _, err := s.rt.FinishWorkInTx(ctx, tx, exe.Work, kernel.Finish{State: d.Outcome.Outcome, Message: res.Message, Data: d.Outcome.Data}); err != nil {
			return err
		}
		return mark(DeclarationApplied)
	}

	if err := mark(DeclarationDiscarded); err != nil {
		return err
	}
	switch res.Outcome {
	case executor.Succeeded:
		if err := s.finishExecution(ctx, tx, exe, storage.ResultSucceeded, res, exit); err != nil {
			return err
		}
		w, err := tx.GetWork(ctx, exe.Work)
		if err != nil {
			return err
		}
		if w.InputCount > exe.InputWatermark && w.State == storage.WorkRunning {
			// Input arrived while the attempt ran: the Work goes on.
			ready := storage.WorkReady
			_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{storage.WorkRunning}, State: &ready, Now: s.now()})
			return err
		}
		_, _, err = s.rt.FinishWorkInTx(ctx, tx, exe.Work, kernel.Finish{State: storage.WorkSucceeded, Message: res.Message})
		return err
	case executor.Cancelled:
		if err := s.finishExecution(ctx, tx, exe, storage.ResultCancelled, res, exit); err != nil {
			return err
		}
		_, _, err := s.rt.FinishWorkInTx(ctx, tx, exe.Work, kernel.Finish{State: storage.WorkCancelled, Message: res.Message})
		return err
	case executor.Suspended:
		res.Message = "the segment suspended without a declared wait"
	}
	if res.Message == "" {
		res.Message = fmt.Sprintf("the segment failed (exit code %d)", res.ExitCode)
	}
	if err := s.finishExecution(ctx, tx, exe, storage.ResultFailed, res, exit); err != nil {
		return err
	}
	_, _, err = s.rt.FinishWorkInTx(ctx, tx, exe.Work, kernel.Finish{State: storage.WorkFailed, Message: res.Message})
	return err
}

// inputSeq is the highest acceptance sequence among the inputs the
// attempt acknowledged (the Work's core.work.created when it had none): the
// default watermark of a declared wait. It is the highest, not the last
// position's: a backscanned wake queues an older event behind newer inputs,
// and a watermark below an acknowledged input would let that input satisfy
// the wait again.
func (s *Scheduler) inputSeq(ctx context.Context, tx storage.Tx, exe storage.Execution) (int64, error) {
	w, err := tx.GetWork(ctx, exe.Work)
	if err != nil {
		return 0, err
	}
	created, err := tx.GetEvent(ctx, w.CreatedEvent)
	if err != nil {
		return 0, err
	}
	mark := created.Seq
	for after := int64(0); after < exe.InputWatermark; {
		ins, err := tx.ListInputs(ctx, &storage.ListInputsParams{Work: exe.Work, AfterPosition: after, UntilPosition: exe.InputWatermark, Limit: storage.MaxLimit})
		if err != nil {
			return 0, err
		}
		if len(ins) == 0 {
			break
		}
		for _, in := range ins {
			ev, err := tx.GetEvent(ctx, in.Event)
			if err != nil {
				return 0, err
			}
			mark = max(mark, ev.Seq)
		}
		after = ins[len(ins)-1].Position
	}
	return mark, nil
}

// Declare records a segment's declaration under the fence; it is
// kernel.Runtime.Declare (the toolbelt, which lives in the runtime package,
// calls that directly).
func (s *Scheduler) Declare(ctx context.Context, tx storage.Tx, executionID string, epoch int64, d kernel.Declaration) error {
	return s.rt.Declare(ctx, tx, executionID, epoch, d)
}

// LeaseGuard is kernel.Runtime.LeaseGuard.
func (s *Scheduler) LeaseGuard(ctx context.Context, tx storage.Reader, executionID string, epoch int64, owner string) (storage.Execution, error) {
	return s.rt.LeaseGuard(ctx, tx, executionID, epoch, owner)
}
