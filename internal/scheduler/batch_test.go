package scheduler_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/internal/toolbelt"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// txLog is a store that records, per committed write transaction, the
// executions it inserted and finished, and fences the Work and execution
// ids it is told to, as if they had moved under the scheduler.
type txLog struct {
	storage.Store
	mu        sync.Mutex
	inserted  [][]string
	finished  [][]string
	fenceWork map[string]bool
	fenceExe  map[string]bool
	// claimed is the size of each ClaimWork, together that of each
	// InsertExecutions.
	claimed, together []int
}

type txLogTx struct {
	storage.Tx
	l                  *txLog
	inserted, finished []string
}

func (l *txLog) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	var t *txLogTx
	err := l.Store.WithTx(ctx, func(tx storage.Tx) error {
		t = &txLogTx{Tx: tx, l: l}
		return fn(t)
	})
	if err == nil && (len(t.inserted) > 0 || len(t.finished) > 0) {
		l.mu.Lock()
		if len(t.inserted) > 0 {
			l.inserted = append(l.inserted, t.inserted)
		}
		if len(t.finished) > 0 {
			l.finished = append(l.finished, t.finished)
		}
		l.mu.Unlock()
	}
	return err
}

func (t *txLogTx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	t.l.mu.Lock()
	fence := t.l.fenceWork[p.ID]
	t.l.mu.Unlock()
	if fence {
		return storage.Work{}, storage.ErrFenced
	}
	return t.Tx.UpdateWork(ctx, p)
}

// ClaimWork refuses a claim that lists a fenced Work, as if it had moved
// since it was listed (the round's claims are all or none).
func (t *txLogTx) ClaimWork(ctx context.Context, p *storage.ClaimWorkParams) ([]storage.Work, error) {
	t.l.mu.Lock()
	t.l.claimed = append(t.l.claimed, len(p.Work)+len(p.Listed))
	fenced := false
	for _, w := range append(storage.Revisions(p.Listed), p.Work...) {
		fenced = fenced || t.l.fenceWork[w.ID]
	}
	t.l.mu.Unlock()
	if fenced {
		return nil, storage.ErrFenced
	}
	return t.Tx.ClaimWork(ctx, p)
}

func (t *txLogTx) InsertExecutions(ctx context.Context, ps []storage.InsertExecutionParams) ([]storage.Execution, error) {
	t.l.mu.Lock()
	t.l.together = append(t.l.together, len(ps))
	t.l.mu.Unlock()
	es, err := t.Tx.InsertExecutions(ctx, ps)
	if err == nil {
		for _, e := range es {
			t.inserted = append(t.inserted, e.Work)
		}
	}
	return es, err
}

func (t *txLogTx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	e, err := t.Tx.InsertExecution(ctx, p)
	if err == nil {
		t.inserted = append(t.inserted, p.Work)
	}
	return e, err
}

func (t *txLogTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	t.l.mu.Lock()
	fence := t.l.fenceExe[p.ID]
	t.l.mu.Unlock()
	if fence {
		return storage.Execution{}, storage.ErrFenced
	}
	e, err := t.Tx.UpdateExecution(ctx, p)
	if err == nil && p.State != nil && *p.State == storage.ExecutionFinished {
		t.finished = append(t.finished, p.ID)
	}
	return e, err
}

// GetCallGuard shows a fenced execution at the next epoch, as the fenced
// update sees it.
func (t *txLogTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	g, err := t.Tx.GetCallGuard(ctx, id)
	t.l.mu.Lock()
	fence := t.l.fenceExe[id]
	t.l.mu.Unlock()
	if fence {
		g.Execution.Epoch++
	}
	return g, err
}

func (l *txLog) snapshot() (inserted, finished [][]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]string(nil), l.inserted...), append([][]string(nil), l.finished...)
}

// batchHarness runs four bindings on the plain executor, so that one
// round claims four Work.
func batchHarness(t *testing.T) (*harness, *txLog) {
	var l *txLog
	h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
		o.Limits.MaxRunning = 4
		o.Bindings = func(context.Context, scheduler.BindingQuery) (scheduler.Binding, error) {
			return scheduler.Binding{Executor: "plain", Generation: 1}, nil
		}
	}, func(s storage.Store) storage.Store {
		l = &txLog{Store: s, fenceWork: map[string]bool{}, fenceExe: map[string]bool{}}
		return l
	})
	t.Cleanup(h.close)
	return h, l
}

// A round claims its Work in one transaction, and the round after the
// segments end applies their results in one transaction.
func TestRoundClaimsAndCompletesInOneTransaction(t *testing.T) {
	h, l := batchHarness(t)
	var works []string
	for _, b := range []string{"b1", "br", "bn", "bs"} {
		works = append(works, h.create(b).ID)
	}
	h.tick()
	inserted, _ := l.snapshot()
	if len(inserted) != 1 || len(inserted[0]) != 4 {
		t.Fatalf("claims per transaction %v, want the four Work in one", inserted)
	}
	l.mu.Lock()
	claimed, together := slices.Clone(l.claimed), slices.Clone(l.together)
	l.mu.Unlock()
	if len(claimed) != 1 || claimed[0] != 4 || len(together) != 1 || together[0] != 4 {
		t.Fatalf("ClaimWork calls of sizes %v and InsertExecutions of %v, want one each of the four Work", claimed, together)
	}
	for range works {
		seg := h.plain.Next(t)
		seg.Finish(executor.Result{Outcome: executor.Succeeded})
		h.settle(seg)
	}
	h.tick()
	_, finished := l.snapshot()
	if len(finished) != 1 || len(finished[0]) != 4 {
		t.Fatalf("completions per transaction %v, want the four results in one", finished)
	}
	for _, id := range works {
		if w := h.work(id); w.State != storage.WorkSucceeded {
			t.Fatalf("Work %s is %s, want succeeded", id, w.State)
		}
	}
}

// A Work that moved between the round's listing and its claim costs the
// others nothing: the batch is claimed again one by one, and the moved
// Work stays ready.
func TestRoundClaimOfAMovedWorkSparesTheOthers(t *testing.T) {
	h, l := batchHarness(t)
	var works []string
	for _, b := range []string{"b1", "br", "bn", "bs"} {
		works = append(works, h.create(b).ID)
	}
	l.mu.Lock()
	l.fenceWork[works[2]] = true
	l.mu.Unlock()
	h.tick()
	inserted, _ := l.snapshot()
	if len(inserted) != 3 {
		t.Fatalf("claims per transaction %v, want three claimed one by one", inserted)
	}
	for i, id := range works {
		w := h.work(id)
		want := storage.WorkRunning
		if i == 2 {
			want = storage.WorkReady
		}
		if w.State != want {
			t.Fatalf("Work %s is %s, want %s", id, w.State, want)
		}
	}
}

// A result refused in the round's batch (its epoch moved on) is dropped
// alone: the other results of the round are applied.
func TestRoundCompletionOfAStaleResultSparesTheOthers(t *testing.T) {
	h, l := batchHarness(t)
	var works []string
	for _, b := range []string{"b1", "br", "bn", "bs"} {
		works = append(works, h.create(b).ID)
	}
	h.tick()
	var stale string
	for i := range works {
		seg := h.plain.Next(t)
		if i == 1 {
			stale = seg.Req.ExecutionID
		}
		seg.Finish(executor.Result{Outcome: executor.Succeeded})
		h.settle(seg)
	}
	l.mu.Lock()
	l.fenceExe[stale] = true
	l.mu.Unlock()
	h.tick()
	_, finished := l.snapshot()
	if len(finished) != 3 {
		t.Fatalf("completions per transaction %v, want three applied one by one", finished)
	}
	succeeded := 0
	for _, id := range works {
		if h.work(id).State == storage.WorkSucceeded {
			succeeded++
		}
	}
	if succeeded != 3 {
		t.Fatalf("%d Work succeeded, want the three whose result was current", succeeded)
	}
	if e := h.execution(stale); e.State != storage.ExecutionRunning {
		t.Fatalf("the stale result's execution is %s, want it untouched (running)", e.State)
	}
}

// txTokens issues tokens inside the claim's transaction, and records
// which Work the transaction it was handed had claimed by then.
type txTokens struct {
	*tokens
	mu     sync.Mutex
	inTx   []string
	claims [][]string
}

func (tk *txTokens) IssueInTx(ctx context.Context, tx storage.Tx, req toolbelt.TokenRequest) (string, error) {
	lt, _ := tx.(*txLogTx)
	tk.mu.Lock()
	tk.inTx = append(tk.inTx, req.WorkID)
	if lt != nil {
		tk.claims = append(tk.claims, slices.Clone(lt.inserted))
	}
	tk.mu.Unlock()
	return "tok-" + req.ExecutionID + "-" + req.Reason, nil
}

// With a toolbelt that issues inside a transaction, each claimed
// attempt's token is issued in the claim's own transaction, after its
// execution exists there, and the segment gets that token.
func TestRoundIssuesTokensInTheClaimTransaction(t *testing.T) {
	tk := &txTokens{tokens: &tokens{}}
	var l *txLog
	h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
		o.Toolbelt = tk
		o.Bindings = func(context.Context, scheduler.BindingQuery) (scheduler.Binding, error) {
			return scheduler.Binding{Executor: "plain", Generation: 1}, nil
		}
	}, func(s storage.Store) storage.Store {
		l = &txLog{Store: s, fenceWork: map[string]bool{}, fenceExe: map[string]bool{}}
		return l
	})
	t.Cleanup(h.close)
	a, b := h.create("b1"), h.create("br")
	h.tick()
	if calls, _ := tk.snapshot(); len(calls) != 0 {
		t.Fatalf("tokens issued outside the claim: %v", calls)
	}
	tk.mu.Lock()
	inTx, claims := slices.Clone(tk.inTx), slices.Clone(tk.claims)
	tk.mu.Unlock()
	if len(inTx) != 2 || len(claims) != 2 {
		t.Fatalf("tokens issued in a transaction for %v (claims seen %v), want both Work", inTx, claims)
	}
	for i, id := range inTx {
		if !slices.Contains(claims[i], id) {
			t.Fatalf("the token of %s was issued in a transaction that had claimed %v", id, claims[i])
		}
	}
	for _, w := range []storage.Work{a, b} {
		seg := h.plain.Next(t)
		if want := "tok-" + seg.Req.ExecutionID + "-claim"; seg.Req.Context.Token != want {
			t.Fatalf("segment of %s got token %q, want %q", w.ID, seg.Req.Context.Token, want)
		}
	}
}
