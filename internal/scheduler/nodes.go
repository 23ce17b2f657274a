package scheduler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Several daemons on one store: each state directory is a node
// (Options.Node), and an execution records the node whose daemon launched
// its segment. A process can be adopted only on its own node, so recovery
// treats an expired attempt of another node as lost, and a daemon that
// lost a lease to another node stops the process it left behind.

// elsewhere reports whether exe's segment was launched on another node.
// An execution without a node, or a scheduler without one, is this
// node's.
func (s *Scheduler) elsewhere(exe storage.Execution) bool {
	return s.o.Node != "" && exe.Node != "" && exe.Node != s.o.Node
}

// lostElsewhere recovers a launched attempt of another node whose lease
// expired: its process cannot be adopted here, so, in one transaction,
// the attempt is fenced with a new epoch (its old epoch's toolbelt calls
// and renewals are refused from now on), finishes lost, and its Work, if
// it has not ended, is held attempt_lost, as a segment recovery finds
// gone: the Work goes on by the retry policy. The node's own daemon, if it
// is alive, finds its lease lost and stops the process (checkDetached).
// ErrFenced when another recovery got there first.
func (s *Scheduler) lostElsewhere(ctx context.Context, old storage.Execution, expiredOnly bool) error {
	now := s.now()
	var exe storage.Execution
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		if exe, err = tx.AdvanceEpoch(ctx, s.takeOver(old, now, expiredOnly)); err != nil {
			return err
		}
		st, res := storage.ExecutionFinished, storage.ResultLost
		msg := fmt.Sprintf("lost: its segment ran on node %s, whose daemon stopped renewing its lease; a process there cannot be adopted by another node", old.Node)
		if old.State == storage.ExecutionStopping && old.Message != "" {
			msg = old.Message + "; " + msg
		}
		fin, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{
			ID: exe.ID, Epoch: exe.Epoch, Owner: s.o.Owner, FromStates: []storage.ExecutionState{old.State}, State: &st, Result: &res, Message: &msg, Now: now,
		})
		if err != nil {
			return err
		}
		if err := storage.RevokeFinishedTokens(ctx, tx, fin, now); err != nil {
			return err
		}
		reason := kernel.HoldAttemptLost
		detail := fmt.Sprintf("execution %s was lost with its node %s (its lease expired); check what it did, then retry the Work", exe.ID, old.Node)
		up := &storage.UpdateWorkParams{ID: exe.Work, FromStates: storage.NonterminalWorkStates, BlockedReason: &reason, BlockedDetail: &detail, Now: now}
		if old.State == storage.ExecutionRunning {
			ready := storage.WorkReady
			up.State = &ready
		}
		_, err = tx.UpdateWork(ctx, up)
		if errors.Is(err, storage.ErrFenced) {
			// The Work has ended (a Work cancel): nothing to hold.
			return nil
		}
		return err
	})
	if err == nil {
		s.o.Logger.Warn("attempt of another node lost: its lease expired", "work", exe.Work, "execution", exe.ID, "epoch", exe.Epoch, "node", old.Node, "from_owner", old.Owner)
	}
	return err
}

// watchDetached keeps a segment whose lease this scheduler lost: until it
// is recovered, nobody observes its process. Heartbeat checks it
// (checkDetached) until a recovery takes it over.
func (s *Scheduler) watchDetached(seg *segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.detached == nil {
		s.detached = map[string]*segment{}
	}
	s.detached[seg.exe.ID] = seg
}

// checkDetached looks at every detached segment's execution: not
// recovered yet, it is kept; taken over by another daemon and ended (on
// a shared store, another node, which cannot adopt the process and has
// recovered it as lost), its process is stopped here, since nobody else
// can; otherwise (recovered by this scheduler, which adopted the process
// again, or by a daemon that adopted it, or gone) it is forgotten.
func (s *Scheduler) checkDetached(ctx context.Context) error {
	s.mu.Lock()
	segs := make([]*segment, 0, len(s.detached))
	for _, seg := range s.detached {
		segs = append(segs, seg)
	}
	s.mu.Unlock()
	var errs []error
	for _, seg := range segs {
		cur, err := s.store.GetExecution(ctx, seg.exe.ID)
		switch {
		case storage.IsNotFound(err):
		case err != nil:
			errs = append(errs, err)
			continue
		case cur.Epoch == seg.exe.Epoch:
			continue // not recovered yet
		case cur.Owner != s.o.Owner && !cur.Live():
			// Taken over and ended without its process: lost by
			// another node, which could not adopt it.
			s.stopDetached(seg, cur)
		}
		s.mu.Lock()
		if s.detached[seg.exe.ID] == seg {
			delete(s.detached, seg.exe.ID)
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// stopDetached stops the process of a detached segment another daemon
// took over. Its outcome is not this scheduler's to record: the
// execution's current epoch belongs to the other daemon.
func (s *Scheduler) stopDetached(seg *segment, cur storage.Execution) {
	s.o.Logger.Warn("a lost lease was taken over by another daemon; stopping the process left here", "execution", seg.exe.ID, "epoch", seg.exe.Epoch, "now_epoch", cur.Epoch, "now_owner", cur.Owner)
	s.stopLeft(seg)
}

// stopLeft stops the process of seg, which this scheduler does not
// observe, on a goroutine of its own.
func (s *Scheduler) stopLeft(seg *segment) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		if err := seg.ex.Stop(s.base, seg.req, s.o.StopGrace); err != nil && s.base.Err() == nil {
			s.o.Logger.Error("stopping the process of a lost lease failed; stop it by hand", "execution", seg.exe.ID, "epoch", seg.exe.Epoch, "dir", seg.req.Dir, "error", err)
		}
	}()
}

// lostElsewhereAfterLaunch reports whether exe finished lost at an epoch
// past its launch: an attempt launched here that another node recovered
// as lost (lostElsewhere never marks a launch; a recovery here always
// does), whose process may still run here.
func lostElsewhereAfterLaunch(exe storage.Execution) bool {
	return exe.State == storage.ExecutionFinished && exe.Result == storage.ResultLost &&
		exe.LaunchedEpoch > 0 && exe.LaunchedEpoch < exe.Epoch
}

// stopLostElsewhere stops, in the background, the process of every
// attempt this node launched that another node recovered as lost while
// no daemon of this node ran (a daemon down longer than a lease on a host
// that stayed up: its processes ran on under their supervisors). Such an
// attempt finished lost at an epoch past its launch (lostElsewhere never
// marks a launch; a recovery here always does). A process already gone is
// left as it is; an execution whose directory is gone is skipped, and
// so is one of a Dirless executor, which never had one.
func (s *Scheduler) stopLostElsewhere(ctx context.Context) error {
	if s.o.Node == "" {
		return nil
	}
	var after *storage.Position
	for {
		page, err := s.store.ListExecutions(ctx, &storage.ListExecutionsParams{
			States: []storage.ExecutionState{storage.ExecutionFinished}, Results: []storage.ExecutionResult{storage.ResultLost},
			Nodes: []string{s.o.Node}, Page: storage.Page{Limit: storage.MaxLimit, After: after},
		})
		if err != nil {
			return err
		}
		for _, exe := range page {
			if !lostElsewhereAfterLaunch(exe) {
				continue
			}
			ex := s.executor(exe.Executor)
			if ex != nil && ex.Info().Dirless {
				// Nothing of its segments is on disk to find, as for
				// an execution whose directory is gone.
				continue
			}
			dir := filepath.Join(s.o.ExecutionsDir, exe.ID)
			if _, err := os.Stat(dir); err != nil {
				continue
			}
			if ex == nil {
				s.o.Logger.Warn("an attempt recovered as lost by another node cannot be stopped: its executor is not available here; stop its process by hand", "execution", exe.ID, "executor", exe.Executor, "dir", dir)
				continue
			}
			seg := &segment{exe: exe, ex: ex, req: executor.RunRequest{
				ExecutionID: exe.ID, WorkID: exe.Work, ScopeID: exe.Scope, BindingID: exe.Binding, Epoch: exe.LaunchedEpoch, Dir: dir, Deadline: exe.Deadline,
			}}
			// Most are long gone: their stop finds nothing to do.
			s.o.Logger.Info("stopping what is left of an attempt another node recovered as lost", "execution", exe.ID, "epoch", exe.LaunchedEpoch)
			s.stopLeft(seg)
		}
		if len(page) < storage.MaxLimit {
			return nil
		}
		last := page[len(page)-1]
		after = &storage.Position{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}
