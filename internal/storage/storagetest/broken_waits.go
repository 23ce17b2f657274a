package storagetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the waits area: waits and timers.

var activeWaitIgnoresState = stateless("active_wait_ignores_state", "GetActiveWait returns the Work's latest wait, whatever its state",
	func(s storage.Store) storage.Store { return latestWait{s} })

func latestWaitOf(ctx context.Context, r storage.Reader, workID string) (storage.Wait, error) {
	ws, err := r.ListWaits(ctx, &storage.ListWaitsParams{Work: workID, Page: storage.Page{Desc: true, Limit: 1}})
	if err != nil {
		return storage.Wait{}, err
	}
	if len(ws) == 0 {
		return storage.Wait{}, fmt.Errorf("%w: active wait of work %s", storage.ErrNotFound, workID)
	}
	return ws[0], nil
}

type latestWait struct{ storage.Store }

func (s latestWait) GetActiveWait(ctx context.Context, workID string) (storage.Wait, error) {
	return latestWaitOf(ctx, s.Store, workID)
}

func (s latestWait) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(latestWaitTx{tx}) })
}

type latestWaitTx struct{ storage.Tx }

func (t latestWaitTx) GetActiveWait(ctx context.Context, workID string) (storage.Wait, error) {
	return latestWaitOf(ctx, t.Tx, workID)
}

var dropsWaitRegistration = txControl("drops_wait_registration", "a wait is stored without the registration that registered it",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsRegistrationTx{tx} })

type dropsRegistrationTx struct{ storage.Tx }

func (t dropsRegistrationTx) InsertWait(ctx context.Context, p *storage.InsertWaitParams) (storage.Wait, error) {
	q := *p
	q.Registration = ""
	return t.Tx.InsertWait(ctx, &q)
}

// waitsByKeyRepeat lists a wait once per mention of the key, as a join
// on the wait's keys without a set of them would.
var waitsByKeyRepeat = stateless("waits_by_key_repeat", "ListActiveWaitsByKey lists a wait once for every time it names the key",
	func(s storage.Store) storage.Store { return repeatsWaits{s} })

func repeatByMention(ctx context.Context, r storage.Reader, scope, key string) ([]storage.Wait, error) {
	ws, err := r.ListActiveWaitsByKey(ctx, scope, key)
	var out []storage.Wait
	for _, w := range ws {
		for _, k := range w.Keys {
			if k == key {
				out = append(out, w)
			}
		}
	}
	return out, err
}

type repeatsWaits struct{ storage.Store }

func (s repeatsWaits) ListActiveWaitsByKey(ctx context.Context, scope, key string) ([]storage.Wait, error) {
	return repeatByMention(ctx, s.Store, scope, key)
}

func (s repeatsWaits) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(repeatsWaitsTx{tx}) })
}

type repeatsWaitsTx struct{ storage.Tx }

func (t repeatsWaitsTx) ListActiveWaitsByKey(ctx context.Context, scope, key string) ([]storage.Wait, error) {
	return repeatByMention(ctx, t.Tx, scope, key)
}

var waitListIgnoresState = stateless("wait_list_ignores_state", "ListWaits ignores the state filter",
	func(s storage.Store) storage.Store { return waitsAnyState{s} })

func listWaitsAnyState(ctx context.Context, r storage.Reader, p *storage.ListWaitsParams) ([]storage.Wait, error) {
	q := *p
	q.State = ""
	return r.ListWaits(ctx, &q)
}

type waitsAnyState struct{ storage.Store }

func (s waitsAnyState) ListWaits(ctx context.Context, p *storage.ListWaitsParams) ([]storage.Wait, error) {
	return listWaitsAnyState(ctx, s.Store, p)
}

func (s waitsAnyState) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(waitsAnyStateTx{tx}) })
}

type waitsAnyStateTx struct{ storage.Tx }

func (t waitsAnyStateTx) ListWaits(ctx context.Context, p *storage.ListWaitsParams) ([]storage.Wait, error) {
	return listWaitsAnyState(ctx, t.Tx, p)
}

var timerRefires = txControl("timer_refires", "FireTimer of a fired timer reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return refiresTx{tx} })

type refiresTx struct{ storage.Tx }

func (t refiresTx) FireTimer(ctx context.Context, id string, at time.Time) error {
	if err := t.Tx.FireTimer(ctx, id, at); !errors.Is(err, storage.ErrFenced) {
		return err
	}
	return nil
}

var dueTimersExcludeNow = stateless("due_timers_exclude_now", "a timer due exactly now is not due yet",
	func(s storage.Store) storage.Store { return dueBefore{s} })

func listDueBefore(ctx context.Context, r storage.Reader, now time.Time, limit int) ([]storage.Timer, error) {
	return r.ListDueTimers(ctx, now.Add(-time.Millisecond), limit)
}

type dueBefore struct{ storage.Store }

func (s dueBefore) ListDueTimers(ctx context.Context, now time.Time, limit int) ([]storage.Timer, error) {
	return listDueBefore(ctx, s.Store, now, limit)
}

func (s dueBefore) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(dueBeforeTx{tx}) })
}

type dueBeforeTx struct{ storage.Tx }

func (t dueBeforeTx) ListDueTimers(ctx context.Context, now time.Time, limit int) ([]storage.Timer, error) {
	return listDueBefore(ctx, t.Tx, now, limit)
}
