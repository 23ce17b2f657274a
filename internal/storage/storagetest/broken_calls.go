package storagetest

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the calls area: the toolbelt's call records.

var dropsCallGate = txControl("drops_call_gate", "a call record is stored without the gate that refused or parked the call",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsGateTx{tx} })

type dropsGateTx struct{ storage.Tx }

func (t dropsGateTx) InsertToolbeltCall(ctx context.Context, c *storage.ToolbeltCall) error {
	d := *c
	d.Gate = ""
	return t.Tx.InsertToolbeltCall(ctx, &d)
}

var callsIgnoreAfter = stateless("calls_ignore_after", "ListToolbeltCalls ignores the page's After position",
	func(s storage.Store) storage.Store { return callsNoAfter{s} })

func listCallsNoAfter(ctx context.Context, r storage.Reader, p *storage.ListToolbeltCallsParams) ([]storage.ToolbeltCall, error) {
	q := *p
	q.After = nil
	return r.ListToolbeltCalls(ctx, &q)
}

type callsNoAfter struct{ storage.Store }

func (s callsNoAfter) ListToolbeltCalls(ctx context.Context, p *storage.ListToolbeltCallsParams) ([]storage.ToolbeltCall, error) {
	return listCallsNoAfter(ctx, s.Store, p)
}

func (s callsNoAfter) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(callsNoAfterTx{tx}) })
}

type callsNoAfterTx struct{ storage.Tx }

func (t callsNoAfterTx) ListToolbeltCalls(ctx context.Context, p *storage.ListToolbeltCallsParams) ([]storage.ToolbeltCall, error) {
	return listCallsNoAfter(ctx, t.Tx, p)
}

// sweepsCallsWithoutCut reads a zero CallsBefore as "everything".
var sweepsCallsWithoutCut = txControl("sweeps_calls_without_cut", "a sweep without CallsBefore deletes every call record",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return sweepsAllCallsTx{tx} })

type sweepsAllCallsTx struct{ storage.Tx }

func (t sweepsAllCallsTx) SweepToolbelt(ctx context.Context, p *storage.SweepToolbeltParams) (storage.SweepToolbeltResult, error) {
	q := *p
	if q.CallsBefore.IsZero() {
		q.CallsBefore = T0.AddDate(100, 0, 0)
	}
	return t.Tx.SweepToolbelt(ctx, &q)
}
