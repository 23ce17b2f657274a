package storagetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the duties area.

// dutyTakeIgnoresHolder reports a take of a duty another owner holds as
// taken: two daemons would both run it.
var dutyTakeIgnoresHolder = txControl("duty_take_ignores_holder", "TakeDuty of a duty another owner holds reports it taken",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return takeIgnoresHolderTx{tx} })

type takeIgnoresHolderTx struct{ storage.Tx }

func (t takeIgnoresHolderTx) TakeDuty(ctx context.Context, p *storage.TakeDutyParams) (storage.DutyLease, error) {
	d, err := t.Tx.TakeDuty(ctx, p)
	if errors.Is(err, storage.ErrFenced) {
		return storage.DutyLease{Name: p.Name, Owner: p.Owner, ExpiresAt: p.ExpiresAt, TakenAt: p.Now}, nil
	}
	return d, err
}

// dutyNeverExpires judges expiry at the beginning of time: a dead
// holder's duty is never taken over.
var dutyNeverExpires = txControl("duty_never_expires", "a duty's lease is never found expired, so no other owner takes it over",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return neverExpiresTx{tx} })

type neverExpiresTx struct{ storage.Tx }

func (t neverExpiresTx) TakeDuty(ctx context.Context, p *storage.TakeDutyParams) (storage.DutyLease, error) {
	q := *p
	q.Now = time.Unix(0, 1)
	return t.Tx.TakeDuty(ctx, &q)
}

// forgetsDutiesOnReopen keeps duty leases in memory: a restarted store
// has none, so a second daemon takes a duty its holder still runs.
var forgetsDutiesOnReopen = afterReopen("forgets_duties_on_reopen", "duty leases taken before a reopen are gone after it",
	func(s storage.Store) storage.Store { return forgetsDuties{s} })

type forgetsDuties struct{ storage.Store }

func (s forgetsDuties) GetDutyLease(_ context.Context, name string) (storage.DutyLease, error) {
	return storage.DutyLease{}, fmt.Errorf("%w: duty %s", storage.ErrNotFound, name)
}

func (s forgetsDuties) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(forgetsDutiesTx{tx}) })
}

type forgetsDutiesTx struct{ storage.Tx }

// TakeDuty first drops what the store kept, as a store that never had it.
func (t forgetsDutiesTx) TakeDuty(ctx context.Context, p *storage.TakeDutyParams) (storage.DutyLease, error) {
	d, err := t.Tx.TakeDuty(ctx, p)
	if errors.Is(err, storage.ErrFenced) {
		return storage.DutyLease{Name: p.Name, Owner: p.Owner, ExpiresAt: p.ExpiresAt, TakenAt: p.Now}, nil
	}
	return d, err
}
