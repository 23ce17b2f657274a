package toolbelt

import (
	"context"
	"encoding/json"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// SetFlightWaitHook has f called whenever a call starts waiting for a
// running call of the same execution and request ID. Set it before any
// call.
func SetFlightWaitHook(tb *Toolbelt, f func()) { tb.flightWait = f }

// StepCall is a call that passed the checks outside storage, for the
// tests of the call path's steps alone.
type StepCall struct{ c *toolCall }

// NewStepCall authenticates token and builds its call of op with input and
// requestID, as Call does before it reaches storage.
func NewStepCall(ctx context.Context, tb *Toolbelt, token, op, input, requestID string) (StepCall, error) {
	t, err := tb.authenticate(ctx, token)
	if err != nil {
		return StepCall{}, err
	}
	in, hash, err := canonicalInput(json.RawMessage(input))
	if err != nil {
		return StepCall{}, err
	}
	return StepCall{&toolCall{tok: t, op: op, input: in, hash: hash, requestID: requestID}}, nil
}

// StepRecord is what a step left in the call record.
type StepRecord struct {
	Result string
	Gate   string
	// Done: the call record was written inside the step's transaction.
	Done bool
}

func recordOf(c *callLog) StepRecord {
	return StepRecord{Result: c.rec.Result, Gate: c.rec.Gate, Done: c.done}
}

// EnterFlight is the in-flight dedupe step.
func EnterFlight(ctx context.Context, tb *Toolbelt, key string) (leave func(), err error) {
	return tb.enterFlight(ctx, key)
}

// DecideClaim is the claim step's decision, by name: run, insert, rerun or
// replay.
func DecideClaim(found bool, rp storage.Replay, requestID string, handler, sensitive bool) string {
	return [...]string{claimRun: "run", claimInsert: "insert", claimRerun: "rerun", claimReplay: "replay"}[decideClaim(found, rp, requestID, handler, sensitive)]
}

// Claim is the claim step.
func Claim(ctx context.Context, tb *Toolbelt, call StepCall, handler, sensitive bool) (replay bool, out json.RawMessage, claimed bool, err error) {
	cl, err := tb.claim(ctx, call.c, handler, sensitive)
	return cl.replay, cl.out, cl.claimed, err
}

// ReleaseClaim is the step that gives a claim back.
func ReleaseClaim(ctx context.Context, tb *Toolbelt, call StepCall, claimed bool) {
	tb.releaseClaim(ctx, call.c, claimed)
}

// RunGates is the gates step, for an operation registered by owner.
func RunGates(ctx context.Context, tb *Toolbelt, owner string, call StepCall) (*extension.WaitPlan, string, error) {
	return tb.runGates(ctx, owner, call.c, call.c.authority())
}

// Translate is the translate step.
func Translate(ctx context.Context, tb *Toolbelt, call StepCall, tr extension.Translator) (json.RawMessage, StepRecord, error) {
	c := &callLog{rec: storage.ToolbeltCall{Operation: call.c.op}}
	c.token(call.c.tok)
	out, _, err := tb.translate(ctx, c, call.c, tr, call.c.authority())
	return out, recordOf(c), err
}

// Handle is the handle step.
func Handle(ctx context.Context, h extension.Handler, call StepCall) (json.RawMessage, *extension.OperationError, error) {
	return handle(ctx, h, call.c, call.c.authority())
}

// Record is the record step.
func Record(ctx context.Context, tb *Toolbelt, call StepCall, claimed, sensitive bool, result json.RawMessage, oe *extension.OperationError) (StepRecord, error) {
	c := &callLog{rec: storage.ToolbeltCall{Operation: call.c.op}}
	c.token(call.c.tok)
	err := tb.record(ctx, c, call.c, claimed, sensitive, result, oe)
	return recordOf(c), err
}

// SetGateTimeout sets the gate timeout of tb (before any call).
func SetGateTimeout(tb *Toolbelt, d time.Duration) { tb.opts.GateTimeout = d }
