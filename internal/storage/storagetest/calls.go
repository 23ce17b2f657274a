package storagetest

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The toolbelt's call records: one per request or refusal, for the
// operator, listed by (at, id) and kept until a retention pass.

func callCases() []Case {
	return []Case{
		{Name: "call_round_trip", Run: plain(callRoundTrip), Control: dropsCallGate},
		{Name: "call_list_keyset", Run: plain(callListKeyset), Control: callsIgnoreAfter},
		{Name: "call_retention", Run: plain(callRetention), Control: sweepsCallsWithoutCut},
	}
}

func insertCalls(ctx context.Context, s storage.Store, calls ...storage.ToolbeltCall) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range calls {
			if err := tx.InsertToolbeltCall(ctx, &calls[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func callIDs(ctx context.Context, s storage.Store, p storage.ListToolbeltCallsParams) (string, error) {
	cs, err := s.ListToolbeltCalls(ctx, &p)
	return list(cs, func(c storage.ToolbeltCall) string { return c.ID }), err
}

func callRoundTrip(ctx context.Context, s storage.Store) error {
	in := []storage.ToolbeltCall{
		{ID: "tbc_1", Kind: storage.ToolbeltCalled, Operation: "emit", Execution: "exe_1", Epoch: 2, Token: "tok_1", Result: "ok", Replayed: true, At: at(1)},
		{ID: "tbc_2", Kind: storage.ToolbeltRejected, Result: "invalid", At: at(2)},
		{ID: "tbc_3", Kind: storage.ToolbeltRejected, Operation: "wait", Execution: "exe_1", Epoch: 2, Token: "tok_1", Result: "gate_refused", Gate: "budget", At: at(3)},
	}
	if err := insertCalls(ctx, s, in...); err != nil {
		return err
	}
	unknown := insertCalls(ctx, s, storage.ToolbeltCall{ID: "tbc_4", Kind: "toolbelt.guessed", Result: "ok", At: at(4)})
	all, err := s.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{})
	if err != nil {
		return err
	}
	if len(all) != 3 {
		return fmt.Errorf("calls = %+v, want the three inserted (a call of an unknown kind is refused: %v)", all, unknown)
	}
	for i := range in {
		if !same(all[i], in[i]) {
			return fmt.Errorf("call read back = %+v, inserted %+v", all[i], in[i])
		}
	}
	byExe, err1 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Execution: "exe_1"})
	byKind, err2 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Kind: storage.ToolbeltRejected})
	byResult, err3 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Result: "gate_refused"})
	both, err4 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Execution: "exe_1", Kind: storage.ToolbeltCalled})
	// A refusal's classification is kept.
	drift := storage.ToolbeltCall{ID: "tbc_5", Kind: storage.ToolbeltRejected, Operation: "emit", Execution: "exe_2", Epoch: 1, Token: "tok_2",
		Result: "forbidden", Refusal: storage.RefusalConfigDrift, At: at(5)}
	err5 := insertCalls(ctx, s, drift)
	drifted, err6 := s.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: "exe_2"})
	return first(err1, err2, err3, err4, err5, err6,
		want(len(drifted) == 1 && same(drifted[0], drift), "the drift refusal read back = %+v, inserted %+v", drifted, drift),
		wantSomeErr(unknown, "a call record of an unknown kind"),
		want(byExe == "[tbc_1 tbc_3]", "calls of exe_1 = %s", byExe),
		want(byKind == "[tbc_2 tbc_3]", "rejections = %s", byKind),
		want(byResult == "[tbc_3]", "gate refusals = %s", byResult),
		want(both == "[tbc_1]", "calls of exe_1 that were called = %s", both),
	)
}

func callListKeyset(ctx context.Context, s storage.Store) error {
	var calls []storage.ToolbeltCall
	for i := range 6 {
		// Two calls a second, inserted against their order: the id breaks
		// the tie.
		calls = append(calls, storage.ToolbeltCall{ID: fmt.Sprintf("tbc_%d", 5-i), Kind: storage.ToolbeltCalled, Operation: "emit", Result: "ok", At: at((5 - i) / 2)})
	}
	if err := insertCalls(ctx, s, calls...); err != nil {
		return err
	}
	all, err1 := callIDs(ctx, s, storage.ListToolbeltCallsParams{})
	page, err2 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Page: storage.Page{After: &storage.Position{CreatedAt: at(0), ID: "tbc_1"}, Limit: 3}})
	bounded, err3 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Page: storage.Page{After: &storage.Position{CreatedAt: at(1), ID: "tbc_2"},
		Until: &storage.Position{CreatedAt: at(2), ID: "tbc_4"}}})
	desc, err4 := callIDs(ctx, s, storage.ListToolbeltCallsParams{Page: storage.Page{Desc: true, Limit: 2, After: &storage.Position{CreatedAt: at(2), ID: "tbc_5"}}})
	return first(err1, err2, err3, err4,
		want(all == "[tbc_0 tbc_1 tbc_2 tbc_3 tbc_4 tbc_5]", "calls = %s", all),
		want(page == "[tbc_2 tbc_3 tbc_4]", "three after tbc_1 = %s", page),
		want(bounded == "[tbc_3 tbc_4]", "after tbc_2 up to tbc_4 = %s", bounded),
		want(desc == "[tbc_4 tbc_3]", "two before tbc_5, newest first = %s", desc),
	)
}

// callRetention: a sweep with CallsBefore deletes the call records at or
// before it; without it, none.
func callRetention(ctx context.Context, s storage.Store) error {
	if err := insertCalls(ctx, s,
		storage.ToolbeltCall{ID: "tbc_10", Kind: storage.ToolbeltCalled, Result: "ok", At: at(10)},
		storage.ToolbeltCall{ID: "tbc_20", Kind: storage.ToolbeltRejected, Result: "forbidden", At: at(20)},
		storage.ToolbeltCall{ID: "tbc_30", Kind: storage.ToolbeltCalled, Result: "ok", At: at(30)},
	); err != nil {
		return err
	}
	sweep := func(p storage.SweepToolbeltParams) (storage.SweepToolbeltResult, string, error) {
		var res storage.SweepToolbeltResult
		if err := s.WithTx(ctx, func(tx storage.Tx) error {
			var err error
			res, err = tx.SweepToolbelt(ctx, &p)
			return err
		}); err != nil {
			return res, "", err
		}
		left, err := callIDs(ctx, s, storage.ListToolbeltCallsParams{})
		return res, left, err
	}
	kept, left1, err := sweep(storage.SweepToolbeltParams{TokensBefore: at(100), ReplaysBefore: at(100)})
	if err != nil {
		return err
	}
	swept, left2, err := sweep(storage.SweepToolbeltParams{CallsBefore: at(20)})
	return first(err,
		want(kept.Calls == 0 && left1 == "[tbc_10 tbc_20 tbc_30]", "a sweep without CallsBefore deleted %d calls, left %s", kept.Calls, left1),
		want(swept.Calls == 2 && left2 == "[tbc_30]", "a sweep of calls at or before 20s deleted %d, left %s; want 2 and [tbc_30]", swept.Calls, left2),
	)
}
