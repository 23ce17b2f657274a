package kernel

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// ResultRecorder is told, as the last step inside an operator control's
// transaction, the result the control is about to return (an EmitResult,
// a CreateWorkResult, a ControlResult or a WakeResult), and may write
// into that transaction: the management server records a request's
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

// recordResult runs the recorder ctx carries, if any.
func recordResult(ctx context.Context, tx storage.Tx, result any) error {
	if f, ok := ctx.Value(resultRecorderKey{}).(ResultRecorder); ok && f != nil {
		return f(ctx, tx, result)
	}
	return nil
}
