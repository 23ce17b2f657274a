package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// A control's result recorder runs inside the control's transaction, after
// its effect: it sees the effect there, and its error rolls the effect
// back with it. RecordResult, which controls outside the kernel call, runs
// the same recorder, and nothing without one.
func TestResultRecorderRunsInTheControlsTransaction(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var seen []any
	fail := errors.New("the record's write failed")
	recorder := func(failing bool) context.Context {
		return kernel.WithResultRecorder(operator, func(ctx context.Context, tx storage.Tx, result any) error {
			res, ok := result.(kernel.EmitResult)
			if !ok {
				t.Fatalf("the recorder was told %T, want the EmitResult", result)
			}
			if _, err := tx.GetEvent(ctx, res.Event.ID); err != nil {
				t.Fatalf("the recorder's transaction does not hold the accepted event: %v", err)
			}
			seen = append(seen, result)
			if failing {
				return fail
			}
			return nil
		})
	}
	_, err := b.ctl.Emit(recorder(true), kernel.EmitRequest{Scope: "s1", Type: "note.added", DeliveryID: "rec-1"})
	if !errors.Is(err, fail) || len(seen) != 1 {
		t.Fatalf("emit with a failing recorder = %v (recorder ran %d times), want its error", err, len(seen))
	}
	if evs, err := b.store.ListEvents(ctx, &storage.ListEventsParams{Scope: "s1"}); err != nil || len(evs) != 0 {
		t.Fatalf("events after the rolled-back emit: %+v, %v; want none", evs, err)
	}
	res, err := b.ctl.Emit(recorder(false), kernel.EmitRequest{Scope: "s1", Type: "note.added", DeliveryID: "rec-1"})
	if err != nil || len(seen) != 2 || seen[1].(kernel.EmitResult).Event.ID != res.Event.ID || res.Event.Replayed {
		t.Fatalf("emit = %+v, %v (recorder ran %d times)", res, err, len(seen))
	}

	var told any
	ctx = kernel.WithResultRecorder(ctx, func(_ context.Context, _ storage.Tx, result any) error { told = result; return nil })
	err = b.store.WithTx(ctx, func(tx storage.Tx) error { return kernel.RecordResult(ctx, tx, "tok_1") })
	if err != nil || told != "tok_1" {
		t.Fatalf("RecordResult told the recorder %v (%v), want tok_1", told, err)
	}
	err = b.store.WithTx(context.Background(), func(tx storage.Tx) error { return kernel.RecordResult(context.Background(), tx, "tok_2") })
	if err != nil || told != "tok_1" {
		t.Fatalf("RecordResult without a recorder = %v, told %v", err, told)
	}
}
