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
	exe, err := r.holder(ctx, tx, executionID, epoch, owner)
	if err != nil {
		return exe, storage.Work{}, err
	}
	// A genuine segment that declared learns that first, whatever else
	// changed since.
	if _, err := tx.GetPendingDeclaration(ctx, executionID); err == nil {
		return exe, storage.Work{}, Refuse(extension.ErrAuthorityReleased, ErrAuthorityReleased.Code, "this segment already declared a wait or an outcome; its authority is released, so end the process")
	} else if !errors.Is(err, storage.ErrNotFound) {
		return exe, storage.Work{}, err
	}
	if err := r.leaseValid(exe); err != nil {
		return exe, storage.Work{}, err
	}
	w, err := tx.GetWork(ctx, exe.Work)
	if err != nil {
		return exe, w, err
	}
	if w.State != storage.WorkRunning {
		return exe, w, Refuse(extension.ErrForbidden, ErrNotRunning.Code, "Work %s is %s, not running", w.ID, w.State)
	}
	return exe, w, nil
}

// holder checks that the execution is running at epoch, held by owner
// (when given).
func (r *Runtime) holder(ctx context.Context, rd storage.Reader, executionID string, epoch int64, owner string) (storage.Execution, error) {
	exe, err := rd.GetExecution(ctx, executionID)
	if errors.Is(err, storage.ErrNotFound) {
		return exe, Refuse(extension.ErrForbidden, ErrExecutionNotFound.Code, "execution %s does not exist", executionID)
	}
	if err != nil {
		return exe, err
	}
	if exe.Epoch != epoch || (owner != "" && exe.Owner != owner) {
		return exe, Refuse(extension.ErrForbidden, ErrStaleEpoch.Code, "epoch %d of execution %s is not the live one", epoch, executionID)
	}
	if exe.State != storage.ExecutionRunning {
		return exe, Refuse(extension.ErrForbidden, ErrNotRunning.Code, "execution %s is %s, not running", executionID, exe.State)
	}
	return exe, nil
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
		return Refuse(extension.ErrAuthorityReleased, ErrAuthorityReleased.Code, "this segment already declared a wait or an outcome; its authority is released, so end the process")
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
		return Refuse(extension.ErrAuthorityReleased, ErrAuthorityReleased.Code, "this segment already declared a wait or an outcome; its authority is released, so end the process")
	}
	return err
}
