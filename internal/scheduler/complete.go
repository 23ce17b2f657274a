package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

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
//     backscan of the events accepted since; the segment of a
//     resume-capable executor parks the execution, any other ends it
//     (finished) and the Work waits;
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
// res is what the executor observed: its ExitCode is recorded as seen,
// and the agent session it names and the usage it reports are recorded
// on the execution whatever path it takes (recordAgent).
//
// The steps, in order (see complete and apply): the artifacts are staged
// outside storage; then, in one transaction, fence (the segment looked up,
// the fence checked), and confirmStop for a stopping attempt, or the
// artifacts committed and apply: readDeclaration, then applyWait,
// applyOutcome or applyExecutorResult, each ending with the declaration
// marked. A failed transaction discards the staged artifacts.
func (s *Scheduler) Complete(ctx context.Context, executionID string, epoch int64, res executor.Result) error {
	return s.complete(ctx, executionID, epoch, res, true)
}

// errUnobservedStop: an executor error ended the observation of a stopping
// attempt, which does not show that its process is gone.
var errUnobservedStop = errors.New("scheduler: the executor lost sight of a stopping attempt; its stop confirms it")

// complete is Complete; observed is false for a result the scheduler made
// up because the executor failed to observe the segment: no exit code is
// recorded then, and a stopping attempt is not confirmed stopped by it.
//
// Its steps, in order: the artifacts are staged outside storage; then, in
// one transaction, fence looks the segment up and checks the fence, and
// either confirmStop records a stopping attempt's physical stop, or the
// artifacts are committed and apply applies the result. A refused or
// failed transaction discards the staged artifacts.
func (s *Scheduler) complete(ctx context.Context, executionID string, epoch int64, res executor.Result, observed bool) error {
	c := s.stageCompletion(executionID, epoch, res, observed)
	s.syncStaged([]*completion{c})
	err := s.store.WithTx(ctx, func(tx storage.Tx) error { return s.completeInTx(ctx, tx, c) })
	if err != nil {
		c.discard()
		return err
	}
	c.done()
	s.logOutcome(ctx, c)
	return nil
}

// completion is one segment's result with its artifacts staged, ready to
// be applied in a transaction (completeInTx), alone or with the other
// results of a round (see ApplyResults).
type completion struct {
	executionID string
	epoch       int64
	res         executor.Result
	observed    bool
	staged      []*artifactStage
	// ended is what its transaction left of the execution and its Work,
	// when the transaction still kept both rows (storage.Keeper): what
	// logOutcome says once it has committed, without reading them again.
	ended *ended
}

// ended is an attempt's execution and Work as its completion left them.
type ended struct {
	exe  storage.Execution
	work storage.Work
}

func (s *Scheduler) stageCompletion(executionID string, epoch int64, res executor.Result, observed bool) *completion {
	return &completion{executionID: executionID, epoch: epoch, res: res, observed: observed, staged: s.stageArtifacts(executionID, res)}
}

// syncStaged makes the names of the completions' staged artifacts durable
// before any of their metadata commits: one sync of the artifact directory
// for the whole batch (their bytes were synced when staged). When it
// fails, the artifacts are dropped (as one that could not be staged is)
// and the completions still apply.
func (s *Scheduler) syncStaged(cs []*completion) {
	staged := false
	for _, c := range cs {
		staged = staged || len(c.staged) > 0
	}
	if !staged {
		return
	}
	if err := s.o.Artifacts.SyncNames(); err != nil {
		s.o.Logger.Warn("artifacts not stored", "error", err)
		for _, c := range cs {
			c.discard()
			c.staged = nil
		}
	}
}

// discard drops the staged artifacts of a completion that did not commit.
func (c *completion) discard() {
	for _, st := range c.staged {
		_ = st.Discard()
	}
}

// done releases what staging kept outside storage once the completion
// committed (the spools of bytes that went into the database).
func (c *completion) done() {
	for _, st := range c.staged {
		_ = st.Done()
	}
}

// completeInTx is complete's transaction: fence, then confirmStop or the
// artifacts committed and apply.
func (s *Scheduler) completeInTx(ctx context.Context, tx storage.Tx, c *completion) error {
	c.ended = nil
	if err := s.completeSteps(ctx, tx, c); err != nil {
		return err
	}
	if k, ok := tx.(storage.Keeper); ok {
		exe, okE := k.KeptExecution(c.executionID)
		if okE {
			if w, okW := k.KeptWork(exe.Work); okW {
				c.ended = &ended{exe: exe, work: w}
			}
		}
	}
	return nil
}

// completeSteps is completeInTx's work: the fence, then the stop
// confirmed or the artifacts committed and the result applied.
func (s *Scheduler) completeSteps(ctx context.Context, tx storage.Tx, c *completion) error {
	var exit *int
	if c.observed {
		exit = &c.res.ExitCode
	}
	// One read says whether this is still the live epoch, whether the
	// segment declared, and brings its Work (kept for the steps below).
	// A running attempt of this owner at the epoch, the usual case, goes
	// on from it: every path below writes the execution fenced as the
	// fence would (apply's first write is the execution's own, at its
	// epoch, by this owner), and a batch runs alone on either engine, so
	// nothing changes it between this read and that write. Anything else
	// takes the fence.
	g, err := tx.GetCallGuard(ctx, c.executionID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	live := err == nil && liveAttempt(g.Execution, c.epoch, s.o.Owner)
	exe, stopping := g.Execution, false
	if !live {
		if exe, stopping, err = s.fence(ctx, tx, c.executionID, c.epoch); err != nil {
			return err
		}
	}
	if c.observed {
		if exe, err = s.recordAgent(ctx, tx, exe, c.res); err != nil {
			return err
		}
	}
	if stopping {
		return s.confirmStop(ctx, tx, exe, c.staged, c.res, exit, c.observed)
	}
	if err := s.commitArtifacts(ctx, tx, exe, c.staged); err != nil {
		return err
	}
	if !live {
		// The fence wrote the execution: read the guard after it.
		if g, err = tx.GetCallGuard(ctx, exe.ID); err != nil {
			return err
		}
		exe = g.Execution
	}
	return s.apply(ctx, tx, exe, c.res, exit, g.Declared)
}

// liveAttempt reports whether exe is running at epoch and held by owner
// ("" for any), the condition of the fence's update.
func liveAttempt(exe storage.Execution, epoch int64, owner string) bool {
	return exe.State == storage.ExecutionRunning && exe.Epoch == epoch && (owner == "" || exe.Owner == owner)
}

// logOutcome says at INFO, once the completion committed, what became of
// the attempt and of its Work, with their ids: an operator reading the
// daemon's log sees every attempt end and every Work that succeeded,
// failed (with its message), was cancelled or is held, and why. It reads
// the records as the committed transaction left them (completion.ended),
// else reads them; a read that fails only costs the line.
func (s *Scheduler) logOutcome(ctx context.Context, c *completion) {
	var exe storage.Execution
	var w storage.Work
	if c.ended != nil {
		exe, w = c.ended.exe, c.ended.work
	} else {
		var err error
		if exe, err = s.store.GetExecution(ctx, c.executionID); err != nil {
			return
		}
		if w, err = s.store.GetWork(ctx, exe.Work); err != nil {
			return
		}
	}
	attrs := []any{"work", w.ID, "execution", exe.ID, "epoch", exe.Epoch, "scope", w.Scope, "binding", w.Binding,
		"attempt", exe.State, "work_state", w.State}
	if exe.Result != "" {
		attrs = append(attrs, "result", exe.Result)
	}
	if exe.ExitCode != nil {
		attrs = append(attrs, "exit_code", *exe.ExitCode)
	}
	switch {
	case w.Held():
		s.o.Logger.Info("attempt ended; work held", append(attrs, "reason", w.BlockedReason)...)
	case w.State.Terminal():
		s.o.Logger.Info("attempt ended; work "+string(w.State), append(attrs, "message", w.OutcomeMessage)...)
	default:
		s.o.Logger.Info("attempt ended", attrs...)
	}
}

// fence is the first step of complete: the segment looked up and the
// fence checked. It returns the execution and whether it is this owner's
// stopping attempt at epoch (whose result is its physical stop); else the
// running execution at epoch held by this owner, after the fenced update
// (kernel.ErrStaleEpoch when that is not the live epoch: nothing after
// runs then), or kernel.ErrExecutionNotFound.
//
// completeSteps takes it only when its guard read does not show the live
// attempt (the usual case needs no fence of its own: see there). Its
// fenced update comes first; only when it finds nothing to change is the
// execution read, to tell a stopping attempt (or a missing execution)
// from a stale epoch.
func (s *Scheduler) fence(ctx context.Context, tx storage.Tx, executionID string, epoch int64) (storage.Execution, bool, error) {
	// The fence: nothing below runs unless this is the live epoch.
	exe, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
		ID: executionID, Epoch: epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning}, Now: s.now(),
	})
	if !errors.Is(err, storage.ErrFenced) && !errors.Is(err, storage.ErrNotFound) {
		return exe, false, err
	}
	cur, err := tx.GetExecution(ctx, executionID)
	if errors.Is(err, storage.ErrNotFound) {
		return cur, false, kernel.ErrExecutionNotFound
	}
	if err != nil {
		return cur, false, err
	}
	if cur.State == storage.ExecutionStopping && cur.Epoch == epoch && cur.Owner == s.o.Owner {
		return cur, true, nil
	}
	return cur, false, &kernel.Error{Code: kernel.ErrStaleEpoch.Code, Kind: extension.ErrForbidden,
		Message: fmt.Sprintf("epoch %d of execution %s is not the live one; its result is not applied", epoch, executionID)}
}

// MaxSessionLength bounds the agent session a result names: a longer
// one, or one with a byte outside printable ASCII, is not recorded.
const MaxSessionLength = 256

// recordAgent records on the fenced execution what an agent's segment
// reported, whatever becomes of the execution: the session a result names
// replaces the recorded one, and its usage is added to the totals (a
// count below zero, a cost below zero or not finite, counts as zero).
// A result naming neither changes nothing.
func (s *Scheduler) recordAgent(ctx context.Context, tx storage.Tx, exe storage.Execution, res executor.Result) (storage.Execution, error) {
	p := &storage.UpdateExecutionParams{ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{exe.State}, Now: s.now()}
	if res.Session != "" {
		if validSession(res.Session) {
			p.Session = &res.Session
		} else {
			s.o.Logger.Warn("the session a segment reported is not recorded: too long or not printable", "execution", exe.ID, "epoch", exe.Epoch, "length", len(res.Session))
		}
	}
	p.AddUsage = usageOf(res.Usage)
	if p.Session == nil || *p.Session == exe.Session {
		p.Session = nil
		if p.AddUsage == nil {
			return exe, nil
		}
	}
	return tx.UpdateExecution(ctx, p)
}

func validSession(v string) bool {
	if len(v) > MaxSessionLength {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// usageOf is an executor's usage as storage records it (nil: none).
func usageOf(u *executor.Usage) *storage.Usage {
	if u == nil {
		return nil
	}
	count := func(n int64) int64 { return max(n, 0) }
	cost := u.CostUSD
	if math.IsNaN(cost) || math.IsInf(cost, 0) || cost < 0 {
		cost = 0
	}
	return &storage.Usage{
		InputTokens: count(u.InputTokens), OutputTokens: count(u.OutputTokens), CacheReadTokens: count(u.CacheReadTokens),
		CacheCreationTokens: count(u.CacheCreationTokens), CostUSD: cost, Turns: count(u.Turns),
	}
}

// confirmStop records a stopping attempt's result as its physical stop:
// its artifacts, then the execution finishes cancelled with how the
// segment ended and the exit code seen. A result the executor did not
// observe confirms nothing (errUnobservedStop).
func (s *Scheduler) confirmStop(ctx context.Context, tx storage.Tx, exe storage.Execution, staged []*artifactStage, res executor.Result, exit *int, observed bool) error {
	if !observed {
		return errUnobservedStop
	}
	if err := s.commitArtifacts(ctx, tx, exe, staged); err != nil {
		return err
	}
	_, err := s.rt.ConfirmStoppedInTx(ctx, tx, exe.ID, exe.Epoch, stopMessage(res), exit)
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
		keep, cut, err := artifactCut(f, a.MediaType, s.o.ArtifactLimit)
		if err != nil {
			f.Close()
			s.o.Logger.Warn("artifact not readable", "execution", executionID, "name", a.Name, "error", err)
			continue
		}
		if cut {
			s.o.Logger.Warn("artifact cut at its limit", "execution", executionID, "name", a.Name, "limit", s.o.ArtifactLimit, "kept", keep)
		}
		st, err := s.o.Artifacts.StageUnsynced(s.o.IDs.New(ids.Artifact), io.LimitReader(f, keep))
		f.Close()
		if err != nil {
			s.o.Logger.Warn("artifact not stored", "execution", executionID, "name", a.Name, "error", err)
			continue
		}
		out = append(out, &artifactStage{Staged: st, meta: a})
	}
	return out
}

// MaxArtifactBytes is how much of one artifact the host stores unless
// Options.ArtifactLimit says otherwise: the shell executor's log limit
// (8 MiB) and room for its truncation marker, so a log the executor cut
// is stored whole, and any other artifact (an agent's transcript) is
// bounded the same.
const MaxArtifactBytes = 8<<20 + 4<<10

// artifactCut is how many bytes of the artifact f the host keeps: all of
// it within limit; else limit bytes, or for newline-delimited JSON
// (application/x-ndjson) up to the last whole line within them, so that
// a cut transcript is still whole lines.
func artifactCut(f *os.File, mediaType string, limit int64) (keep int64, cut bool, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	if fi.Size() <= limit {
		return fi.Size(), false, nil
	}
	if base, _, _ := strings.Cut(mediaType, ";"); strings.TrimSpace(base) != "application/x-ndjson" {
		return limit, true, nil
	}
	// The last newline within limit, looked for in the final window
	// before it (a line longer than the window is cut where it is).
	const window = 1 << 20
	from := max(limit-window, 0)
	buf := make([]byte, limit-from)
	if _, err := f.ReadAt(buf, from); err != nil {
		return 0, false, err
	}
	if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
		return from + int64(i) + 1, true, nil
	}
	return limit, true, nil
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
	fin, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
		ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
		State: &st, Result: &r, Message: &msg, ExitCode: exit, Now: s.now(),
	})
	if err != nil {
		return err
	}
	return storage.RevokeFinishedTokens(ctx, tx, fin, s.now())
}

// applyPath is which of apply's steps a segment's result takes.
type applyPath int

const (
	// applyResult: the executor's result, with no declaration applied (a
	// pending one is discarded).
	applyResult applyPath = iota
	// applyWait: a declared wait, of a segment that ended normally.
	applyWait
	// applyOutcome: a declared outcome.
	applyOutcome
)

// pathOf chooses apply's step from the pending declaration (ok false:
// none) and the executor's result: a declared wait applies only when the
// segment ended normally (succeeded or suspended).
func pathOf(d kernel.Declaration, ok bool, res executor.Result) applyPath {
	endedWell := res.Outcome == executor.Succeeded || res.Outcome == executor.Suspended
	switch {
	case ok && d.Wait != nil && endedWell:
		return applyWait
	case ok && d.Outcome != nil:
		return applyOutcome
	}
	return applyResult
}

// declaration is a segment's pending declaration, read and parsed.
type declaration struct {
	rec storage.Declaration
	d   kernel.Declaration
}

// readDeclaration is the segment's pending declaration (ok false: none).
func readDeclaration(ctx context.Context, tx storage.Tx, exe storage.Execution) (declaration, bool, error) {
	rec, err := tx.GetPendingDeclaration(ctx, exe.ID)
	if errors.Is(err, storage.ErrNotFound) {
		return declaration{}, false, nil
	}
	if err != nil {
		return declaration{}, false, err
	}
	d, err := kernel.ParseDeclaration(rec)
	if err != nil {
		return declaration{}, false, err
	}
	return declaration{rec: rec, d: d}, true, nil
}

// mark records what became of a pending declaration (applied or
// discarded).
func (s *Scheduler) mark(ctx context.Context, tx storage.Tx, decl declaration, disposition string) error {
	return tx.MarkDeclarationApplied(ctx, &storage.MarkDeclarationAppliedParams{Execution: decl.rec.Execution, Epoch: decl.rec.Epoch, Disposition: disposition, At: s.now()})
}

// apply applies a fenced segment's result inside complete's transaction.
// Its steps: readDeclaration reads the pending declaration; pathOf
// chooses applyWait (a declared wait), applyOutcome (a declared outcome)
// or, with the declaration marked discarded, applyExecutorResult. Each
// path finishes or parks the execution, moves the Work and marks the
// declaration in this same transaction.
//
// declared says whether the segment has a pending declaration (read in
// this transaction); without one, none is read.
func (s *Scheduler) apply(ctx context.Context, tx storage.Tx, exe storage.Execution, res executor.Result, exit *int, declared bool) error {
	var decl declaration
	var ok bool
	if declared {
		var err error
		if decl, ok, err = readDeclaration(ctx, tx, exe); err != nil {
			return err
		}
	}
	switch pathOf(decl.d, ok, res) {
	case applyWait:
		return s.applyWait(ctx, tx, exe, decl, res, exit)
	case applyOutcome:
		return s.applyOutcome(ctx, tx, exe, decl, res, exit)
	}
	if ok {
		if err := s.mark(ctx, tx, decl, DeclarationDiscarded); err != nil {
			return err
		}
	}
	return s.applyExecutorResult(ctx, tx, exe, res, exit)
}

// parks reports whether a segment that declared a wait parks rather than
// ends: a segment of a resume-capable executor that ended normally
// (succeeded or suspended; an agent's turn ends normally once it declared
// its wait). Any other executor's execution ends and the Work waits.
func parks(res executor.Result, ex executor.Executor) bool {
	endedWell := res.Outcome == executor.Succeeded || res.Outcome == executor.Suspended
	return endedWell && ex != nil && ex.Info().Has(executor.CapResume)
}

// applyWait applies a declared wait: the execution parks (parks) or
// finishes succeeded, the Work waits, and the Wait is registered with its
// timeout timer armed and its watermark defaulting to inputSeq, then the
// declaration is marked applied: all in the caller's transaction.
func (s *Scheduler) applyWait(ctx context.Context, tx storage.Tx, exe storage.Execution, decl declaration, res executor.Result, exit *int) error {
	if parks(res, s.executor(exe.Executor)) {
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
		Work: exe.Work, Execution: exe.ID, Epoch: exe.Epoch, Spec: *decl.d.Wait, DefaultWatermark: mark0, DeclaredAt: decl.rec.DeclaredAt,
	}); err != nil {
		return err
	}
	return s.mark(ctx, tx, decl, DeclarationApplied)
}

// applyOutcome applies a declared outcome, which replaces the executor's:
// the execution finishes with it, the Work ends with its state, message
// and data, and the declaration is marked applied.
func (s *Scheduler) applyOutcome(ctx context.Context, tx storage.Tx, exe storage.Execution, decl declaration, res executor.Result, exit *int) error {
	o := decl.d.Outcome
	if o.Message != "" {
		res.Message = o.Message
	}
	if err := s.finishExecution(ctx, tx, exe, storage.ExecutionResult(o.Outcome), res, exit); err != nil {
		return err
	}
	if _, _, err := s.rt.FinishWorkInTx(ctx, tx, exe.Work, kernel.Finish{State: o.Outcome, Message: res.Message, Data: o.Data}); err != nil {
		return err
	}
	return s.mark(ctx, tx, decl, DeclarationApplied)
}

// executorVerdict is what the executor's own result (no declaration
// applied) makes of the execution and the Work, with the message: a
// suspension without a declared wait, and any outcome but succeeded and
// cancelled, are failures.
func executorVerdict(res executor.Result) (storage.ExecutionResult, storage.WorkState, string) {
	switch res.Outcome {
	case executor.Succeeded:
		return storage.ResultSucceeded, storage.WorkSucceeded, res.Message
	case executor.Cancelled:
		return storage.ResultCancelled, storage.WorkCancelled, res.Message
	case executor.Suspended:
		return storage.ResultFailed, storage.WorkFailed, "the segment suspended without a declared wait"
	}
	if res.Message == "" {
		return storage.ResultFailed, storage.WorkFailed, fmt.Sprintf("the segment failed (exit code %d)", res.ExitCode)
	}
	return storage.ResultFailed, storage.WorkFailed, res.Message
}

// goesOn reports whether a Work whose attempt succeeded is ready again
// instead of ending: input was queued after the attempt's watermark while
// it ran.
func goesOn(w storage.Work, exe storage.Execution) bool {
	return w.InputCount > exe.InputWatermark && w.State == storage.WorkRunning
}

// applyExecutorResult applies the executor's own result: the execution
// finishes with executorVerdict, and the Work ends so, unless it goes on
// (goesOn), when it is ready again.
func (s *Scheduler) applyExecutorResult(ctx context.Context, tx storage.Tx, exe storage.Execution, res executor.Result, exit *int) error {
	result, state, msg := executorVerdict(res)
	res.Message = msg
	if err := s.finishExecution(ctx, tx, exe, result, res, exit); err != nil {
		return err
	}
	if res.Outcome == executor.Succeeded {
		w, err := tx.GetWork(ctx, exe.Work)
		if err != nil {
			return err
		}
		if goesOn(w, exe) {
			// Input arrived while the attempt ran: the Work goes on.
			ready := storage.WorkReady
			_, err := tx.UpdateWork(ctx, &storage.UpdateWorkParams{ID: w.ID, FromStates: []storage.WorkState{storage.WorkRunning}, State: &ready, Now: s.now()})
			return err
		}
	}
	_, _, err := s.rt.FinishWorkInTx(ctx, tx, exe.Work, kernel.Finish{State: state, Message: res.Message})
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
