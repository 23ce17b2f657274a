package postgres

import (
	"context"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Updates computed from a kept row. A batch holds the event counter row
// from its first statement to its COMMIT (group.go), and every write to
// the work and executions tables is some batch's: a Work or execution
// row the caller's transaction read, and kept (storage.TxRows), is the
// row as it is until the transaction itself writes it. An UpdateWork or
// UpdateExecution of such a row is then answered from it: the fence
// (revision, epoch, owner, states) is checked on the kept row, a refusal
// costs no statement, and the row the update leaves is computed, kept, and
// returned, while the UPDATE itself travels with the caller's next
// statement (or the end of its turn), fenced as ever. Should it find its
// row moved on all the same (a write outside any batch, by hand), it
// fails, and the transaction with it (fenceErr): nothing computed from a
// stale row is committed.
//
// An update whose stored result the engine could compute differently is
// sent at once: one that adds usage (floating-point sums), replaces the
// grants (a JSON list), writes text PostgreSQL could refuse (a NUL, bad
// UTF-8) or a number out of its column's range, or could break a unique
// index (an execution leaving finished).

// keptWork is the Work the transaction keeps for id, when its update
// can be computed from it.
func (t *tx) keptWork(p *storage.UpdateWorkParams) (storage.Work, bool) {
	if !t.q.inBatch() || p.Grants != nil {
		return storage.Work{}, false
	}
	texts := []*string{p.Binding, p.BlockedReason, p.BlockedDetail, p.WaitReason, p.OutcomeMessage}
	if p.OutcomeData != nil {
		d := string(*p.OutcomeData)
		texts = append(texts, &d)
	}
	if !storable(texts...) {
		return storage.Work{}, false
	}
	return t.q.turn.rows.Work(p.ID)
}

// workUpdated is w as p leaves it, and whether p's fence holds on w.
func workUpdated(w storage.Work, p *storage.UpdateWorkParams) (storage.Work, bool) {
	if len(p.FromStates) > 0 && !slices.Contains(p.FromStates, w.State) || p.Revision != 0 && w.Revision != p.Revision {
		return w, false
	}
	w.Revision++
	w.UpdatedAt = fromTS(ts(p.Now))
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if p.State != nil {
		w.State = *p.State
	}
	set(&w.Binding, p.Binding)
	set(&w.BlockedReason, p.BlockedReason)
	set(&w.BlockedDetail, p.BlockedDetail)
	set(&w.WaitReason, p.WaitReason)
	set(&w.OutcomeMessage, p.OutcomeMessage)
	if p.OutcomeData != nil {
		w.OutcomeData = nil
		if len(*p.OutcomeData) > 0 {
			w.OutcomeData = slices.Clone(*p.OutcomeData)
		}
	}
	if p.InputWatermark != nil {
		w.InputWatermark = *p.InputWatermark
	}
	w.Attempts += p.AddAttempts
	return w, true
}

// keptExecution is keptWork for an execution.
func (t *tx) keptExecution(p *storage.UpdateExecutionParams) (storage.Execution, bool) {
	if !t.q.inBatch() || p.AddUsage != nil || !storable(p.Message, p.Session) ||
		p.ExitCode != nil && (*p.ExitCode < math.MinInt32 || *p.ExitCode > math.MaxInt32) {
		return storage.Execution{}, false
	}
	e, ok := t.q.turn.rows.Execution(p.ID)
	if !ok || e.State == storage.ExecutionFinished && p.State != nil && *p.State != storage.ExecutionFinished {
		return storage.Execution{}, false
	}
	return e, true
}

// executionUpdated is workUpdated for an execution.
func executionUpdated(e storage.Execution, p *storage.UpdateExecutionParams) (storage.Execution, bool) {
	if e.Epoch != p.Epoch || p.Owner != "" && e.Owner != p.Owner || len(p.FromStates) > 0 && !slices.Contains(p.FromStates, e.State) {
		return e, false
	}
	e.Revision++
	e.UpdatedAt = fromTS(ts(p.Now))
	if p.State != nil {
		e.State = *p.State
	}
	if p.Result != nil {
		e.Result = *p.Result
	}
	if p.Message != nil {
		e.Message = *p.Message
	}
	if p.ExitCode != nil {
		c := *p.ExitCode
		e.ExitCode = &c
	}
	if p.LeaseExpiresAt != nil {
		e.LeaseExpiresAt = fromTS(ts(*p.LeaseExpiresAt))
	}
	if p.Launched {
		e.LaunchedEpoch = e.Epoch
	}
	if p.Session != nil {
		e.Session = *p.Session
	}
	return e, true
}

// storable reports whether PostgreSQL stores each text as it is.
func storable(texts ...*string) bool {
	for _, s := range texts {
		if s != nil && (strings.IndexByte(*s, 0) >= 0 || !utf8.ValidString(*s)) {
			return false
		}
	}
	return true
}

// updateKeptWork is UpdateWork answered from cur, the kept row (see
// above): query and args are the fenced UPDATE.
func (t *tx) updateKeptWork(ctx context.Context, cur storage.Work, p *storage.UpdateWorkParams, query string, args []any) (storage.Work, error) {
	w, ok := workUpdated(cur, p)
	if !ok {
		return storage.Work{}, movedOn("work", p.ID)
	}
	if err := t.q.deferredOne(ctx, query, "work "+p.ID, storage.RowScope{Work: p.ID}, args); err != nil {
		return storage.Work{}, err
	}
	t.q.turn.rows.KeepWrittenWork(w)
	return w, nil
}

// updateKeptExecution is updateKeptWork for an execution.
func (t *tx) updateKeptExecution(ctx context.Context, cur storage.Execution, p *storage.UpdateExecutionParams, query string, args []any) (storage.Execution, error) {
	e, ok := executionUpdated(cur, p)
	if !ok {
		return storage.Execution{}, movedOn("execution", p.ID)
	}
	if err := t.q.deferredOne(ctx, query, "execution "+p.ID, storage.RowScope{Execution: p.ID}, args); err != nil {
		return storage.Execution{}, err
	}
	t.q.turn.rows.KeepExecution(e)
	return e, nil
}

// claimListed is a claim of Listed rows, all or none, answered from them:
// a row still at its listed revision is the row as listed (every write
// of a Work moves its revision), so the claimed rows are computed, kept
// and returned, and the UPDATE travels with the caller's next statement,
// failing it should it move fewer rows than listed. A listed row that is
// not ready or is held is refused without a statement.
func (t *tx) claimListed(ctx context.Context, p *storage.ClaimWorkParams) ([]storage.Work, error) {
	if len(p.Listed) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2+2*len(p.Listed))
	args = append(args, ts(p.Now))
	out := make([]storage.Work, 0, len(p.Listed))
	running := storage.WorkRunning
	for _, w := range p.Listed {
		// The claim is the update claimWork writes: ready to running,
		// the watermark at the input count, one more attempt.
		claimed, ok := workUpdated(w, &storage.UpdateWorkParams{FromStates: []storage.WorkState{storage.WorkReady},
			State: &running, InputWatermark: &w.InputCount, AddAttempts: 1, Now: p.Now})
		if !ok || w.BlockedReason != "" {
			return nil, movedOn("work", w.ID)
		}
		args = append(args, w.ID, w.Revision)
		out = append(out, claimed)
	}
	args = append(args, len(p.Listed))
	err := t.q.deferred(ctx, pending{sql: `WITH u AS (` + claimWork(len(p.Listed)) + ` RETURNING 1) SELECT 1 / (COUNT(*) = ?)::int FROM u`,
		args: args, fence: "a Work listed for the claim"})
	if err != nil {
		return nil, err
	}
	for _, w := range out {
		t.q.turn.rows.KeepWrittenWork(w)
	}
	return out, nil
}
