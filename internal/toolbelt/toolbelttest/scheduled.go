package toolbelttest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// ScheduledCases are the cases that need attempts run by a scheduler
// (a Scheduled driver): adoption, resume, completion and recovery of a
// declared segment, each through the scheduler's own paths.
func ScheduledCases() []Case {
	return []Case{
		{"adoption_supersession", caseAdoption},
		{"resume_issues_fresh_token", caseResume},
		{"finished_execution_token_refused", caseFinished},
		{"declaration_survives_recovery", caseDeclarationSurvives},
	}
}

// superseded requires that b's token replaced a's: fresh, for the next
// epoch, the only live token of the execution (a's record revoked), a's
// refused with the bare forbidden and b's able to emit.
func superseded(f *Fixture, a, b *Attempt, how string) error {
	if b.Token == a.Token || b.TokenID == a.TokenID {
		return fmt.Errorf("%s did not issue a fresh token", how)
	}
	if b.Execution.ID != a.Execution.ID || b.Execution.Epoch != a.Execution.Epoch+1 {
		return fmt.Errorf("%s gave %s@%d after %s@%d, want the same execution's next epoch", how, b.Execution.ID, b.Execution.Epoch, a.Execution.ID, a.Execution.Epoch)
	}
	if err := onlyLiveToken(f, b); err != nil {
		return fmt.Errorf("after %s: %w", how, err)
	}
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.stale"}`, "")), "the token of the epoch before "+how); err != nil {
		return err
	}
	if _, err := f.Call(b.Token, "emit", `{"type":"test.fresh"}`, ""); err != nil {
		return fmt.Errorf("the token issued at %s cannot emit: %w", how, err)
	}
	evs, err := f.Events("test.stale")
	if err != nil || len(evs) != 0 {
		return fmt.Errorf("the superseded token emitted %d events (%v)", len(evs), err)
	}
	return nil
}

// caseAdoption: the daemon holding an attempt stops, and another daemon
// (another owner) adopts it at once with RecoverOrphans: the executor's
// Recover gets a fresh token for the next epoch, issuing it revoked the
// old one, and only the new one acts.
func caseAdoption(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return fmt.Errorf("the claimed attempt's token cannot emit: %w", err)
	}
	b, err := f.Adopt(a)
	if err != nil {
		return err
	}
	if b.Kind != "recover" || b.Execution.Owner != f.Env.Owner || b.Execution.Owner == a.Execution.Owner {
		return fmt.Errorf("adoption gave a %s segment held by %s; want a recover held by the new daemon", b.Kind, b.Execution.Owner)
	}
	return superseded(f, a, b, "adoption")
}

// caseResume: a resume-capable executor that suspends on a declared wait
// parks the execution, whose token is refused while it is parked; when the
// wait times out, the scheduler resumes the execution with the next epoch
// and hands Resume a fresh token, revoking the parked epoch's.
func caseResume(f *Fixture) error {
	w, err := f.Create(Resumable)
	if err != nil {
		return err
	}
	a, err := f.Claim(w)
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "wait", `{"types":["test.reply"],"timeout":"10m"}`, ""); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	parked, err := f.Finish(a, executor.Result{Outcome: executor.Suspended})
	if err != nil {
		return err
	}
	if parked.Execution.State != storage.ExecutionParked || parked.Work.State != storage.WorkWaiting {
		return fmt.Errorf("a suspended resumable segment left its execution %s and Work %s; want parked and waiting", parked.Execution.State, parked.Work.State)
	}
	if err := wantForbidden(second(f.Call(parked.Token, "emit", `{"type":"test.parked"}`, "")), "the parked execution's token"); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	f.Env.Clock.Advance(11 * time.Minute) // past the wait's timeout
	b, err := f.Resume(parked)
	if err != nil {
		return err
	}
	if b.Kind != "resume" {
		return fmt.Errorf("the woken Work started a %s segment, want resume", b.Kind)
	}
	if err := superseded(f, parked, b, "resume"); err != nil {
		return err
	}
	done, err := f.Finish(b, executor.Result{Outcome: executor.Succeeded, Message: "exit 0"})
	if err != nil {
		return err
	}
	if done.Work.State != storage.WorkSucceeded {
		return fmt.Errorf("the resumed segment's success left the Work %s", done.Work.State)
	}
	return nil
}

// caseFinished: once the scheduler applied a segment's end, its token is
// refused (the bare forbidden) for calls and reads alike.
func caseFinished(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return fmt.Errorf("the claimed attempt's token cannot emit: %w", err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	done, err := f.Finish(a, executor.Result{Outcome: executor.Succeeded, Message: "exit 0"})
	if err != nil {
		return err
	}
	if done.Execution.State != storage.ExecutionFinished || done.Work.State != storage.WorkSucceeded {
		return fmt.Errorf("after the segment succeeded the execution is %s and the Work %s", done.Execution.State, done.Work.State)
	}
	for _, tok := range []string{a.Token, done.Token} {
		if err := wantForbidden(second(f.Call(tok, "emit", `{"type":"test.two"}`, "")), "emit with the finished execution's token"); err != nil {
			return err
		}
	}
	if err := wantForbidden(second(f.TB.Guidance(context.Background(), done.Token, extension.Assertions{})), "guidance with the finished execution's token"); err != nil {
		return err
	}
	if evs, err := f.Events("test.two"); err != nil || len(evs) != 0 {
		return fmt.Errorf("the finished execution emitted %d events (%v)", len(evs), err)
	}
	return nil
}

// caseDeclarationSurvives: a segment declares a wait and its daemon loses
// the lease before the segment ends. The recovered epoch gets a fresh
// token whose authority is still released (authority_released), and the
// Complete of the recovered epoch applies the earlier epoch's declaration.
func caseDeclarationSurvives(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "wait", `{"types":["test.reply"],"timeout":"30m"}`, ""); err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	d, err := f.Env.Store.GetPendingDeclaration(context.Background(), a.Execution.ID)
	if err != nil {
		return fmt.Errorf("no pending declaration after wait: %w", err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	b, err := f.Recover(a)
	if err != nil {
		return err
	}
	if b.Token == a.Token || b.Execution.Epoch != a.Execution.Epoch+1 {
		return errors.New("recovery did not issue a fresh token for the next epoch")
	}
	if err := want(second(f.Call(b.Token, "emit", `{"type":"test.late"}`, "")), extension.ErrAuthorityReleased, "the recovered epoch's token after the earlier epoch declared"); err != nil {
		return err
	}
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.late"}`, "")), "the superseded epoch's token"); err != nil {
		return err
	}
	done, err := f.Finish(b, executor.Result{Outcome: executor.Succeeded, Message: "exit 0"})
	if err != nil {
		return err
	}
	if done.Execution.Epoch != b.Execution.Epoch {
		return fmt.Errorf("the scheduler completed epoch %d, want the recovered %d", done.Execution.Epoch, b.Execution.Epoch)
	}
	if done.Work.State != storage.WorkWaiting {
		return fmt.Errorf("after the recovered segment ended the Work is %s, want waiting on the earlier epoch's declaration", done.Work.State)
	}
	return activeWait(f, done, d, "test.reply", 30*time.Minute)
}
