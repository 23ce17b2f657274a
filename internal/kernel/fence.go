package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// OutcomeSpec is a declared outcome: it replaces the executor's.
type OutcomeSpec struct {
	// Outcome is succeeded or failed.
	Outcome storage.WorkState `json:"outcome"`
	Message string            `json:"message,omitempty"`
	Data    json.RawMessage   `json:"data,omitempty"`
}

// Declaration is what a segment declares before it ends: exactly one of
// a Wait or an Outcome.
type Declaration struct {
	Wait    *WaitSpec
	Outcome *OutcomeSpec
}

// Check validates a declaration.
func (d Declaration) Check() error {
	switch {
	case (d.Wait == nil) == (d.Outcome == nil):
		return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "declare either a wait or an outcome")
	case d.Wait != nil:
		return d.Wait.Check()
	}
	if d.Outcome.Outcome != storage.WorkSucceeded && d.Outcome.Outcome != storage.WorkFailed {
		return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "a declared outcome is succeeded or failed")
	}
	if len(d.Outcome.Message) > 4096 {
		return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "an outcome message is at most 4096 bytes")
	}
	if len(d.Outcome.Data) > 0 {
		data, err := NormalizeData(d.Outcome.Data)
		if err != nil {
			return Refuse(extension.ErrInvalid, ErrInvalidDeclaration.Code, "outcome data must be a JSON object of at most 256 KiB")
		}
		d.Outcome.Data = data
	}
	return nil
}

// ParseDeclaration reads a stored declaration.
func ParseDeclaration(d storage.Declaration) (Declaration, error) {
	var out Declaration
	switch d.Kind {
	case storage.DeclaredWait:
		out.Wait = new(WaitSpec)
		return out, json.Unmarshal(d.Payload, out.Wait)
	case storage.DeclaredOutcome:
		out.Outcome = new(OutcomeSpec)
		return out, json.Unmarshal(d.Payload, out.Outcome)
	}
	return out, errors.New("kernel: unknown declaration kind " + string(d.Kind))
}

// LeaseGuard is the fence a toolbelt call (or anything acting for a
// segment) passes inside its transaction: the execution is running at
// epoch, held by owner, the segment has not declared a wait or an outcome
// yet, its lease is still valid for at least LeaseMargin (the holder stops
// trusting a lease that margin before it expires, so that no call it
// authorised is still in flight when another daemon may take the lease
// over), and its Work is running. A genuine segment (current epoch and
// owner) that already declared gets ErrAuthorityReleased, checked before
// the lease and the Work, so that it always learns its declaration landed
// (it unwraps to extension.ErrAuthorityReleased);
// every other failure is ErrStaleEpoch, ErrLeaseExpired, ErrNotRunning or
// ErrExecutionNotFound, all of which unwrap to extension.ErrForbidden
// (except not-found).
func (r *Runtime) LeaseGuard(ctx context.Context, tx storage.Reader, executionID string, epoch int64, owner string) (storage.Execution, error) {
	exe, _, err := r.LeaseGuardWork(ctx, tx, executionID, epoch, owner)
	return exe, err
}

// LeaseGuardWork is LeaseGuard, also returning the running Work it read,
// so a caller that needs the Work does not read it again.
func (r *Runtime) LeaseGuardWork(ctx context.Context, tx storage.Reader, executionID string, epoch int64, owner string) (storage.Execution, storage.Work, error) {
	g, err := r.LeaseGuardCall(ctx, tx, executionID, epoch, owner)
	return g.Execution, g.Work, err
}

// LeaseGuardCall is LeaseGuard returning all it read: the execution, its
// running Work and the latest configuration generation (for a toolbelt
// call's ceiling), of one snapshot, in one statement
// (storage.Reader.GetCallGuard). Its refusals and their order are
// LeaseGuard's: a missing execution, then a stale epoch or owner, an
// execution not running, a pending declaration, the lease, and last a
// Work not running. On a refusal the guard holds what was read.
func (r *Runtime) LeaseGuardCall(ctx context.Context, rd storage.Reader, executionID string, epoch int64, owner string) (storage.CallGuard, error) {
	g, err := rd.GetCallGuard(ctx, executionID)
	if errors.Is(err, storage.ErrNotFound) {
		return g, notFound(executionID)
	}
	if err != nil {
		return g, err
	}
	if err := holds(g.Execution, epoch, owner); err != nil {
		return g, err
	}
	// A genuine segment that declared learns that first, whatever else
	// changed since.
	if g.Declared {
		return g, authorityReleased()
	}
	if err := r.leaseValid(g.Execution); err != nil {
		return g, err
	}
	if g.Work.State != storage.WorkRunning {
		return g, Refuse(extension.ErrForbidden, ErrNotRunning.Code, "Work %s is %s, not running", g.Work.ID, g.Work.State)
	}
	return g, nil
}

// holder checks that the execution is running at epoch, held by owner
// (when given).
func (r *Runtime) holder(ctx context.Context, rd storage.Reader, executionID string, epoch int64, owner string) (storage.Execution, error) {
	exe, err := rd.GetExecution(ctx, executionID)
	if errors.Is(err, storage.ErrNotFound) {
		return exe, notFound(executionID)
	}
	if err != nil {
		return exe, err
	}
	return exe, holds(exe, epoch, owner)
}

// holds refuses an execution that is not running at epoch, held by owner
// (when given).
func holds(exe storage.Execution, epoch int64, owner string) error {
	if exe.Epoch != epoch || (owner != "" && exe.Owner != owner) {
		return Refuse(extension.ErrForbidden, ErrStaleEpoch.Code, "epoch %d of execution %s is not the live one", epoch, exe.ID)
	}
	if exe.State != storage.ExecutionRunning {
		return Refuse(extension.ErrForbidden, ErrNotRunning.Code, "execution %s is %s, not running", exe.ID, exe.State)
	}
	return nil
}

// notFound refuses a call for an execution that does not exist.
func notFound(executionID string) error {
	return Refuse(extension.ErrForbidden, ErrExecutionNotFound.Code, "execution %s does not exist", executionID)
}

// authorityReleased refuses a segment that declared already.
func authorityReleased() error {
	return Refuse(extension.ErrAuthorityReleased, ErrAuthorityReleased.Code, "this segment already declared a wait or an outcome; its authority is released, so end the process")
}

// leaseValid refuses a lease that expires within the margin.
func (r *Runtime) leaseValid(exe storage.Execution) error {
	if !r.clock.Now().Before(exe.LeaseExpiresAt.Add(-r.margin)) {
		return Refuse(extension.ErrForbidden, ErrLeaseExpired.Code, "the lease of execution %s has expired or is about to", exe.ID)
	}
	return nil
}

// Declare records a segment's declaration of a wait or an outcome for its
// epoch, under the fence, inside the caller's transaction (the toolbelt
// calls it after its own LeaseGuard). Authority is released at once: every
// later LeaseGuard of the execution answers ErrAuthorityReleased until the
// scheduler's Complete applies the declaration. A second declaration is
// ErrAuthorityReleased too.
func (r *Runtime) Declare(ctx context.Context, tx storage.Tx, executionID string, epoch int64, d Declaration) error {
	if err := d.Check(); err != nil {
		return err
	}
	exe, err := r.holder(ctx, tx, executionID, epoch, "")
	if err != nil {
		return err
	}
	if _, err := tx.GetPendingDeclaration(ctx, executionID); err == nil {
		return authorityReleased()
	}
	if err := r.leaseValid(exe); err != nil {
		return err
	}
	kind, payload := storage.DeclaredWait, any(d.Wait)
	if d.Outcome != nil {
		kind, payload = storage.DeclaredOutcome, d.Outcome
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	err = tx.InsertDeclaration(ctx, &storage.Declaration{Execution: exe.ID, Epoch: epoch, Kind: kind, Payload: body, DeclaredAt: r.clock.Now()})
	if errors.Is(err, storage.ErrDuplicate) {
		return authorityReleased()
	}
	return err
}
