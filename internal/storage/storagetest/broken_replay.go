package storagetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the replay area: the toolbelt's request records.

var swallowsDuplicateClaims = txControl("swallows_duplicate_claims", "InsertReplay of a recorded request reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx {
		return replayMod{Tx: tx, insert: swallow(storage.ErrDuplicate)}
	})

var refinishesDoneReplays = txControl("refinishes_done_replays", "FinishReplay of a request that is not claimed reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx {
		return replayMod{Tx: tx, finish: swallow(storage.ErrFenced)}
	})

var pretendsToDeleteDoneReplays = txControl("pretends_to_delete_done_replays", "DeleteReplay of a done record reports success",
	func(_ storage.Store, tx storage.Tx) storage.Tx {
		return replayMod{Tx: tx, del: swallow(storage.ErrFenced)}
	})

// swallow turns the sentinel target into success.
func swallow(target error) func(error) error {
	return func(err error) error {
		if errors.Is(err, target) {
			return nil
		}
		return err
	}
}

// replayMod filters the errors of the request record writes.
type replayMod struct {
	storage.Tx
	insert, finish, del func(error) error
}

func (t replayMod) InsertReplay(ctx context.Context, r *storage.Replay) error {
	err := t.Tx.InsertReplay(ctx, r)
	if t.insert != nil {
		err = t.insert(err)
	}
	return err
}

func (t replayMod) FinishReplay(ctx context.Context, r *storage.Replay) error {
	err := t.Tx.FinishReplay(ctx, r)
	if t.finish != nil {
		err = t.finish(err)
	}
	return err
}

func (t replayMod) DeleteReplay(ctx context.Context, exe, req string) error {
	err := t.Tx.DeleteReplay(ctx, exe, req)
	if t.del != nil {
		err = t.del(err)
	}
	return err
}

// storesWithheldResults keeps a sensitive operation's answer: a withheld
// record that carries a result or a refusal is stored as a plain one.
var storesWithheldResults = txControl("stores_withheld_results", "a withheld record carrying a result or a refusal is stored, as a plain record",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return keepsSensitiveTx{tx} })

type keepsSensitiveTx struct{ storage.Tx }

func unwithhold(r *storage.Replay) *storage.Replay {
	if r.Withheld && (r.Result != nil || r.ErrorCode != "" || r.ErrorMessage != "") {
		c := *r
		c.Withheld = false
		return &c
	}
	return r
}

func (t keepsSensitiveTx) InsertReplay(ctx context.Context, r *storage.Replay) error {
	return t.Tx.InsertReplay(ctx, unwithhold(r))
}

func (t keepsSensitiveTx) FinishReplay(ctx context.Context, r *storage.Replay) error {
	return t.Tx.FinishReplay(ctx, unwithhold(r))
}

var replaySweepExclusive = txControl("replay_sweep_exclusive", "the sweep keeps request records written exactly at the cut",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return exclusiveCutTx{Tx: tx, replays: true} })

// forgetsReplaysOnReopen keeps request records in memory: after a restart
// a repeat no longer replays.
var forgetsReplaysOnReopen = afterReopen("forgets_replays_on_reopen", "request records written before a reopen are gone after it",
	func(s storage.Store) storage.Store { return forgetsReplays{s} })

type forgetsReplays struct{ storage.Store }

func (s forgetsReplays) GetReplay(_ context.Context, _, req string) (storage.Replay, error) {
	return storage.Replay{}, fmt.Errorf("%w: request record %s", storage.ErrNotFound, req)
}
