package toolbelt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bearer"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Results recorded as toolbelt.result besides ok and a handler's own code.
const (
	ResultOK                = "ok"
	ResultForbidden         = "forbidden"
	ResultAuthorityReleased = "authority_released"
	ResultRequestConflict   = "request_conflict"
	ResultInvalid           = "invalid"
	ResultConflict          = "conflict"
	ResultGateRefused       = "gate_refused"
	ResultParked            = "parked"
	ResultError             = "error"
)

// Operations recorded for the toolbelt's reads.
const (
	RecordGuidance = "toolbelt.guidance"
	RecordServing  = "toolbelt.serving"
)

// ErrRequestConflict: a request ID was reused with another operation or
// input. It unwraps to extension.ErrRequestConflict (409).
var ErrRequestConflict = &kernel.Error{Code: "request_conflict", Kind: extension.ErrRequestConflict}

// ErrGateFailed is the refusal of a gate that panicked or answered with
// something other than an operation error: the host fails closed.
const ErrGateFailed = "gate_failed"

// callLog is the call record of one request.
type callLog struct {
	rec    storage.ToolbeltCall
	done   bool   // recorded inside the request's own transaction
	socket string // the execution whose socket the request came in on
}

func (c *callLog) token(t storage.Token) {
	c.rec.Execution, c.rec.Epoch, c.rec.Token = t.Execution, t.Epoch, t.ID
}

// resultOf is toolbelt.result of an error.
func resultOf(err error) string {
	var oe *extension.OperationError
	var gr *extension.GateRefusal
	switch {
	case err == nil:
		return ResultOK
	case errors.As(err, &gr):
		return ResultGateRefused
	case errors.As(err, &oe):
		return oe.Code
	case errors.Is(err, extension.ErrAuthorityReleased):
		return ResultAuthorityReleased
	case errors.Is(err, extension.ErrForbidden), errors.Is(err, extension.ErrUnauthorized):
		return ResultForbidden
	case errors.Is(err, extension.ErrRequestConflict):
		return ResultRequestConflict
	case errors.Is(err, extension.ErrInvalid):
		return ResultInvalid
	case errors.Is(err, extension.ErrConflict):
		return ResultConflict
	}
	return ResultError
}

// insertCall writes the call record inside tx.
func (tb *Toolbelt) insertCall(ctx context.Context, tx storage.Tx, c *callLog, result string) error {
	c.rec.ID = tb.ids.New("tbc")
	c.rec.Kind = storage.ToolbeltCalled
	c.rec.Result = result
	c.rec.At = tb.clock.Now()
	c.done = true
	return tx.InsertToolbeltCall(ctx, &c.rec)
}

// refusalWindow is one source's refusal records in its current window.
type refusalWindow struct {
	start      time.Time
	recorded   int // records written in the window, the suppressed marker included
	suppressed int // refusals neither recorded nor logged in the window
}

// admitRefusal decides whether a refusal from source is recorded (and
// logged) in full, marked ResultSuppressed, or only counted (see
// RefusalBurst). It logs what the source's previous window suppressed.
func (tb *Toolbelt) admitRefusal(source string) (record, marker bool) {
	now := tb.clock.Now()
	tb.refusalMu.Lock()
	defer tb.refusalMu.Unlock()
	w := tb.refusals[source]
	if w == nil || !now.Before(w.start.Add(RefusalWindow)) {
		if w != nil && w.suppressed > 0 {
			tb.log.Warn("toolbelt refusals were counted, not recorded", "source", source, "suppressed", w.suppressed,
				"window_start", w.start, "window", RefusalWindow.String())
		}
		if len(tb.refusals) >= 4096 {
			// Forget the sources whose window ended.
			for k, old := range tb.refusals {
				if !now.Before(old.start.Add(RefusalWindow)) {
					delete(tb.refusals, k)
				}
			}
		}
		w = &refusalWindow{start: now}
		tb.refusals[source] = w
	}
	switch {
	case w.recorded < RefusalBurst:
		w.recorded++
		return true, false
	case w.recorded == RefusalBurst:
		w.recorded++
		return true, true
	}
	w.suppressed++
	return false, false
}

// refusalSource is the source a refusal is rate-limited under: the
// token's execution when it was found, else the socket's execution.
func refusalSource(c *callLog) string {
	if c.rec.Execution != "" {
		return "execution:" + c.rec.Execution
	}
	return "socket:" + c.socket
}

// finish records a request that was not recorded in its own transaction
// (a refusal, a replay, a read) and logs a refusal's precise reason. A
// refusal is rate-limited per source (RefusalBurst).
func (tb *Toolbelt) finish(ctx context.Context, c *callLog, err error) {
	tb.observe(c, err)
	if err != nil && !c.done {
		record, marker := tb.admitRefusal(refusalSource(c))
		if !record {
			return
		}
		if marker {
			tb.log.Warn("toolbelt refusals from one source exceed the record budget; the rest of its window is counted only",
				"source", refusalSource(c), "budget", RefusalBurst, "window", RefusalWindow.String())
			c.rec.Result = ResultSuppressed
		}
	}
	if err != nil {
		tb.log.Info("toolbelt request refused", "operation", c.rec.Operation, "execution", c.rec.Execution,
			"epoch", c.rec.Epoch, "token_id", c.rec.Token, "result", resultOf(err), "reason", err.Error())
	}
	if c.done {
		return
	}
	c.rec.ID = tb.ids.New("tbc")
	c.rec.Kind = storage.ToolbeltCalled
	if err != nil {
		c.rec.Kind = storage.ToolbeltRejected
	}
	if c.rec.Result == "" {
		c.rec.Result = resultOf(err)
	}
	c.rec.At = tb.clock.Now()
	// A refusal is recorded even when the caller has gone.
	wctx := context.WithoutCancel(ctx)
	if werr := tb.store.WithTx(wctx, func(tx storage.Tx) error {
		return tx.InsertToolbeltCall(wctx, &c.rec)
	}); werr != nil {
		tb.log.Error("toolbelt call record not written", "operation", c.rec.Operation, "execution", c.rec.Execution, "error", werr.Error())
	}
}

// OtherOperation is the operation Options.OnCall is told for a name this
// toolbelt does not serve.
const OtherOperation = "other"

// observe tells Options.OnCall the request's operation and result.
func (tb *Toolbelt) observe(c *callLog, err error) {
	if tb.opts.OnCall == nil {
		return
	}
	op := c.rec.Operation
	if _, builtin := builtins[op]; !builtin && op != RecordGuidance && op != RecordServing {
		if _, ok := tb.operation(op); !ok {
			op = OtherOperation
		}
	}
	result := c.rec.Result
	if result == "" {
		result = resultOf(err)
	}
	tb.opts.OnCall(op, result)
}

// checkRequestID: 1 to MaxRequestID printable ASCII characters.
func checkRequestID(id string) error {
	if len(id) > MaxRequestID {
		return kernel.Refuse(extension.ErrInvalid, "invalid_request", "a request ID is at most %d characters", MaxRequestID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return kernel.Refuse(extension.ErrInvalid, "invalid_request", "a request ID is printable ASCII without spaces")
		}
	}
	return nil
}

// canonicalInput checks that input is one JSON object and returns it
// compacted and the hex SHA-256 of its canonical form (RFC 8785), so that
// whitespace and member order never make two requests differ.
func canonicalInput(input json.RawMessage) (json.RawMessage, string, error) {
	v, err := compactInput(input)
	if err != nil {
		return nil, "", err
	}
	c := jsontext.Value(bytes.Clone(v))
	if err := c.Canonicalize(); err != nil {
		return nil, "", kernel.Refuse(extension.ErrInvalid, "invalid_request", "the input holds a number out of range")
	}
	sum := sha256.Sum256(c)
	return json.RawMessage(v), hex.EncodeToString(sum[:]), nil
}

// compactInput is canonicalInput without the hash, for a call without a
// request ID, whose input is never compared with another's: the same
// checks and refusals, the input compacted.
func compactInput(input json.RawMessage) (jsontext.Value, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	v := jsontext.Value(bytes.Clone(input))
	if err := v.Compact(); err != nil || v.Kind() != '{' {
		return nil, kernel.Refuse(extension.ErrInvalid, "invalid_request", "the input must be one JSON object ({} when the operation takes none)")
	}
	if !numbersInRange(v) {
		return nil, kernel.Refuse(extension.ErrInvalid, "invalid_request", "the input holds a number out of range: a number must be one a 64-bit float holds")
	}
	return v, nil
}

// numbersInRange reports whether every number of v, valid JSON, is one a
// float64 holds: none overflows to an infinity and none, being nonzero,
// underflows to zero. Canonicalization would otherwise round such numbers
// silently, so two different inputs would hash to the same request.
func numbersInRange(v jsontext.Value) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return true // the end (v was already checked)
		}
		if tok.Kind() != '0' {
			continue
		}
		raw := tok.String()
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return false
		}
		if f == 0 {
			mant, _, _ := strings.Cut(strings.ToLower(raw), "e")
			if strings.Trim(mant, "-+0.") != "" {
				return false
			}
		}
	}
}

// Call runs one toolbelt call through the check chain, in the spec's
// order: the token (digest, revocation, exclusive expiry), the narrowing
// assertions, the operation declared and in the token's allowlist, the
// current ceiling (outside storage), then, inside the call's transaction,
// the lease guard, the ceiling again as of the latest committed generation
// (ceilingInTx) and the replay lookup, and for an extension operation
// its gates, before the operation runs. ErrAuthorityReleased (wrapped)
// refuses a genuine token whose segment already declared; every other
// refusal of the chain is the bare ErrForbidden. Every call and refusal is
// recorded (toolbelt.called / toolbelt.rejected).
//
// The token is taken from the toolbelt's token cache when it is there
// (see tokenCache): every path of a call then runs the lease guard in
// storage, which refuses a token whose execution finished or moved to
// another epoch, the only revocations that happen outside the toolbelt.
// A call the chain refused on a cached token whose stored record is no
// longer live (revoked, expired, swept) is run again from storage, so it
// is refused exactly as it would have been without the cache.
func (tb *Toolbelt) Call(ctx context.Context, token string, req extension.CallRequest) (extension.CallResult, error) {
	c, res, hit, err := tb.call(ctx, token, req, true)
	if err != nil && hit && chainRefusal(err) && tb.storedRefusal(ctx, token) {
		c, res, _, err = tb.call(ctx, token, req, false)
	}
	if err == nil {
		c.rec.Replayed = res.Replayed
	}
	tb.finish(ctx, c, err)
	return res, err
}

// chainRefusal reports whether err is a refusal of the check chain
// (forbidden, or the authority released) rather than an operation's own
// answer or a gate's.
func chainRefusal(err error) bool {
	var oe *extension.OperationError
	var gr *extension.GateRefusal
	if errors.As(err, &oe) || errors.As(err, &gr) {
		return false
	}
	return errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased)
}

// storedRefusal reports whether the stored record of token is no longer
// live (authenticate refuses it); its cache entry is dropped then.
func (tb *Toolbelt) storedRefusal(ctx context.Context, token string) bool {
	if _, err := tb.authenticate(ctx, token); err == nil {
		return false
	}
	tb.tokens.drop(bearer.DigestOf(token))
	return true
}

// call is Call's chain; cached says whether the token may come from the
// token cache, and hit whether it did.
func (tb *Toolbelt) call(ctx context.Context, token string, req extension.CallRequest, cached bool) (c *callLog, res extension.CallResult, hit bool, err error) {
	c = &callLog{rec: storage.ToolbeltCall{Operation: clip(req.Operation)}, socket: req.Assertions.SocketExecution}
	var t storage.Token
	if cached {
		t, hit, err = tb.authenticateCached(ctx, token)
	} else {
		t, err = tb.authenticate(ctx, token)
	}
	if t.ID != "" {
		// A revoked or expired token is still found: its refusal is
		// recorded against its execution, epoch and id.
		c.token(t)
	}
	if err != nil {
		return c, res, hit, err
	}
	if err := checkAssertions(t, req.Assertions); err != nil {
		return c, res, hit, err
	}
	defer func() { tb.classifyRefusal(c, t, req.Operation, err) }()
	if !tb.declaredFor(t.Generation, t.Scope, req.Operation) {
		return c, res, hit, notGranted{forbid("operation %q is not declared on this toolbelt for scope %s in generation %d", clip(req.Operation), t.Scope, t.Generation)}
	}
	if !slices.Contains(t.Operations, req.Operation) {
		return c, res, hit, notGranted{forbid("operation %s is not in token %s's allowlist", req.Operation, t.ID)}
	}
	if !tb.opts.Authorize(t.Scope, req.Operation) {
		return c, res, hit, notGranted{forbid("the current ceiling of scope %s does not allow %s", t.Scope, req.Operation)}
	}
	if err := checkRequestID(req.RequestID); err != nil {
		return c, res, hit, err
	}
	// The input's hash is only ever compared under a request ID.
	var input json.RawMessage
	var hash string
	if req.RequestID != "" {
		input, hash, err = canonicalInput(req.Input)
	} else {
		var v jsontext.Value
		v, err = compactInput(req.Input)
		input = json.RawMessage(v)
	}
	if err != nil {
		return c, res, hit, err
	}
	call := &toolCall{tok: t, op: req.Operation, input: input, hash: hash, requestID: req.RequestID}
	res.Operation = req.Operation
	if b, ok := builtins[req.Operation]; ok {
		res.Result, res.Replayed, err = tb.runInTx(ctx, c, call, func(ctx context.Context, tx storage.Tx, s *segment) (json.RawMessage, error) {
			return b(tb, ctx, tx, s, call)
		})
		return c, res, hit, err
	}
	r, _ := tb.operation(req.Operation)
	res.Result, res.Replayed, err = tb.runExtension(ctx, c, call, r)
	return c, res, hit, err
}

// notGranted marks a refusal of the grant links of the chain: the
// operation is not declared, not in the token's allowlist, or outside the
// scope's ceiling (now or as of the latest generation). It unwraps to the
// refusal itself.
type notGranted struct{ error }

func (e notGranted) Unwrap() error { return e.error }

// classifyRefusal sets toolbelt.refusal of a call the grant links refused
// (notGranted): config_drift when the binding's playbook declares the
// operation in the generation the token's execution is pinned to, so the
// configuration changed under the playbook since.
func (tb *Toolbelt) classifyRefusal(c *callLog, t storage.Token, op string, err error) {
	var ng notGranted
	if err == nil || !errors.As(err, &ng) {
		return
	}
	if ba, ok := tb.opts.Bindings(t.Generation, t.Scope, t.Binding); ok && slices.Contains(ba.Playbook, op) {
		c.rec.Refusal = storage.RefusalConfigDrift
	}
}

func clip(s string) string {
	if len(s) > 128 {
		return s[:128]
	}
	return s
}

// toolCall is a call that passed the checks outside storage.
type toolCall struct {
	tok       storage.Token
	op        string
	input     json.RawMessage
	hash      string
	requestID string
}

func (c *toolCall) authority() extension.Authority {
	return extension.Authority{
		Scope: c.tok.Scope, Work: c.tok.Work, Execution: c.tok.Execution, Binding: c.tok.Binding, Generation: c.tok.Generation,
		Epoch: c.tok.Epoch, TokenID: c.tok.ID, Operation: c.op, RequestID: c.requestID,
	}
}

// segment is what the lease guard established inside a transaction.
type segment struct {
	exe  storage.Execution
	work storage.Work
}

// lookup is the replay lookup: the committed result of the same request,
// ErrRequestConflict for a changed body, or nothing.
func lookup(ctx context.Context, rd storage.Reader, call *toolCall) (storage.Replay, bool, error) {
	if call.requestID == "" {
		return storage.Replay{}, false, nil
	}
	rp, err := rd.GetReplay(ctx, call.tok.Execution, call.requestID)
	if errors.Is(err, storage.ErrNotFound) {
		return rp, false, nil
	}
	if err != nil {
		return rp, false, err
	}
	if rp.Operation != call.op || rp.InputHash != call.hash {
		return rp, false, kernel.Refuse(extension.ErrRequestConflict, ErrRequestConflict.Code,
			"request ID %s was used for another operation or input of this execution; use a new request ID", call.requestID)
	}
	return rp, true, nil
}

// replayed turns a committed request record into the call's answer.
func replayed(rp storage.Replay) (json.RawMessage, error) {
	if rp.ErrorCode != "" {
		return nil, &extension.OperationError{Code: rp.ErrorCode, Message: rp.ErrorMessage}
	}
	return rp.Result, nil
}

// runInTx runs an operation that lives in storage (a builtin, a
// translated emission) in one transaction: lease guard, replay lookup, the
// operation, its request record and its call record.
func (tb *Toolbelt) runInTx(ctx context.Context, c *callLog, call *toolCall, run func(context.Context, storage.Tx, *segment) (json.RawMessage, error)) (json.RawMessage, bool, error) {
	var out json.RawMessage
	var replay bool
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		c.done = false
		g, err := tb.guard(ctx, tx, call.tok)
		if err != nil {
			return err
		}
		if err := tb.ceilingInTx(ctx, g.LatestGeneration, call.tok, call.op); err != nil {
			return err
		}
		rp, found, err := lookup(ctx, tx, call)
		if err != nil {
			return err
		}
		if found && rp.State == storage.ReplayDone {
			out, replay = nil, true
			out, err = replayed(rp)
			return err
		}
		result, err := run(ctx, tx, &segment{exe: g.Execution, work: g.Work})
		if err != nil {
			return err
		}
		if len(result) == 0 {
			result = json.RawMessage(`{}`)
		}
		out = result
		if call.requestID != "" {
			now := tb.clock.Now()
			if err := tx.InsertReplay(ctx, &storage.Replay{
				Execution: call.tok.Execution, RequestID: call.requestID, Operation: call.op, InputHash: call.hash,
				State: storage.ReplayDone, Result: result, CreatedAt: now, UpdatedAt: now,
			}); err != nil {
				return err
			}
		}
		return tb.insertCall(ctx, tx, c, ResultOK)
	})
	if err != nil {
		c.done = false
		return nil, false, err
	}
	return out, replay, nil
}

// runExtension runs a registered operation, in these named steps:
//
//  1. enterFlight: a call whose execution and request ID are already
//     running waits for it (a handler with a request ID only);
//  2. claim: in one transaction, the lease guard, the replay lookup and
//     the claim of the request ID (claimAction says which);
//  3. the gates (runGates), which refuse or park (park) the call;
//  4. translate: a translated operation is emitted, or its wait declared
//     (translateWait), in its own guarded transaction (runInTx), or
//  5. handle: the handler runs outside storage, and
//  6. record: its result finishes the claim and the call is recorded.
//
// A refusal after the claim gives the claim back (releaseClaim). A handler
// runs once per request ID, unless the host crashes between the handler's
// effect and the commit of its result: the claim is then found unfinished
// and the retry runs the handler again (handlers are idempotent on the
// request ID).
//
// A sensitive operation (extension.Operation.IsSensitive: its result holds
// a credential) is the exception: its request record is finished withheld,
// keeping the input's hash and no result or refusal, so a changed body is
// still a request conflict, and every repeat with the same body runs the
// handler again. No stored result is ever handed out for it, not even one
// an earlier release stored before the operation was sensitive.
func (tb *Toolbelt) runExtension(ctx context.Context, c *callLog, call *toolCall, r registered) (json.RawMessage, bool, error) {
	sensitive := r.op.IsSensitive()
	handler := r.op.Handler != nil
	if call.requestID != "" && handler {
		leave, err := tb.enterFlight(ctx, call.tok.Execution+"\x00"+call.requestID)
		if err != nil {
			return nil, false, err
		}
		defer leave()
	}
	cl, err := tb.claim(ctx, call, handler, sensitive)
	if err != nil || cl.replay {
		if cl.replay {
			c.rec.Replayed = true
		}
		return cl.out, cl.replay, err
	}
	auth := call.authority()
	if plan, gate, err := tb.runGates(ctx, r.reg, call, auth); err != nil {
		tb.releaseClaim(ctx, call, cl.claimed)
		c.rec.Gate = gate
		return nil, false, err
	} else if plan != nil {
		c.rec.Gate = gate
		out, err := tb.park(ctx, c, call, gate, plan, cl.claimed, sensitive)
		if err != nil {
			tb.releaseClaim(ctx, call, cl.claimed)
		}
		return out, false, err
	}
	// The operation's owner is handed its own configuration.
	auth.Config = tb.host.configOf(r.reg)
	if r.op.Emit != nil {
		return tb.translate(ctx, c, call, r.op.Emit, auth)
	}
	if r.op.Wait != nil {
		return tb.translateWait(ctx, c, call, r.reg, r.op.Wait, auth)
	}
	result, oe, err := handle(ctx, r.op.Handler, call, auth)
	if err != nil {
		tb.releaseClaim(ctx, call, cl.claimed)
		return nil, false, err
	}
	if err := tb.record(ctx, c, call, cl.claimed, sensitive, result, oe); err != nil {
		return nil, false, err
	}
	if oe != nil {
		return nil, false, oe
	}
	return result, false, nil
}

// enterFlight is the in-flight dedupe of a handler's request: the first
// call with key (execution and request ID) enters and must call leave when
// it is done; a call with a key already running waits for it to leave,
// then enters in turn (it then looks the request up again, which replays
// the committed result or, for a sensitive operation, whose result is
// never stored, runs the handler after it: the waiting call never receives
// another call's result). A caller that goes while it waits gets ctx.Err.
func (tb *Toolbelt) enterFlight(ctx context.Context, key string) (leave func(), err error) {
	for {
		tb.flightMu.Lock()
		ch, busy := tb.flight[key]
		if !busy {
			ch = make(chan struct{})
			tb.flight[key] = ch
		}
		tb.flightMu.Unlock()
		if !busy {
			return func() {
				tb.flightMu.Lock()
				delete(tb.flight, key)
				tb.flightMu.Unlock()
				close(ch)
			}, nil
		}
		if tb.flightWait != nil {
			tb.flightWait()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// claimAction is what the claim step does with a request, given its replay
// lookup.
type claimAction int

const (
	// claimRun: nothing is claimed and the operation runs (no request ID,
	// a translated operation, or a finished record with nothing to
	// replay: withheld, or of a sensitive operation).
	claimRun claimAction = iota
	// claimInsert: the request ID is claimed, then the handler runs.
	claimInsert
	// claimRerun: a claim a crash left unfinished; the handler runs again
	// under it (the documented replay window).
	claimRerun
	// claimReplay: the committed result (or refusal) is the answer.
	claimReplay
)

// decideClaim chooses the claim step's action from the replay lookup
// (found, rp) of a request with or without an ID, served by a handler or
// not, sensitive or not.
func decideClaim(found bool, rp storage.Replay, requestID string, handler, sensitive bool) claimAction {
	switch {
	case found && rp.State == storage.ReplayDone && (rp.Withheld || sensitive):
		// Nothing to replay: the handler runs again (it is idempotent on
		// the request ID) and the finished record stays as it is.
		return claimRun
	case found && rp.State == storage.ReplayDone:
		return claimReplay
	case found:
		return claimRerun
	case requestID == "" || !handler:
		return claimRun
	}
	return claimInsert
}

// claimed is what the claim step established.
type claimed struct {
	// replay: out (or err) is the committed answer; nothing runs.
	replay bool
	out    json.RawMessage
	// claimed: the request ID's record is a claim this call must finish
	// (record, park) or give back (releaseClaim).
	claimed bool
}

// claim is the guarded transaction before an extension operation runs:
// the lease guard, the replay lookup (a changed body is a request
// conflict), then claimAction's effect: a replay, a claim inserted, or
// nothing.
func (tb *Toolbelt) claim(ctx context.Context, call *toolCall, handler, sensitive bool) (claimed, error) {
	var cl claimed
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		g, err := tb.guard(ctx, tx, call.tok)
		if err != nil {
			return err
		}
		if err := tb.ceilingInTx(ctx, g.LatestGeneration, call.tok, call.op); err != nil {
			return err
		}
		rp, found, err := lookup(ctx, tx, call)
		if err != nil {
			return err
		}
		switch decideClaim(found, rp, call.requestID, handler, sensitive) {
		case claimReplay:
			cl.replay = true
			cl.out, err = replayed(rp)
			return err
		case claimRerun:
			cl.claimed = true
		case claimInsert:
			now := tb.clock.Now()
			cl.claimed = true
			return tx.InsertReplay(ctx, &storage.Replay{
				Execution: call.tok.Execution, RequestID: call.requestID, Operation: call.op, InputHash: call.hash,
				State: storage.ReplayClaimed, CreatedAt: now, UpdatedAt: now,
			})
		}
		return nil
	})
	return cl, err
}

// releaseClaim gives a claim back after a refusal or a failure without a
// verdict, so that a retry runs the operation; even when the caller has
// gone. It does nothing when the call claimed nothing.
func (tb *Toolbelt) releaseClaim(ctx context.Context, call *toolCall, claimed bool) {
	if !claimed {
		return
	}
	wctx := context.WithoutCancel(ctx)
	_ = tb.store.WithTx(wctx, func(tx storage.Tx) error {
		return tx.DeleteReplay(wctx, call.tok.Execution, call.requestID)
	})
}

// translate runs a translated operation: its translator outside storage,
// then the emission in a guarded transaction with its request record and
// call record (runInTx). A translator's refusal is its own verdict; any
// other failure is an extensionFailure naming its type.
func (tb *Toolbelt) translate(ctx context.Context, c *callLog, call *toolCall, tr extension.Translator, auth extension.Authority) (json.RawMessage, bool, error) {
	em, err := safeTranslate(ctx, tr, auth, call.input)
	if err != nil {
		var oe *extension.OperationError
		if errors.As(err, &oe) {
			return nil, false, oe
		}
		return nil, false, &extensionFailure{op: call.op, part: "translator", typ: failureType(err)}
	}
	return tb.runInTx(ctx, c, call, func(ctx context.Context, tx storage.Tx, s *segment) (json.RawMessage, error) {
		return tb.emitInTx(ctx, tx, s, call, em)
	})
}

// translateWait runs a translated wait: its translator outside storage,
// then, in a guarded transaction with its request record and call record
// (runInTx), the declaration of its plan as a wait owned by the
// operation's registration, exactly as the wait builtin declares one:
// authority is released and the scheduler registers the wait when the
// segment ends. A translator's refusal is its own verdict; any other
// failure is an extensionFailure naming its type.
func (tb *Toolbelt) translateWait(ctx context.Context, c *callLog, call *toolCall, owner string, tr extension.WaitTranslator, auth extension.Authority) (json.RawMessage, bool, error) {
	plan, err := safeTranslateWait(ctx, tr, auth, call.input)
	if err != nil {
		var oe *extension.OperationError
		if errors.As(err, &oe) {
			return nil, false, oe
		}
		return nil, false, &extensionFailure{op: call.op, part: "wait translator", typ: failureType(err)}
	}
	output := plan.Output
	if len(output) == 0 {
		output = json.RawMessage(`{}`)
	}
	if _, _, err := canonicalInput(output); err != nil {
		return nil, false, fmt.Errorf("toolbelt: the wait translator of operation %s answered an output that is not a JSON object", call.op)
	}
	return tb.runInTx(ctx, c, call, func(ctx context.Context, tx storage.Tx, s *segment) (json.RawMessage, error) {
		spec := kernel.WaitSpec{Types: plan.Types, Keys: plan.Keys, Timeout: plan.Timeout, Registration: owner}
		if err := tb.rt.Declare(ctx, tx, s.exe.ID, call.tok.Epoch, kernel.Declaration{Wait: &spec}); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"declared": "wait", "wait": waitView(spec), "output": output})
	})
}

// handle runs a handler outside storage. It returns the handler's result
// compacted, or its verdict (an *extension.OperationError, which is
// recorded like a result), or an error when the handler failed without a
// verdict (its effect is unknown: the claim goes and a retry runs it
// again) or answered something that is not a JSON object. A failure's
// text may hold a credential: only its type goes on.
func handle(ctx context.Context, h extension.Handler, call *toolCall, auth extension.Authority) (json.RawMessage, *extension.OperationError, error) {
	result, herr := safeHandle(ctx, h, auth, call.input)
	if herr != nil {
		var oe *extension.OperationError
		if errors.As(herr, &oe) {
			return nil, oe, nil
		}
		return nil, nil, &extensionFailure{op: call.op, part: "handler", typ: failureType(herr)}
	}
	v, _, err := canonicalInput(result)
	if err != nil {
		return nil, nil, fmt.Errorf("toolbelt: operation %s returned a result that is not a JSON object", call.op)
	}
	return v, nil, nil
}

// record writes what a handler did, even when the caller has gone (its
// effect happened), in one transaction: the claim finished with the result
// or the verdict (withheld for a sensitive operation), and for a result
// the call record. A verdict's call record is written after, by finish.
func (tb *Toolbelt) record(ctx context.Context, c *callLog, call *toolCall, claimed, sensitive bool, result json.RawMessage, oe *extension.OperationError) error {
	wctx := context.WithoutCancel(ctx)
	err := tb.store.WithTx(wctx, func(tx storage.Tx) error {
		ctx := wctx
		c.done = false
		if claimed {
			rp := &storage.Replay{Execution: call.tok.Execution, RequestID: call.requestID, Result: result, UpdatedAt: tb.clock.Now()}
			switch {
			case sensitive:
				// Neither the result nor the refusal is stored.
				rp.Result, rp.Withheld = nil, true
			case oe != nil:
				rp.Result, rp.ErrorCode, rp.ErrorMessage = nil, oe.Code, oe.Message
			}
			if err := tx.FinishReplay(ctx, rp); err != nil {
				return err
			}
		}
		if oe != nil {
			return nil
		}
		return tb.insertCall(ctx, tx, c, ResultOK)
	})
	if err != nil {
		c.done = false
	}
	return err
}

// extensionFailure is a handler's or translator's failure that is not a
// verdict (not an *extension.OperationError): an error or a panic. The
// extension's error text may hold a credential, so this says which part of
// which operation failed and the error's Go type, never its text; it is
// what the refusal log line and the server's 500 log show.
type extensionFailure struct {
	op   string // the operation
	part string // "handler", "translator" or "action handler"
	typ  string // failureType of the extension's error
}

func (e *extensionFailure) Error() string {
	return fmt.Sprintf("toolbelt: the %s of operation %s failed with an error of type %s (its text is not shown: an extension's error may hold a credential)", e.part, e.op, e.typ)
}

// extensionPanic is an extension callback's panic, holding the panic
// value, which is never formatted.
type extensionPanic struct{ value any }

func (p *extensionPanic) Error() string { return "panic(" + fmt.Sprintf("%T", p.value) + ")" }

// failureType names an extension's failure for the log without its text:
// the error's Go type, or for a panic panic(<the value's Go type>).
func failureType(err error) string {
	var p *extensionPanic
	if errors.As(err, &p) {
		return p.Error()
	}
	return fmt.Sprintf("%T", err)
}

func safeHandle(ctx context.Context, h extension.Handler, auth extension.Authority, input json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, &extensionPanic{value: p}
		}
	}()
	return h(ctx, auth, input)
}

func safeTranslate(ctx context.Context, tr extension.Translator, auth extension.Authority, input json.RawMessage) (em extension.Emission, err error) {
	defer func() {
		if p := recover(); p != nil {
			em, err = extension.Emission{}, &extensionPanic{value: p}
		}
	}()
	return tr(ctx, auth, input)
}

func safeTranslateWait(ctx context.Context, tr extension.WaitTranslator, auth extension.Authority, input json.RawMessage) (plan extension.WaitPlan, err error) {
	defer func() {
		if p := recover(); p != nil {
			plan, err = extension.WaitPlan{}, &extensionPanic{value: p}
		}
	}()
	return tr(ctx, auth, input)
}

// runGates asks every gate but the operation owner's, in registration-name
// order, of the registrations the active generation enables for the
// call's scope (builtins never come here). Each gate is handed its own
// registration's configuration. It returns the plan of a gate that parks
// the caller, or a refusal wrapped in extension.GateRefusal: the gate's
// *extension.OperationError as it is, or gate_failed for anything else
// (an error without a verdict, a panic, no answer within the gate
// timeout). A caller that goes while a gate is asked gets ctx.Err.
func (tb *Toolbelt) runGates(ctx context.Context, owner string, call *toolCall, auth extension.Authority) (*extension.WaitPlan, string, error) {
	for _, reg := range tb.gates(call.tok.Scope) {
		if reg.Name == owner {
			continue
		}
		gauth := auth
		gauth.Config = tb.host.configOf(reg.Name)
		plan, err := tb.askGate(ctx, reg.Gate, extension.GateRequest{Authority: gauth, Operation: call.op, Input: call.input})
		if err != nil && ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if err != nil {
			var oe *extension.OperationError
			if !errors.As(err, &oe) {
				// The gate's text may hold a credential: log its type only.
				tb.log.Warn("toolbelt gate failed without a verdict; the call is refused", "gate", reg.Name, "operation", call.op,
					"execution", call.tok.Execution, "epoch", call.tok.Epoch, "token_id", call.tok.ID, "error_type", failureType(err))
				err = &extension.OperationError{Code: ErrGateFailed, Message: "gate " + reg.Name + " failed; the call is refused until it answers"}
			}
			return nil, reg.Name, &extension.GateRefusal{Gate: reg.Name, Err: err}
		}
		if plan != nil {
			return plan, reg.Name, nil
		}
	}
	return nil, "", nil
}

// gateTimedOut is the failure of a gate that did not answer within the
// gate timeout.
type gateTimedOut struct{}

func (gateTimedOut) Error() string { return "the gate did not answer within the gate timeout" }

// askGate asks one gate under the gate timeout, recovering a panic. A gate
// that does not answer in time is left to finish on its own (its context
// is cancelled) and its late answer is dropped.
func (tb *Toolbelt) askGate(ctx context.Context, g extension.Gate, req extension.GateRequest) (*extension.WaitPlan, error) {
	timeout := tb.opts.GateTimeout
	if timeout <= 0 {
		timeout = DefaultGateTimeout
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		plan *extension.WaitPlan
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		defer func() {
			if p := recover(); p != nil {
				a = answer{err: &extensionPanic{value: p}}
			}
			done <- a
		}()
		a.plan, a.err = g.Check(gctx, req)
	}()
	select {
	case a := <-done:
		if gctx.Err() != nil && ctx.Err() == nil {
			// It answered, but only once its deadline had passed.
			return nil, gateTimedOut{}
		}
		return a.plan, a.err
	case <-gctx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, gateTimedOut{}
	}
}

// park declares a gate's wait plan like a translated wait, owned by the
// gating registration: the operation does not run and authority is
// released. A sensitive operation's request record is finished withheld
// here too.
func (tb *Toolbelt) park(ctx context.Context, c *callLog, call *toolCall, gate string, plan *extension.WaitPlan, claimed, sensitive bool) (json.RawMessage, error) {
	output := plan.Output
	if len(output) == 0 {
		output = json.RawMessage(`{}`)
	}
	var out json.RawMessage
	err := tb.store.WithTx(ctx, func(tx storage.Tx) error {
		c.done = false
		g, err := tb.guard(ctx, tx, call.tok)
		if err != nil {
			return err
		}
		if err := tb.ceilingInTx(ctx, g.LatestGeneration, call.tok, call.op); err != nil {
			return err
		}
		spec := kernel.WaitSpec{Types: plan.Types, Keys: plan.Keys, Timeout: plan.Timeout, Registration: gate}
		if err := tb.rt.Declare(ctx, tx, g.Execution.ID, call.tok.Epoch, kernel.Declaration{Wait: &spec}); err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{"parked": gate, "output": output, "wait": waitView(spec)})
		if err != nil {
			return err
		}
		out = body
		if claimed {
			rp := &storage.Replay{Execution: call.tok.Execution, RequestID: call.requestID, Result: body, UpdatedAt: tb.clock.Now()}
			if sensitive {
				rp.Result, rp.Withheld = nil, true
			}
			if err := tx.FinishReplay(ctx, rp); err != nil {
				return err
			}
		}
		return tb.insertCall(ctx, tx, c, ResultParked)
	})
	if err != nil {
		c.done = false
	}
	return out, err
}

// ---- reads ----

// Guidance describes the operations token may call now: its allowlist
// within the current ceiling, builtins included, in name order, with the
// overall guidance. It passes the same chain as a call, the lease guard
// run in a read.
func (tb *Toolbelt) Guidance(ctx context.Context, token string, assert extension.Assertions) (out extension.Guidance, err error) {
	c := &callLog{rec: storage.ToolbeltCall{Operation: RecordGuidance}, socket: assert.SocketExecution}
	defer func() { tb.finish(ctx, c, err) }()
	t, err := tb.readChain(ctx, c, token, assert)
	if err != nil {
		return out, err
	}
	out.Guidance = tb.opts.Guidance
	if out.Guidance == "" {
		out.Guidance = DefaultGuidance
	}
	out.Operations = []extension.OperationInfo{}
	for _, name := range tb.granted(t) {
		out.Operations = append(out.Operations, tb.info(name))
	}
	return out, nil
}

// Serving lists the token's granted operations that serve capability, in
// name order (an empty list when none does).
func (tb *Toolbelt) Serving(ctx context.Context, token string, assert extension.Assertions, capability string) (out []string, err error) {
	c := &callLog{rec: storage.ToolbeltCall{Operation: RecordServing}, socket: assert.SocketExecution}
	defer func() { tb.finish(ctx, c, err) }()
	t, err := tb.readChain(ctx, c, token, assert)
	if err != nil {
		return nil, err
	}
	out = []string{}
	for _, name := range tb.granted(t) {
		if slices.Contains(tb.info(name).Capabilities, capability) {
			out = append(out, name)
		}
	}
	return out, nil
}

// readChain is the check chain of a read: token, assertions, and the lease
// guard in a read (the ceiling narrows what the read lists).
func (tb *Toolbelt) readChain(ctx context.Context, c *callLog, token string, assert extension.Assertions) (storage.Token, error) {
	t, err := tb.authenticate(ctx, token)
	if t.ID != "" {
		c.token(t)
	}
	if err != nil {
		return t, err
	}
	if err := checkAssertions(t, assert); err != nil {
		return t, err
	}
	if _, err := tb.guard(ctx, tb.store, t); err != nil {
		return t, err
	}
	return t, nil
}

// granted is the token's allowlist within what is declared for its
// generation and scope and the current ceiling, sorted.
func (tb *Toolbelt) granted(t storage.Token) []string {
	var out []string
	for _, op := range t.Operations {
		if tb.declaredFor(t.Generation, t.Scope, op) && tb.opts.Authorize(t.Scope, op) {
			out = append(out, op)
		}
	}
	sort.Strings(out)
	return out
}

// info describes a declared operation.
func (tb *Toolbelt) info(name string) extension.OperationInfo {
	if b, ok := builtinInfo[name]; ok {
		return b
	}
	r, _ := tb.operation(name)
	return describe(name, r.op)
}
