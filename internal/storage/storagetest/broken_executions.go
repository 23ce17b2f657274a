package storagetest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the executions area: executions, leases, epochs and
// declarations.

// exitCodeZeroWhenUnobserved reads an exit code nobody observed as 0, as
// the store did before exit codes became nullable.
var exitCodeZeroWhenUnobserved = stateless("exit_code_zero_when_unobserved", "an execution whose end nobody observed reads exit code 0",
	func(s storage.Store) storage.Store { return zeroExit{s} })

func zeroExitOf(e storage.Execution, err error) (storage.Execution, error) {
	if err == nil && e.ExitCode == nil {
		zero := 0
		e.ExitCode = &zero
	}
	return e, err
}

type zeroExit struct{ storage.Store }

func (s zeroExit) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	return zeroExitOf(s.Store.GetExecution(ctx, id))
}

func (s zeroExit) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return zeroExitGuard(s.Store.GetCallGuard(ctx, id))
}

func zeroExitGuard(g storage.CallGuard, err error) (storage.CallGuard, error) {
	g.Execution, _ = zeroExitOf(g.Execution, err)
	return g, err
}

func (s zeroExit) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(zeroExitTx{tx}) })
}

type zeroExitTx struct{ storage.Tx }

func (t zeroExitTx) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	return zeroExitOf(t.Tx.GetExecution(ctx, id))
}

func (t zeroExitTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return zeroExitGuard(t.Tx.GetCallGuard(ctx, id))
}

func (t zeroExitTx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	return zeroExitOf(t.Tx.InsertExecution(ctx, p))
}

func (t zeroExitTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	return zeroExitOf(t.Tx.UpdateExecution(ctx, p))
}

var advanceIgnoresExpiry = txControl("advance_ignores_expiry", "AdvanceEpoch takes an execution over before its lease expired",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return advanceAnytimeTx{tx} })

type advanceAnytimeTx struct{ storage.Tx }

func (t advanceAnytimeTx) AdvanceEpoch(ctx context.Context, p *storage.AdvanceEpochParams) (storage.Execution, error) {
	q := *p
	q.ExpiredBy = time.Time{}
	return t.Tx.AdvanceEpoch(ctx, &q)
}

var advanceKeepsExitCode = txControl("advance_keeps_exit_code", "a new epoch carries the exit code of the segment before it",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return keepsExitTx{tx} })

type keepsExitTx struct{ storage.Tx }

func (t keepsExitTx) AdvanceEpoch(ctx context.Context, p *storage.AdvanceEpochParams) (storage.Execution, error) {
	prev, err := t.GetExecution(ctx, p.ID)
	if err != nil {
		return t.Tx.AdvanceEpoch(ctx, p)
	}
	e, err := t.Tx.AdvanceEpoch(ctx, p)
	if err != nil || prev.ExitCode == nil {
		return e, err
	}
	return t.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: e.Epoch, ExitCode: prev.ExitCode, Now: p.Now})
}

// forgetsLaunch drops the launch marker: every attempt reads as never
// launched.
var forgetsLaunch = txControl("forgets_launch", "UpdateExecution does not record that a segment was launched",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return forgetsLaunchTx{tx} })

type forgetsLaunchTx struct{ storage.Tx }

func (t forgetsLaunchTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	q := *p
	q.Launched = false
	return t.Tx.UpdateExecution(ctx, &q)
}

// marksEveryLaunch marks a launch by its id alone: a superseded epoch,
// another owner's attempt and a finished one read launched too.
var marksEveryLaunch = txControl("marks_every_launch", "MarkLaunched marks a launch whatever its epoch, owner or state",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return marksEveryTx{tx} })

type marksEveryTx struct{ storage.Tx }

func (t marksEveryTx) MarkLaunched(ctx context.Context, p *storage.MarkLaunchedParams) ([]string, error) {
	var out []string
	for _, l := range p.Launches {
		cur, err := t.GetExecution(ctx, l.Execution)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		if _, err := t.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: cur.ID, Epoch: cur.Epoch, Launched: true, Now: p.Now}); err != nil {
			return out, err
		}
		out = append(out, cur.ID)
	}
	return out, nil
}

var insertSupersedesLive = txControl("insert_supersedes_live", "a second execution of a Work finishes the live one instead of being refused",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return supersedesTx{tx} })

type supersedesTx struct{ storage.Tx }

func (t supersedesTx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	e, err := t.Tx.InsertExecution(ctx, p)
	if !errors.Is(err, storage.ErrDuplicate) {
		return e, err
	}
	live, lerr := t.GetLiveExecution(ctx, p.Work)
	if lerr != nil || live.ID == p.ID {
		return e, err
	}
	finished, lost := storage.ExecutionFinished, storage.ResultLost
	if _, uerr := t.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: live.ID, Epoch: live.Epoch, State: &finished, Result: &lost, Now: p.CreatedAt}); uerr != nil {
		return e, err
	}
	return t.Tx.InsertExecution(ctx, p)
}

// insertsOverLive inserts each execution as insertSupersedesLive does:
// a Work's live execution is finished to make room.
var insertsOverLive = txControl("inserts_over_live", "InsertExecutions finishes a Work's live execution instead of refusing the new one",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return insertsOverTx{tx} })

type insertsOverTx struct{ storage.Tx }

func (t insertsOverTx) InsertExecutions(ctx context.Context, ps []storage.InsertExecutionParams) ([]storage.Execution, error) {
	var out []storage.Execution
	for i := range ps {
		e, err := supersedesTx{t.Tx}.InsertExecution(ctx, &ps[i])
		if errors.Is(err, storage.ErrDuplicate) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// insertForgetsLaunch inserts every execution unlaunched, whatever its
// claim asked.
var insertForgetsLaunch = txControl("insert_forgets_launch", "InsertExecution and InsertExecutions drop the launch mark of an execution inserted launched",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return insertUnlaunchedTx{tx} })

type insertUnlaunchedTx struct{ storage.Tx }

func (t insertUnlaunchedTx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	q := *p
	q.Launched = false
	return t.Tx.InsertExecution(ctx, &q)
}

func (t insertUnlaunchedTx) InsertExecutions(ctx context.Context, ps []storage.InsertExecutionParams) ([]storage.Execution, error) {
	qs := slices.Clone(ps)
	for i := range qs {
		qs[i].Launched = false
	}
	return t.Tx.InsertExecutions(ctx, qs)
}

var countLeasedCountsParked = stateless("count_leased_counts_parked", "CountLeased counts parked executions, which hold no lease",
	func(s storage.Store) storage.Store { return countsParked{s} })

func countHeld(ctx context.Context, r storage.Reader, owner string) (int, error) {
	es, err := r.ListExecutions(ctx, &storage.ListExecutionsParams{Owner: owner,
		States: []storage.ExecutionState{storage.ExecutionRunning, storage.ExecutionParked, storage.ExecutionStopping}, Page: storage.Page{Limit: storage.MaxLimit}})
	return len(es), err
}

type countsParked struct{ storage.Store }

func (s countsParked) CountLeased(ctx context.Context, owner string) (int, error) {
	return countHeld(ctx, s.Store, owner)
}

func (s countsParked) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(countsParkedTx{tx}) })
}

type countsParkedTx struct{ storage.Tx }

func (t countsParkedTx) CountLeased(ctx context.Context, owner string) (int, error) {
	return countHeld(ctx, t.Tx, owner)
}

// forgetsEpochsOnReopen keeps the fence in memory: after a restart it no
// longer knows which epoch superseded which.
var forgetsEpochsOnReopen = afterReopen("forgets_epochs_on_reopen", "after a reopen, fenced execution updates ignore the epoch and owner", EpochBlind)

var reappliesDeclarations = txControl("reapplies_declarations", "MarkDeclarationApplied of an applied declaration reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return reappliesTx{tx} })

type reappliesTx struct{ storage.Tx }

func (t reappliesTx) MarkDeclarationApplied(ctx context.Context, p *storage.MarkDeclarationAppliedParams) error {
	if err := t.Tx.MarkDeclarationApplied(ctx, p); !errors.Is(err, storage.ErrFenced) {
		return err
	}
	return nil
}

var pendingIncludesApplied = stateless("pending_includes_applied", "GetPendingDeclaration returns the latest declaration, applied or not",
	func(s storage.Store) storage.Store { return latestDeclaration{s} })

func latestDecl(ctx context.Context, r storage.Reader, exeID string) (storage.Declaration, error) {
	d, err := r.GetPendingDeclaration(ctx, exeID)
	if !errors.Is(err, storage.ErrNotFound) {
		return d, err
	}
	e, eerr := r.GetExecution(ctx, exeID)
	if eerr != nil {
		return d, err
	}
	for epoch := e.Epoch; epoch >= 1; epoch-- {
		if d, derr := r.GetDeclaration(ctx, exeID, epoch); derr == nil {
			return d, nil
		}
	}
	return d, err
}

// latestDeclGuard is the guard whose Declared is latestDecl's answer.
func latestDeclGuard(ctx context.Context, r storage.Reader, exeID string) (storage.CallGuard, error) {
	g, err := r.GetCallGuard(ctx, exeID)
	if err != nil {
		return g, err
	}
	_, derr := latestDecl(ctx, r, exeID)
	g.Declared = derr == nil
	return g, nil
}

type latestDeclaration struct{ storage.Store }

func (s latestDeclaration) GetCallGuard(ctx context.Context, exeID string) (storage.CallGuard, error) {
	return latestDeclGuard(ctx, s.Store, exeID)
}

func (s latestDeclaration) GetPendingDeclaration(ctx context.Context, exeID string) (storage.Declaration, error) {
	return latestDecl(ctx, s.Store, exeID)
}

func (s latestDeclaration) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(latestDeclarationTx{tx}) })
}

type latestDeclarationTx struct{ storage.Tx }

func (t latestDeclarationTx) GetCallGuard(ctx context.Context, exeID string) (storage.CallGuard, error) {
	return latestDeclGuard(ctx, t.Tx, exeID)
}

func (t latestDeclarationTx) GetPendingDeclaration(ctx context.Context, exeID string) (storage.Declaration, error) {
	return latestDecl(ctx, t.Tx, exeID)
}

// usageReplaced records each segment's usage in place of the totals
// instead of adding it to them.
var usageReplaced = txControl("usage_replaced", "UpdateExecution replaces the recorded usage with AddUsage instead of adding it",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return usageReplacedTx{tx} })

type usageReplacedTx struct{ storage.Tx }

func (t usageReplacedTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	cur, err := t.GetExecution(ctx, p.ID)
	if err != nil || cur.Usage == nil || p.AddUsage == nil {
		return t.Tx.UpdateExecution(ctx, p)
	}
	// Adding the difference leaves the new usage as the total.
	q, u, c := *p, *p.AddUsage, cur.Usage
	u.InputTokens -= c.InputTokens
	u.OutputTokens -= c.OutputTokens
	u.CacheReadTokens -= c.CacheReadTokens
	u.CacheCreationTokens -= c.CacheCreationTokens
	u.CostUSD -= c.CostUSD
	u.Turns -= c.Turns
	q.AddUsage = &u
	return t.Tx.UpdateExecution(ctx, &q)
}

// forgetsSessionUsageOnReopen keeps the session and the usage in memory
// only: after a restart an execution reads as having neither.
var forgetsSessionUsageOnReopen = afterReopen("forgets_session_usage_on_reopen", "after a reopen, executions read without their session and usage",
	func(s storage.Store) storage.Store { return noSessionUsage{s} })

type noSessionUsage struct{ storage.Store }

func (s noSessionUsage) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	e, err := s.Store.GetExecution(ctx, id)
	e.Session, e.Usage = "", nil
	return e, err
}

func (s noSessionUsage) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	g, err := s.Store.GetCallGuard(ctx, id)
	g.Execution.Session, g.Execution.Usage = "", nil
	return g, err
}

// nodeFilterIgnored lists executions of every node whatever the filter
// names: a daemon starting on a shared store would take over the live
// attempts of the others.
var nodeFilterIgnored = stateless("node_filter_ignored", "ListExecutions ignores the nodes it is asked for",
	func(s storage.Store) storage.Store { return nodeBlind{s} })

type nodeBlind struct{ storage.Store }

func (s nodeBlind) ListExecutions(ctx context.Context, p *storage.ListExecutionsParams) ([]storage.Execution, error) {
	q := *p
	q.Nodes = nil
	return s.Store.ListExecutions(ctx, &q)
}

// guardGenerationIsFirst answers a call guard with the first
// configuration generation instead of the latest, as a statement that
// sorts the wrong way would: a narrowing generation would never reach a
// call's ceiling.
var guardGenerationIsFirst = stateless("guard_generation_is_first", "GetCallGuard reports the lowest committed generation, not the highest",
	func(s storage.Store) storage.Store { return firstGenerationGuard{s} })

func firstGenerationOf(g storage.CallGuard, err error) (storage.CallGuard, error) {
	if err == nil && g.LatestGeneration > 1 {
		g.LatestGeneration = 1
	}
	return g, err
}

type firstGenerationGuard struct{ storage.Store }

func (s firstGenerationGuard) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return firstGenerationOf(s.Store.GetCallGuard(ctx, id))
}

func (s firstGenerationGuard) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(firstGenerationGuardTx{tx}) })
}

type firstGenerationGuardTx struct{ storage.Tx }

func (t firstGenerationGuardTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return firstGenerationOf(t.Tx.GetCallGuard(ctx, id))
}

// guardKeepsFirstRead is a transaction whose call guard answers with the
// execution and Work rows it read first, even after the transaction's own
// writes changed them: kept rows that a write did not forget.
var guardKeepsFirstRead = txControl("guard_keeps_first_read", "a transaction's GetCallGuard keeps the execution and Work it read first across its own writes",
	func(_ storage.Store, tx storage.Tx) storage.Tx {
		return &firstGuardTx{Tx: tx, seen: map[string]storage.CallGuard{}}
	})

type firstGuardTx struct {
	storage.Tx
	seen map[string]storage.CallGuard
}

func (t *firstGuardTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	g, err := t.Tx.GetCallGuard(ctx, id)
	if err != nil {
		return g, err
	}
	if old, ok := t.seen[id]; ok {
		g.Execution, g.Work = old.Execution, old.Work
		return g, nil
	}
	t.seen[id] = g
	return g, nil
}

// guardMissesTheWorkKey is a call guard that never reads its Work's key:
// nobody owns it and no wait names it.
var guardMissesTheWorkKey = stateless("guard_misses_the_work_key", "the call guard says nobody owns its Work's key and no wait names it, whatever the rows say",
	func(s storage.Store) storage.Store { return keylessGuard{s} })

func keylessOf(g storage.CallGuard, err error) (storage.CallGuard, error) {
	g.KeyOwner, g.KeyWaits = "", false
	return g, err
}

type keylessGuard struct{ storage.Store }

func (s keylessGuard) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return keylessOf(s.Store.GetCallGuard(ctx, id))
}

func (s keylessGuard) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(keylessGuardTx{tx}) })
}

type keylessGuardTx struct{ storage.Tx }

func (t keylessGuardTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return keylessOf(t.Tx.GetCallGuard(ctx, id))
}

// txKeepsKeyAbsence is a transaction that holds what a call guard found
// absent of its Work's key (no owner, no wait) to its end, whatever it
// writes since.
var txKeepsKeyAbsence = txControl("tx_keeps_key_absence", "a transaction answers a key's owner and waits from a guard read, across its own writes",
	func(s storage.Store, tx storage.Tx) storage.Tx {
		return &keyAbsenceTx{Tx: tx, unowned: map[[2]string]bool{}, noWaits: map[[2]string]bool{}}
	})

type keyAbsenceTx struct {
	storage.Tx
	unowned, noWaits map[[2]string]bool
}

func (t *keyAbsenceTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	g, err := t.Tx.GetCallGuard(ctx, id)
	if err == nil {
		k := [2]string{g.Work.Scope, g.Work.ID}
		t.unowned[k] = t.unowned[k] || g.KeyOwner == ""
		t.noWaits[k] = t.noWaits[k] || !g.KeyWaits
	}
	return g, err
}

func (t *keyAbsenceTx) GetKeyOwner(ctx context.Context, scope, key string) (storage.Work, error) {
	if t.unowned[[2]string{scope, key}] {
		return storage.Work{}, storage.ErrNotFound
	}
	return t.Tx.GetKeyOwner(ctx, scope, key)
}

func (t *keyAbsenceTx) ListActiveWaitsByKey(ctx context.Context, scope, key string) ([]storage.Wait, error) {
	if t.noWaits[[2]string{scope, key}] {
		return nil, nil
	}
	return t.Tx.ListActiveWaitsByKey(ctx, scope, key)
}

// guardsAheadKeptStale keeps the guards it read ahead to the end of the
// transaction, whatever the transaction writes since.
var guardsAheadKeptStale = txControl("guards_ahead_kept_stale", "guards read ahead are given out after writes that changed them",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return &staleAheadTx{Tx: tx} })

type staleAheadTx struct {
	storage.Tx
	ahead map[string]storage.CallGuard
}

func (t *staleAheadTx) ReadCallGuardsAhead(ctx context.Context, ids []string) error {
	t.ahead = map[string]storage.CallGuard{}
	for _, id := range ids {
		if g, err := t.Tx.GetCallGuard(ctx, id); err == nil {
			t.ahead[id] = g
		}
	}
	return nil
}

func (t *staleAheadTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	if g, ok := t.ahead[id]; ok {
		return g, nil
	}
	return t.Tx.GetCallGuard(ctx, id)
}
