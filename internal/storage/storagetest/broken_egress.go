package storagetest

import (
	"context"
	"errors"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the egress area: the egress proxy's connection records.

var dropsEgressReason = txControl("drops_egress_reason", "an egress record is stored without the reason it was refused",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsEgressReasonTx{tx} })

type dropsEgressReasonTx struct{ storage.Tx }

func (t dropsEgressReasonTx) InsertEgressConnection(ctx context.Context, c *storage.EgressConnection) error {
	d := *c
	d.Reason = ""
	return t.Tx.InsertEgressConnection(ctx, &d)
}

var finishesEgressUnfenced = txControl("finishes_egress_unfenced", "finishing an egress record that has ended reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return unfencedEgressTx{tx} })

type unfencedEgressTx struct{ storage.Tx }

func (t unfencedEgressTx) FinishEgressConnection(ctx context.Context, p *storage.FinishEgressParams) error {
	if err := t.Tx.FinishEgressConnection(ctx, p); err != nil && !errors.Is(err, storage.ErrFenced) {
		return err
	}
	return nil
}

var sweepsEgressAnyAge = txControl("sweeps_egress_any_age", "the retention pass deletes every ended egress record, however recent",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return sweepsEgressTx{tx} })

type sweepsEgressTx struct{ storage.Tx }

func (t sweepsEgressTx) SweepToolbelt(ctx context.Context, p *storage.SweepToolbeltParams) (storage.SweepToolbeltResult, error) {
	q := *p
	if !q.EgressBefore.IsZero() {
		q.EgressBefore = q.EgressBefore.Add(1000 * time.Hour)
	}
	return t.Tx.SweepToolbelt(ctx, &q)
}

var egressIgnoresExecution = stateless("egress_ignores_execution", "ListEgressConnections ignores the execution filter",
	func(s storage.Store) storage.Store { return egressAllExecutions{s} })

type egressAllExecutions struct{ storage.Store }

func (s egressAllExecutions) ListEgressConnections(ctx context.Context, p *storage.ListEgressParams) ([]storage.EgressConnection, error) {
	q := *p
	q.Execution = ""
	return s.Store.ListEgressConnections(ctx, &q)
}
