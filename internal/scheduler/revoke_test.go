package scheduler_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// storedIssuer issues tokens the way the toolbelt does as far as storage
// sees them: each one is a stored token record of its execution and epoch.
type storedIssuer struct{ store storage.Store }

func (s storedIssuer) Issue(ctx context.Context, req toolbelt.TokenRequest) (string, error) {
	plain := fmt.Sprintf("tok-%s-%d-%s", req.ExecutionID, req.Epoch, req.Reason)
	digest := sha256.Sum256([]byte(plain))
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertToken(ctx, &storage.Token{
			ID: fmt.Sprintf("tok_%s_%d", req.ExecutionID, req.Epoch), Digest: digest[:], Execution: req.ExecutionID,
			Scope: req.ScopeID, Work: req.WorkID, Binding: req.BindingID, Generation: req.Generation, Epoch: req.Epoch,
			Operations: []string{}, IssuedAt: t0, ExpiresAt: req.ExpiresAt,
		})
	})
	return plain, err
}

// revocationCheck wraps a store: when a transaction that finished an
// execution is about to commit, every token of that execution must
// already be revoked in it. A violation is recorded (and fails the
// transaction), so a finishing path that leaves a token live is caught
// even when its caller only logs the error.
type revocationCheck struct {
	storage.Store
	mu         sync.Mutex
	violations []string
}

func (c *revocationCheck) WithTx(ctx context.Context, fn func(storage.Tx) error) error {
	return c.Store.WithTx(ctx, func(tx storage.Tx) error {
		ft := &finishingTx{Tx: tx}
		if err := fn(ft); err != nil {
			return err
		}
		for _, id := range ft.finished {
			toks, err := tx.ListExecutionTokens(ctx, id)
			if err != nil {
				return err
			}
			for _, tok := range toks {
				if !tok.Revoked() {
					v := fmt.Sprintf("execution %s finished with token %s (epoch %d) still live", id, tok.ID, tok.Epoch)
					c.mu.Lock()
					c.violations = append(c.violations, v)
					c.mu.Unlock()
					return errors.New(v)
				}
			}
		}
		return nil
	})
}

func (c *revocationCheck) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// finishingTx records the executions an UpdateExecution of the
// transaction finished.
type finishingTx struct {
	storage.Tx
	finished []string
}

func (t *finishingTx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	exe, err := t.Tx.UpdateExecution(ctx, p)
	if err == nil && !exe.Live() {
		t.finished = append(t.finished, exe.ID)
	}
	return exe, err
}

// revokeHarness is a harness whose tokens are stored and whose every
// transaction is checked by a revocationCheck; mod, when set, changes the
// options after the issuer is set.
func revokeHarness(t *testing.T, mod func(*scheduler.Options)) (*harness, *revocationCheck) {
	t.Helper()
	var check *revocationCheck
	h := buildHarness(t, t.TempDir(), func(o *scheduler.Options) {
		o.Toolbelt = storedIssuer{o.Store}
		if mod != nil {
			mod(o)
		}
	}, func(s storage.Store) storage.Store {
		check = &revocationCheck{Store: s}
		return check
	})
	t.Cleanup(h.close)
	return h, check
}

// tokensRevokedAtFinish checks that the execution finished, that it had
// tokens, and that each was revoked at the moment it finished, by the
// transaction that finished it (no sweep runs here), and that no commit
// finished an execution with a token live.
func tokensRevokedAtFinish(t *testing.T, h *harness, check *revocationCheck, executionID string, wantTokens int) {
	t.Helper()
	if v := check.Violations(); len(v) != 0 {
		t.Fatalf("commits finished executions with live tokens: %v", v)
	}
	exe := h.execution(executionID)
	if exe.Live() {
		t.Fatalf("execution %s did not finish: %+v", executionID, exe)
	}
	toks, err := h.store.ListExecutionTokens(context.Background(), executionID)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != wantTokens {
		t.Fatalf("execution %s has %d tokens, want %d: %+v", executionID, len(toks), wantTokens, toks)
	}
	for _, tok := range toks {
		if !tok.RevokedAt.Equal(exe.UpdatedAt) {
			t.Fatalf("token %s of execution %s (finished at %v) revoked at %v", tok.ID, executionID, exe.UpdatedAt, tok.RevokedAt)
		}
	}
}

// The token was issued but the run directory could not be prepared: the
// execution finishes failed and its token is revoked in that same commit,
// although no run directory exists for the sweep to find.
func TestTokensRevokedWhenTheEndpointCannotBePrepared(t *testing.T) {
	h, check := revokeHarness(t, func(o *scheduler.Options) {
		o.ToolbeltEndpoints = func(context.Context, string, string) (scheduler.Endpoint, error) {
			return scheduler.Endpoint{}, errors.New("run directory not writable")
		}
	})
	w := h.create("b1")
	h.clock.Advance(time.Second)
	h.tick()
	if got := h.work(w.ID); got.BlockedReason != kernel.HoldToolbeltFailed {
		t.Fatalf("work = %+v", got)
	}
	exes, err := h.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: w.ID})
	if err != nil || len(exes) != 1 || exes[0].Result != storage.ResultFailed {
		t.Fatalf("executions = %+v, %v", exes, err)
	}
	tokensRevokedAtFinish(t, h, check, exes[0].ID, 1)
}

// A secret that cannot be resolved aborts the claim the same way.
func TestTokensRevokedWhenASecretCannotBeResolved(t *testing.T) {
	h, check := revokeHarness(t, func(o *scheduler.Options) {
		o.Secrets = func(context.Context, scheduler.SecretsRequest) (map[string]string, error) {
			return nil, &scheduler.SecretError{Name: "api_key", Code: "secret_unavailable"}
		}
	})
	w := h.create("b1")
	h.tick()
	exes, err := h.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: w.ID})
	if err != nil || len(exes) != 1 || exes[0].Result != storage.ResultFailed {
		t.Fatalf("executions = %+v, %v", exes, err)
	}
	tokensRevokedAtFinish(t, h, check, exes[0].ID, 1)
}

// Complete: the segment's result finishes the execution.
func TestTokensRevokedWhenTheSegmentCompletes(t *testing.T) {
	for _, out := range []executor.Outcome{executor.Succeeded, executor.Failed} {
		t.Run(string(out), func(t *testing.T) {
			h, check := revokeHarness(t, nil)
			h.create("b1")
			h.tick()
			seg := h.plain.Next(t)
			h.clock.Advance(time.Second)
			h.finish(seg, executor.Result{Outcome: out})
			tokensRevokedAtFinish(t, h, check, seg.Req.ExecutionID, 1)
		})
	}
}

// Complete of a declared wait that does not park finishes the execution.
func TestTokensRevokedWhenADeclaredWaitEndsTheExecution(t *testing.T) {
	h, check := revokeHarness(t, nil)
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.clock.Advance(time.Second)
	h.finish(seg, executor.Result{Outcome: executor.Succeeded})
	tokensRevokedAtFinish(t, h, check, seg.Req.ExecutionID, 1)
}

// Recovery of a segment that vanished finishes it lost: the tokens of
// both epochs are revoked.
func TestTokensRevokedWhenARecoveredSegmentIsLost(t *testing.T) {
	h, check := revokeHarness(t, nil)
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.plain.Gone(seg.Req.ExecutionID)
	h.restart("daemon-2")
	h.settle(seg)
	h.clock.Advance(time.Second)
	if _, err := h.s.RecoverOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.waitEpoch(seg.Req.ExecutionID, 2)
	h.tick()
	if exe := h.execution(seg.Req.ExecutionID); exe.Result != storage.ResultLost {
		t.Fatalf("execution = %+v", exe)
	}
	tokensRevokedAtFinish(t, h, check, seg.Req.ExecutionID, 2)
}

// A recovered stopping attempt whose executor this daemon lacks is
// abandoned lost.
func TestTokensRevokedWhenAStopIsAbandoned(t *testing.T) {
	h, check := revokeHarness(t, nil)
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
		t.Fatal(err)
	}
	h.mod = func(o *scheduler.Options) {
		o.Toolbelt = storedIssuer{o.Store}
		delete(o.Executors, "plain")
	}
	h.restart("daemon-2")
	h.settle(seg)
	h.clock.Advance(time.Second)
	if n, err := h.s.RecoverOrphans(context.Background()); err != nil || n != 1 {
		t.Fatalf("adoption: %d, %v", n, err)
	}
	if exe := h.execution(seg.Req.ExecutionID); exe.Result != storage.ResultLost {
		t.Fatalf("execution = %+v", exe)
	}
	tokensRevokedAtFinish(t, h, check, seg.Req.ExecutionID, 1)
}

// The stop of a cancelled running attempt is confirmed (ConfirmStopped):
// the execution finishes cancelled.
func TestTokensRevokedWhenAStopIsConfirmed(t *testing.T) {
	h, check := revokeHarness(t, nil)
	h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: seg.Req.ExecutionID}); err != nil {
		t.Fatal(err)
	}
	h.tick() // stops the fenced attempt
	h.settle(seg)
	h.clock.Advance(time.Second)
	h.tick() // applies its end as the physical stop
	if exe := h.execution(seg.Req.ExecutionID); exe.Result != storage.ResultCancelled {
		t.Fatalf("execution = %+v", exe)
	}
	tokensRevokedAtFinish(t, h, check, seg.Req.ExecutionID, 1)
}

// parked parks an attempt of a resumable binding on a declared wait.
func parked(t *testing.T, h *harness) (storage.Work, string) {
	t.Helper()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended})
	if exe := h.execution(seg.Req.ExecutionID); exe.State != storage.ExecutionParked {
		t.Fatalf("not parked: %+v", exe)
	}
	return w, seg.Req.ExecutionID
}

// Cancelling a parked attempt, or its Work, finishes it at once.
func TestTokensRevokedWhenAParkedAttemptIsCancelled(t *testing.T) {
	for _, target := range []string{"execution", "work"} {
		t.Run(target, func(t *testing.T) {
			h, check := revokeHarness(t, nil)
			w, id := parked(t, h)
			h.clock.Advance(time.Second)
			var err error
			if target == "execution" {
				_, err = h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: id})
			} else {
				_, err = h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID})
			}
			if err != nil {
				t.Fatal(err)
			}
			tokensRevokedAtFinish(t, h, check, id, 1)
		})
	}
}

// A parked attempt the binding's executor can no longer resume is
// superseded by a new execution when its Work is claimed again.
func TestTokensRevokedWhenAParkedAttemptIsSuperseded(t *testing.T) {
	h, check := revokeHarness(t, nil)
	w, id := parked(t, h)
	h.mod = func(o *scheduler.Options) {
		o.Toolbelt = storedIssuer{o.Store}
		o.Executors["resumer"] = h.plain // the binding's executor can no longer resume
	}
	h.restart("daemon-1")
	if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done"}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	h.tick()
	if exe := h.execution(id); exe.Result != storage.ResultCancelled {
		t.Fatalf("execution = %+v", exe)
	}
	tokensRevokedAtFinish(t, h, check, id, 1)
	if next := h.plain.Next(t); next.Req.ExecutionID == id {
		t.Fatalf("the parked execution was resumed: %+v", next.Req)
	}
}

// A claim given back at shutdown finishes its execution cancelled.
func TestTokensRevokedWhenAClaimIsGivenBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, check := revokeHarness(t, func(o *scheduler.Options) {
		o.Secrets = func(ctx context.Context, _ scheduler.SecretsRequest) (map[string]string, error) {
			cancel()
			return nil, errors.Join(errors.New("resolving api_key"), ctx.Err())
		}
	})
	w := h.create("b1")
	h.s.Tick(ctx)
	// The claim's secrets are resolved off the round: wait for that.
	if err := h.s.WaitPrepared(context.Background()); err != nil {
		t.Fatal(err)
	}
	exes, err := h.store.ListExecutions(context.Background(), &storage.ListExecutionsParams{Work: w.ID})
	if err != nil || len(exes) != 1 || exes[0].Result != storage.ResultCancelled {
		t.Fatalf("executions = %+v, %v", exes, err)
	}
	tokensRevokedAtFinish(t, h, check, exes[0].ID, 1)
}
