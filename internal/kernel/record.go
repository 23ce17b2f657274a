package kernel

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// ResultRecorder is told, as the last step inside an operator control's
// transaction, the result the control is about to return (an EmitResult,
// a CreateWorkResult, a ControlResult or a WakeResult, or the result of a
// control outside the kernel that calls RecordResult), and may write into
// that transaction: the management server records a request's
// Idempotency-Key response in the request's own transaction this way, so
// that the effect and its record commit together. An error rolls the
// control back.
type ResultRecorder func(ctx context.Context, tx storage.Tx, result any) error

type resultRecorderKey struct{}

// WithResultRecorder returns ctx carrying f for the controls called with
// it.
func WithResultRecorder(ctx context.Context, f ResultRecorder) context.Context {
	return context.WithValue(ctx, resultRecorderKey{}, f)
}

// RecordResult runs the recorder ctx carries, if any, inside tx with
// the result the control is about to return. The kernel's controls call
// it as the last step of their transaction; so does a control whose
// transaction is made outside the kernel (a configuration apply in
// configsvc, a credential's or an execution token's revoke), so that
// every operator control offers its transaction to the recorder the same
// way. Call it once per transaction, as its last write: a transaction
// retried runs it again, and the recorder starts over.
func RecordResult(ctx context.Context, tx storage.Tx, result any) error {
	if f, ok := ctx.Value(resultRecorderKey{}).(ResultRecorder); ok && f != nil {
		return f(ctx, tx, result)
	}
	return nil
}

// recordResult is RecordResult, for the kernel's own controls.
func recordResult(ctx context.Context, tx storage.Tx, result any) error {
	return RecordResult(ctx, tx, result)
}
