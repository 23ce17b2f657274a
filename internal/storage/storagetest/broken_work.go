package storagetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the work area: Work, keys and inputs.

var updateWorkZeroesNilFields = txControl("update_work_zeroes_nil_fields", "UpdateWork clears the hold, the wait reason and the outcome it was not asked to change",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return zeroesNilTx{tx} })

type zeroesNilTx struct{ storage.Tx }

func (t zeroesNilTx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	q := *p
	empty, none := "", json.RawMessage(nil)
	for _, f := range []**string{&q.BlockedReason, &q.BlockedDetail, &q.WaitReason, &q.OutcomeMessage} {
		if *f == nil {
			*f = &empty
		}
	}
	if q.OutcomeData == nil {
		q.OutcomeData = &none
	}
	return t.Tx.UpdateWork(ctx, &q)
}

var workRevisionBlind = txControl("work_revision_blind", "UpdateWork ignores the revision it is fenced by",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return revisionBlindTx{tx} })

type revisionBlindTx struct{ storage.Tx }

func (t revisionBlindTx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	q := *p
	q.Revision = 0
	return t.Tx.UpdateWork(ctx, &q)
}

var swallowsKeyConflicts = txControl("swallows_key_conflicts", "AcquireKey of a key another Work owns reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsKeysTx{tx} })

type swallowsKeysTx struct{ storage.Tx }

func (t swallowsKeysTx) AcquireKey(ctx context.Context, p *storage.AcquireKeyParams) error {
	if err := t.Tx.AcquireKey(ctx, p); !errors.Is(err, storage.ErrDuplicate) {
		return err
	}
	return nil
}

var workListIgnoresUntil = stateless("work_list_ignores_until", "ListWork ignores the page's Until bound",
	func(s storage.Store) storage.Store {
		return workListMod{s, func(p *storage.ListWorkParams) { p.Until = nil }}
	})

var workListIgnoresParent = stateless("work_list_ignores_parent", "ListWork ignores the parent filter",
	func(s storage.Store) storage.Store {
		return workListMod{s, func(p *storage.ListWorkParams) { p.Parent = "" }}
	})

// workListMod changes the parameters of every ListWork.
type workListMod struct {
	storage.Store
	mod func(p *storage.ListWorkParams)
}

func (s workListMod) ListWork(ctx context.Context, p *storage.ListWorkParams) ([]storage.Work, error) {
	q := *p
	s.mod(&q)
	return s.Store.ListWork(ctx, &q)
}

func (s workListMod) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(workListModTx{tx, s.mod}) })
}

type workListModTx struct {
	storage.Tx
	mod func(p *storage.ListWorkParams)
}

func (t workListModTx) ListWork(ctx context.Context, p *storage.ListWorkParams) ([]storage.Work, error) {
	q := *p
	t.mod(&q)
	return t.Tx.ListWork(ctx, &q)
}

var claimableIgnoresHolds = stateless("claimable_ignores_holds", "ListClaimable lists every ready Work, held or with an attempt still stopping",
	func(s storage.Store) storage.Store { return readyIsClaimable{s} })

func listReady(ctx context.Context, r storage.Reader, limit int) ([]storage.Work, error) {
	return r.ListWork(ctx, &storage.ListWorkParams{State: storage.WorkReady, Page: storage.Page{Limit: limit}})
}

type readyIsClaimable struct{ storage.Store }

func (s readyIsClaimable) ListClaimable(ctx context.Context, limit int) ([]storage.Work, error) {
	return listReady(ctx, s.Store, limit)
}

func (s readyIsClaimable) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(readyIsClaimableTx{tx}) })
}

type readyIsClaimableTx struct{ storage.Tx }

func (t readyIsClaimableTx) ListClaimable(ctx context.Context, limit int) ([]storage.Work, error) {
	return listReady(ctx, t.Tx, limit)
}

var countWorkIgnoresStates = stateless("count_work_ignores_states", "CountWork counts the scope's Work in every state",
	func(s storage.Store) storage.Store { return countsAll{s} })

type countsAll struct{ storage.Store }

func (s countsAll) CountWork(ctx context.Context, scope string, _ []storage.WorkState) (int, error) {
	return s.Store.CountWork(ctx, scope, nil)
}

func (s countsAll) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(countsAllTx{tx}) })
}

type countsAllTx struct{ storage.Tx }

func (t countsAllTx) CountWork(ctx context.Context, scope string, _ []storage.WorkState) (int, error) {
	return t.Tx.CountWork(ctx, scope, nil)
}

var refusesRepeatedInput = txControl("refuses_repeated_input", "queuing an event a Work already has fails instead of returning the first Input",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return repeatRefusedTx{tx} })

type repeatRefusedTx struct{ storage.Tx }

func (t repeatRefusedTx) QueueInput(ctx context.Context, p *storage.QueueInputParams) (storage.Input, error) {
	ins, err := t.ListInputs(ctx, &storage.ListInputsParams{Work: p.Work, Limit: storage.MaxLimit})
	if err != nil {
		return storage.Input{}, err
	}
	for _, in := range ins {
		if in.Event == p.Event {
			return storage.Input{}, fmt.Errorf("%w: event %s is queued for %s", storage.ErrDuplicate, p.Event, p.Work)
		}
	}
	return t.Tx.QueueInput(ctx, p)
}

var inputsIgnoreUntil = stateless("inputs_ignore_until", "ListInputs ignores UntilPosition",
	func(s storage.Store) storage.Store { return inputsNoUntil{s} })

func listInputsNoUntil(ctx context.Context, r storage.Reader, p *storage.ListInputsParams) ([]storage.Input, error) {
	q := *p
	q.UntilPosition = 0
	return r.ListInputs(ctx, &q)
}

type inputsNoUntil struct{ storage.Store }

func (s inputsNoUntil) ListInputs(ctx context.Context, p *storage.ListInputsParams) ([]storage.Input, error) {
	return listInputsNoUntil(ctx, s.Store, p)
}

func (s inputsNoUntil) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(inputsNoUntilTx{tx}) })
}

type inputsNoUntilTx struct{ storage.Tx }

func (t inputsNoUntilTx) ListInputs(ctx context.Context, p *storage.ListInputsParams) ([]storage.Input, error) {
	return listInputsNoUntil(ctx, t.Tx, p)
}

// forgetsKeysOnReopen loses key ownership at a restart: a key index kept in
// memory.
var forgetsKeysOnReopen = afterReopen("forgets_keys_on_reopen", "the keys Work owned before a reopen have no owner after it",
	func(s storage.Store) storage.Store { return forgetsKeys{s} })

type forgetsKeys struct{ storage.Store }

func (s forgetsKeys) GetKeyOwner(_ context.Context, _, key string) (storage.Work, error) {
	return storage.Work{}, fmt.Errorf("%w: owner of key %s", storage.ErrNotFound, key)
}

func (s forgetsKeys) ListWorkKeys(context.Context, string) ([]string, error) { return []string{}, nil }

// insertDropsInput inserts a Work without the first input it was given.
var insertDropsInput = txControl("insert_drops_input", "InsertWork ignores the first input it is given",
	func(_ storage.Store, tx storage.Tx) storage.Tx {
		return insertWorkModTx{tx, func(p *storage.InsertWorkParams) { p.Input = "" }}
	})

// insertWorkModTx changes the parameters of every InsertWork.
type insertWorkModTx struct {
	storage.Tx
	mod func(p *storage.InsertWorkParams)
}

func (t insertWorkModTx) InsertWork(ctx context.Context, p *storage.InsertWorkParams) (storage.Work, error) {
	q := *p
	t.mod(&q)
	return t.Tx.InsertWork(ctx, &q)
}

// updateForgetsAttempts returns from UpdateWork the row as it was before
// the attempts it added, as a store that computes the row it returns
// from the row it read, and forgets a counter, would.
var updateForgetsAttempts = txControl("update_forgets_attempts", "UpdateWork returns a row without the attempts it added",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return forgetsAttemptsTx{tx} })

type forgetsAttemptsTx struct{ storage.Tx }

func (t forgetsAttemptsTx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	w, err := t.Tx.UpdateWork(ctx, p)
	w.Attempts -= p.AddAttempts
	return w, err
}

// insertForgetsOwnKey inserts a Work without the key it was to own.
var insertForgetsOwnKey = txControl("insert_forgets_own_key", "InsertWork ignores OwnKey",
	func(_ storage.Store, tx storage.Tx) storage.Tx {
		return insertWorkModTx{tx, func(p *storage.InsertWorkParams) { p.OwnKey = false }}
	})

// assumedInsertSkipsTakenID answers an insert of a Work assumed new
// from its parameters and, finding the id taken, never sends it: the
// transaction commits without the Work it reported inserted.
var assumedInsertSkipsTakenID = txControl("assumed_insert_skips_taken_id", "InsertWork with Assumed reports a taken id inserted and commits without it",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return skipsTakenTx{tx} })

type skipsTakenTx struct{ storage.Tx }

func (t skipsTakenTx) InsertWork(ctx context.Context, p *storage.InsertWorkParams) (storage.Work, error) {
	if p.Assumed {
		if _, err := t.Tx.GetWork(ctx, p.ID); err == nil {
			return storage.Work{ID: p.ID, Scope: p.Scope, Binding: p.Binding, State: p.State, CreatedAt: p.CreatedAt, UpdatedAt: p.CreatedAt, Revision: 1}, nil
		}
	}
	return t.Tx.InsertWork(ctx, p)
}

// claimsPastRevision claims a Work whatever became of it since it was
// listed: a changed, held or running Work is moved too.
var claimsPastRevision = txControl("claims_past_revision", "ClaimWork moves a Work whatever its revision, hold or state",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return claimsPastTx{tx} })

type claimsPastTx struct{ storage.Tx }

func (t claimsPastTx) ClaimWork(ctx context.Context, p *storage.ClaimWorkParams) ([]storage.Work, error) {
	var out []storage.Work
	running := storage.WorkRunning
	for _, l := range p.Work {
		cur, err := t.GetWork(ctx, l.ID)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		w, err := t.UpdateWork(ctx, &storage.UpdateWorkParams{ID: l.ID, State: &running, InputWatermark: &cur.InputCount, AddAttempts: 1, Now: p.Now})
		if err != nil {
			return out, err
		}
		out = append(out, w)
	}
	return out, nil
}

// wholeClaimInPart claims listed rows in part: what is still as listed
// moves and the rest is passed over, as a claim by revisions would.
var wholeClaimInPart = txControl("whole_claim_in_part", "ClaimWork of Listed rows moves those still as listed and commits without the rest",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return claimsInPartTx{tx} })

type claimsInPartTx struct{ storage.Tx }

func (t claimsInPartTx) ClaimWork(ctx context.Context, p *storage.ClaimWorkParams) ([]storage.Work, error) {
	if p.Listed == nil {
		return t.Tx.ClaimWork(ctx, p)
	}
	return t.Tx.ClaimWork(ctx, &storage.ClaimWorkParams{Work: storage.Revisions(p.Listed), Now: p.Now})
}
