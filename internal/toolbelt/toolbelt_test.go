package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

func fixture(t *testing.T, reopen bool) *toolbelttest.Fixture {
	t.Helper()
	f, err := toolbelttest.NewFixture(t.TempDir(), toolbelttest.Real, reopen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func handlerOp(name string, h extension.Handler) extension.Operation {
	return extension.Operation{Name: name, Summary: "Test operation.", Handler: h}
}

func okHandler(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"ok":true}`), nil
}

// TestProductionToolbeltReplayWindow drills the documented window: the
// host crashes after an extension handler's effect and before its result
// commits. The request's claim survives, and the retry (after recovery,
// with the new epoch's token) runs the handler again; once its result is
// committed, every later repeat replays it.
func TestProductionToolbeltReplayWindow(t *testing.T) {
	f := fixture(t, true)
	runs := 0
	crash := true
	err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{handlerOp("acme.count",
		func(_ context.Context, auth extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
			runs++ // the handler's effect
			if crash {
				// The host dies before the result is recorded.
				f.Env.Store.Close()
			}
			return json.Marshal(map[string]any{"runs": runs, "epoch": auth.Epoch})
		})}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "acme.count", `{}`, "req-1"); err == nil {
		t.Fatal("the call whose result could not be recorded succeeded")
	}
	crash = false
	if err := f.Checkpoint(); err != nil { // the daemon starts again
		t.Fatal(err)
	}
	rp, err := f.Env.Store.GetReplay(context.Background(), a.Execution.ID, "req-1")
	if err != nil || rp.State != storage.ReplayClaimed {
		t.Fatalf("after the crash the request record is %+v (%v), want claimed", rp, err)
	}
	b, err := f.Recover(a)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Call(b.Token, "acme.count", `{}`, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 || res.Replayed {
		t.Fatalf("retry in the window: handler runs %d, replayed %v; want it run again (2, false)", runs, res.Replayed)
	}
	again, err := f.Call(b.Token, "acme.count", `{}`, "req-1")
	if err != nil || !again.Replayed || string(again.Result) != string(res.Result) || runs != 2 {
		t.Fatalf("repeat after the commit = %s replayed %v, runs %d (%v)", again.Result, again.Replayed, runs, err)
	}
}

func TestToolbeltAllowlistAndExpiry(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{handlerOp("acme.extra", okHandler), handlerOp("acme.echo", okHandler)}}); err != nil {
		t.Fatal(err)
	}
	f.Env.Ceiling.Deny(toolbelttest.Scope, "create_work")
	plain, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	granted, err := f.Start(toolbelttest.Grant)
	if err != nil {
		t.Fatal(err)
	}
	names := func(a *toolbelttest.Attempt) []string {
		g, err := f.TB.Guidance(ctx, a.Token, extension.Assertions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, op := range g.Operations {
			out = append(out, op.Name)
		}
		return out
	}
	// acme.count and acme.unregistered are bound but not registered;
	// create_work is outside the ceiling; acme.extra only with the grant.
	if got := strings.Join(names(plain), ","); got != "acme.echo,declare_outcome,emit,read_context,wait" {
		t.Errorf("plain allowlist %s", got)
	}
	if got := names(granted); !slices.Contains(got, "acme.extra") {
		t.Errorf("granted allowlist %v lacks the grant's operation", got)
	}
	if _, err := f.Call(plain.Token, "acme.extra", `{}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Errorf("an operation of a grant the Work did not take: %v", err)
	}
	if _, err := f.Call(granted.Token, "acme.extra", `{}`, ""); err != nil {
		t.Errorf("the grant's operation: %v", err)
	}
	// Widening the ceiling later does not widen an issued token.
	f.Env.Ceiling.Allow(toolbelttest.Scope, "create_work")
	if _, err := f.Call(plain.Token, "create_work", `{}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Errorf("create_work outside the allowlist fixed at issue: %v", err)
	}
	// Expiry is exclusive: at the deadline itself the token is refused.
	tok, err := f.Env.Store.GetToken(ctx, plain.TokenID)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.ExpiresAt.Equal(plain.Execution.Deadline) {
		t.Errorf("token expires %v, want the attempt deadline %v", tok.ExpiresAt, plain.Execution.Deadline)
	}
	f.Env.Clock.Set(tok.ExpiresAt)
	if _, err := f.Call(plain.Token, "emit", `{"type":"test.x"}`, ""); !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) {
		t.Errorf("a call at the expiry instant: %v", err)
	}
}

func TestToolbeltLifetime(t *testing.T) {
	f := fixture(t, false)
	tb, err := toolbelt.New(func() toolbelt.Options {
		o := f.Env.Options()
		o.Lifetime = time.Minute
		return o
	}())
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tb.IssueToken(context.Background(), toolbelt.IssueRequest{Execution: a.Execution.ID, Epoch: a.Execution.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if want := f.Env.Clock.Now().Add(time.Minute); !tok.ExpiresAt.Equal(want) {
		t.Fatalf("expires %v, want %v", tok.ExpiresAt, want)
	}
	if _, err := tb.IssueToken(context.Background(), toolbelt.IssueRequest{Execution: a.Execution.ID, Epoch: 7}); err == nil {
		t.Fatal("a token for an epoch that is not the live one was issued")
	}
}

// TestTokenNeverOutlivesTheAttempt: a deadline asked for beyond the
// attempt's own is cut to the attempt's, so a token can never outlive
// active authority.
func TestTokenNeverOutlivesTheAttempt(t *testing.T) {
	f := fixture(t, false)
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if a.Execution.Deadline.IsZero() {
		t.Fatal("the fixture's attempt has no deadline")
	}
	tok, err := f.TB.IssueToken(context.Background(), toolbelt.IssueRequest{
		Execution: a.Execution.ID, Epoch: a.Execution.Epoch, Deadline: a.Execution.Deadline.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !tok.ExpiresAt.Equal(a.Execution.Deadline) {
		t.Fatalf("a token asked to last past the attempt expires %v, want the attempt deadline %v", tok.ExpiresAt, a.Execution.Deadline)
	}
}

// gate refuses calls whose input says deny, parks those that say park.
func gate(ctx context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
	switch {
	case strings.Contains(string(req.Input), "deny"):
		return nil, &extension.OperationError{Code: "not_approved", Message: "a person has to approve this"}
	case strings.Contains(string(req.Input), "park"):
		return &extension.WaitPlan{Types: []string{"human.approved"}, Timeout: time.Hour, Output: json.RawMessage(`{"asked":true}`)}, nil
	case strings.Contains(string(req.Input), "panic"):
		panic("gate bug")
	}
	return nil, nil
}

func TestToolbeltGates(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	runs := 0
	count := handlerOp("acme.count", func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
		runs++
		return json.RawMessage(`{}`), nil
	})
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{count}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Register(extension.Registration{Name: "human", Gate: extension.GateFunc(gate)}); err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "acme.count", `{"x":"through"}`, ""); err != nil || runs != 1 {
		t.Fatalf("a call the gate lets through: %v (runs %d)", err, runs)
	}
	var gr *extension.GateRefusal
	var oe *extension.OperationError
	_, err = f.Call(a.Token, "acme.count", `{"x":"deny"}`, "r-deny")
	if !errors.As(err, &gr) || gr.Gate != "human" || !errors.As(err, &oe) || oe.Code != "not_approved" || runs != 1 {
		t.Fatalf("a refused call: %v (runs %d)", err, runs)
	}
	_, err = f.Call(a.Token, "acme.count", `{"x":"panic"}`, "")
	if !errors.As(err, &oe) || oe.Code != toolbelt.ErrGateFailed {
		t.Fatalf("a panicking gate: %v", err)
	}
	// Builtins pass no gate.
	if _, err := f.Call(a.Token, "emit", `{"type":"test.deny"}`, ""); err != nil {
		t.Fatalf("emit through a gate: %v", err)
	}
	refused, err := f.Env.Store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Result: toolbelt.ResultGateRefused})
	if err != nil || len(refused) != 2 || refused[0].Gate != "human" || refused[0].Kind != storage.ToolbeltRejected {
		t.Fatalf("gate_refused records %+v (%v)", refused, err)
	}
	res, err := f.Call(a.Token, "acme.count", `{"x":"park"}`, "r-park")
	if err != nil || runs != 1 || !strings.Contains(string(res.Result), `"parked":"human"`) {
		t.Fatalf("a parked call: %s, %v (runs %d)", res.Result, err, runs)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.late"}`, ""); !errors.Is(err, extension.ErrAuthorityReleased) {
		t.Fatalf("a call after being parked: %v", err)
	}
	d, err := f.Env.Store.GetPendingDeclaration(ctx, a.Execution.ID)
	if err != nil {
		t.Fatal(err)
	}
	decl, err := kernel.ParseDeclaration(d)
	if err != nil || decl.Wait == nil || decl.Wait.Registration != "human" || decl.Wait.Types[0] != "human.approved" {
		t.Fatalf("parked declaration %+v (%v)", decl, err)
	}
}

func TestToolbeltCreateWorkAndReadContext(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	in := `{"correlation_key":"child-key","input":{"type":"task.assigned","data":{"n":1}},"grants":["extra"]}`
	first, err := f.Call(a.Token, "create_work", in, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		WorkID string `json:"work_id"`
	}
	if err := json.Unmarshal(first.Result, &out); err != nil {
		t.Fatal(err)
	}
	child, err := f.Env.Store.GetWork(ctx, out.WorkID)
	if err != nil {
		t.Fatal(err)
	}
	if child.Parent != a.Work.ID || child.Scope != toolbelttest.Scope || child.Binding != toolbelttest.Binding || !slices.Equal(child.Grants, []string{"extra"}) || child.InputCount != 1 {
		t.Fatalf("child %+v", child)
	}
	created, err := f.Env.Store.GetEvent(ctx, child.CreatedEvent)
	if err != nil || created.Parent != a.Work.CreatedEvent || created.Execution != a.Execution.ID {
		t.Fatalf("the child's core.work.created %+v (%v) is not caused by the segment", created, err)
	}
	again, err := f.Call(a.Token, "create_work", in, "c1")
	if err != nil || !again.Replayed || string(again.Result) != string(first.Result) {
		t.Fatalf("retry of create_work = %s (%v)", again.Result, err)
	}
	for _, bad := range []string{`{"grants":["nope"]}`, `{"binding":"b9"}`, `{"input":{"type":"test.x","source":"x"}}`} {
		if _, err := f.Call(a.Token, "create_work", bad, ""); !errors.Is(err, extension.ErrInvalid) {
			t.Errorf("create_work %s: %v", bad, err)
		}
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.note"}`, ""); err != nil {
		t.Fatal(err)
	}
	res, err := f.Call(a.Token, "read_context", `{}`, "")
	if err != nil {
		t.Fatal(err)
	}
	var rc struct {
		Work   *api.Work   `json:"work"`
		Events []api.Event `json:"events"`
	}
	if err := json.Unmarshal(res.Result, &rc); err != nil || rc.Work == nil || rc.Work.ID != a.Work.ID || len(rc.Events) < 2 {
		t.Fatalf("read_context %s (%v)", res.Result, err)
	}
	f.Env.Ceiling.Deny(toolbelttest.Scope, "read:events")
	res, err = f.Call(a.Token, "read_context", `{}`, "")
	if err != nil || strings.Contains(string(res.Result), `"events"`) || !strings.Contains(string(res.Result), `"work"`) {
		t.Fatalf("read_context without the events read: %s (%v)", res.Result, err)
	}
	f.Env.Ceiling.Deny(toolbelttest.Scope, "read:work")
	if _, err := f.Call(a.Token, "read_context", `{}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("read_context with no read allowed: %v", err)
	}
}

func TestToolbeltSweep(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	tb := f.TB.(*toolbelt.Toolbelt)
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.x"}`, "r1"); err != nil {
		t.Fatal(err)
	}
	if n, err := tb.RevokeExecution(ctx, a.Execution.ID); err != nil || n != 1 {
		t.Fatalf("revoke execution: %d, %v", n, err)
	}
	if tb.IsExecutionToken(ctx, a.Token) {
		t.Fatal("a revoked token is still an execution token")
	}
	f.Env.Clock.Advance(toolbelt.TokenRetention - time.Second)
	if res, err := tb.SweepToolbelt(ctx); err != nil || res.Tokens != 0 {
		t.Fatalf("sweep before retention: %+v, %v", res, err)
	}
	f.Env.Clock.Advance(2 * time.Second)
	// The execution is still live: its request record stays.
	if res, err := tb.SweepToolbelt(ctx); err != nil || res.Tokens != 1 || res.Replays != 0 {
		t.Fatalf("sweep after retention: %+v, %v", res, err)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.x"}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("a swept token: %v", err)
	}
	finished, res := storage.ExecutionFinished, storage.ResultSucceeded
	err = f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: a.Execution.ID, Epoch: a.Execution.Epoch, State: &finished, Result: &res, Now: f.Env.Clock.Now()})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tb.SweepToolbelt(ctx); err != nil || res.Replays != 1 {
		t.Fatalf("sweep once the execution finished: %+v, %v", res, err)
	}
	if _, err := f.Env.Store.GetReplay(ctx, a.Execution.ID, "r1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the request record survived: %v", err)
	}
}
