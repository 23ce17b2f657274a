package toolbelttest

import (
	"context"
	"time"

	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// direct is the default driver: it claims and recovers through storage's
// fenced updates, as the scheduler would, and issues each token itself
// (IssueToken). It runs no executor, so the scheduled cases do not apply.
type direct struct{}

func (*direct) Open(*Fixture) error { return nil }

func (*direct) Close() error { return nil }

func (*direct) Claim(f *Fixture, w storage.Work) (*Attempt, error) {
	ctx := context.Background()
	now := f.Env.Clock.Now()
	var a Attempt
	err := f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		running := storage.WorkRunning
		var err error
		if a.Work, err = tx.UpdateWork(ctx, &storage.UpdateWorkParams{
			ID: w.ID, FromStates: []storage.WorkState{storage.WorkReady}, State: &running, AddAttempts: 1, Now: now,
		}); err != nil {
			return err
		}
		a.Execution, err = tx.InsertExecution(ctx, &storage.InsertExecutionParams{
			ID: f.ids.New(ids.Execution), Work: a.Work.ID, Scope: a.Work.Scope, Binding: a.Work.Binding, Executor: "test", Generation: Pinned,
			Owner: f.Env.Owner, LeaseExpiresAt: now.Add(Lease), Deadline: now.Add(Deadline), CreatedAt: now,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &a, issue(f, &a)
}

func issue(f *Fixture, a *Attempt) error {
	tok, err := f.TB.IssueToken(context.Background(), toolbelt.IssueRequest{Execution: a.Execution.ID, Epoch: a.Execution.Epoch})
	if err != nil {
		return err
	}
	a.Token, a.TokenID = tok.Token, tok.ID
	return nil
}

func (*direct) Recover(f *Fixture, a *Attempt) (*Attempt, error) {
	ctx := context.Background()
	now := f.Env.Clock.Advance(Lease + time.Minute)
	next := *a
	err := f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		next.Execution, err = tx.AdvanceEpoch(ctx, &storage.AdvanceEpochParams{
			ID: a.Execution.ID, FromEpoch: a.Execution.Epoch, FromStates: []storage.ExecutionState{storage.ExecutionRunning},
			ExpiredBy: now, State: storage.ExecutionRunning, Owner: f.Env.Owner, LeaseExpiresAt: now.Add(Lease), Now: now,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &next, issue(f, &next)
}
