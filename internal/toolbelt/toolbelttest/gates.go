package toolbelttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// GateCases are the cases of gates and of registrations that follow the
// configuration's generations.
func GateCases() []Case {
	return []Case{
		{"gate_order", caseGateOrder},
		{"gate_own_registration_exempt", caseGateOwnExempt},
		{"per_generation_registration", casePerGeneration},
	}
}

// asks records which gates were asked, in order.
type asks struct {
	mu  sync.Mutex
	log []string
}

// gate is a gate named name that records each ask and answers with
// answer().
func (a *asks) gate(name string, answer func() (*extension.WaitPlan, error)) extension.Gate {
	return extension.GateFunc(func(context.Context, extension.GateRequest) (*extension.WaitPlan, error) {
		a.mu.Lock()
		a.log = append(a.log, name)
		a.mu.Unlock()
		return answer()
	})
}

func (a *asks) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.log)
}

func allow() (*extension.WaitPlan, error) { return nil, nil }

// callRecord returns the latest call record of the execution for op.
func callRecord(f *Fixture, execution, op string) (storage.ToolbeltCall, error) {
	recs, err := f.Env.Store.ListToolbeltCalls(context.Background(), &storage.ListToolbeltCallsParams{Execution: execution})
	if err != nil {
		return storage.ToolbeltCall{}, err
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Operation == op {
			return recs[i], nil
		}
	}
	return storage.ToolbeltCall{}, fmt.Errorf("no call record of %s", op)
}

// caseGateOrder: gates are asked in registration-name order (not the
// order they were registered in), the first gate that answers ends the
// round, a refusal names its gate and keeps authority, and a plan parks
// the call, owned by its gate. Each is recorded with the gate.
func caseGateOrder(f *Fixture) error {
	var a asks
	var mu sync.Mutex
	held := true
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.echo")}}); err != nil {
		return err
	}
	regs := []extension.Registration{
		{Name: "gc", Gate: a.gate("gc", func() (*extension.WaitPlan, error) {
			return &extension.WaitPlan{Types: []string{"gc.approved"}, Output: json.RawMessage(`{"asked":"gc"}`)}, nil
		})},
		{Name: "ga", Gate: a.gate("ga", allow)},
		{Name: "gb", Gate: a.gate("gb", func() (*extension.WaitPlan, error) {
			mu.Lock()
			defer mu.Unlock()
			if held {
				return nil, &extension.OperationError{Code: "held", Message: "not yet"}
			}
			return nil, nil
		})},
	}
	for _, r := range regs {
		if err := f.Register(r); err != nil {
			return err
		}
	}
	at, err := f.Start()
	if err != nil {
		return err
	}
	_, err = f.Call(at.Token, "acme.echo", `{}`, "")
	var gr *extension.GateRefusal
	var oe *extension.OperationError
	if got := a.got(); !slices.Equal(got, []string{"ga", "gb"}) {
		return fmt.Errorf("the gates asked were %v; want ga then gb (name order), and none after gb refused", got)
	}
	if !errors.As(err, &gr) || gr.Gate != "gb" || !errors.As(err, &oe) || oe.Code != "held" {
		return fmt.Errorf("the call answered %v; want gb's refusal held", err)
	}
	rec, err := callRecord(f, at.Execution.ID, "acme.echo")
	if err != nil {
		return err
	}
	if rec.Kind != storage.ToolbeltRejected || rec.Result != toolbelt.ResultGateRefused || rec.Gate != "gb" {
		return fmt.Errorf("the refused call is recorded %s %s gate %q; want toolbelt.rejected gate_refused gate gb", rec.Kind, rec.Result, rec.Gate)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	mu.Lock()
	held = false
	mu.Unlock()
	res, err := f.Call(at.Token, "acme.echo", `{}`, "")
	if err != nil {
		return fmt.Errorf("a refusal took authority away, or the plan did not park: %w", err)
	}
	if got := a.got(); !slices.Equal(got, []string{"ga", "gb", "ga", "gb", "gc"}) {
		return fmt.Errorf("the gates asked were %v; want ga, gb, then ga, gb, gc", got)
	}
	var out struct {
		Parked string          `json:"parked"`
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(res.Result, &out); err != nil || out.Parked != "gc" || string(out.Output) != `{"asked":"gc"}` {
		return fmt.Errorf("the parked call answered %s; want gc's plan and output", res.Result)
	}
	rec, err = callRecord(f, at.Execution.ID, "acme.echo")
	if err != nil {
		return err
	}
	if rec.Kind != storage.ToolbeltCalled || rec.Result != toolbelt.ResultParked || rec.Gate != "gc" {
		return fmt.Errorf("the parked call is recorded %s %s gate %q; want toolbelt.called parked gate gc", rec.Kind, rec.Result, rec.Gate)
	}
	return want(second(f.Call(at.Token, "emit", `{"type":"test.after"}`, "")), extension.ErrAuthorityReleased, "emit after a gate parked the call")
}

// caseGateOwnExempt: a gate is never asked about its own registration's
// operations, nor about a builtin, and is asked about another's.
func caseGateOwnExempt(f *Fixture) error {
	var a asks
	refuse := func() (*extension.WaitPlan, error) {
		return nil, &extension.OperationError{Code: "held", Message: "no"}
	}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.echo")}, Gate: a.gate("acme", refuse)}); err != nil {
		return err
	}
	if err := f.Register(extension.Registration{Name: "beta", Operations: []extension.Operation{op("beta.ping")}}); err != nil {
		return err
	}
	at, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(at.Token, "acme.echo", `{}`, ""); err != nil {
		return fmt.Errorf("acme's own operation was refused: %w", err)
	}
	if _, err := f.Call(at.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return fmt.Errorf("a builtin was refused: %w", err)
	}
	if got := a.got(); len(got) != 0 {
		return fmt.Errorf("acme's gate was asked %v about its own operation or a builtin", got)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	_, err = f.Call(at.Token, "beta.ping", `{}`, "")
	var gr *extension.GateRefusal
	if !errors.As(err, &gr) || gr.Gate != "acme" || !slices.Equal(a.got(), []string{"acme"}) {
		return fmt.Errorf("beta.ping answered %v after asks %v; want acme's gate asked once and refusing", err, a.got())
	}
	return nil
}

// casePerGeneration: an operation whose registration the attempt's pinned
// generation disables is undeclared for it (the token issued then lacks
// it, and a call is the bare forbidden), without its gate asked; a gate
// the active generation disables, or enables only for other scopes, is
// not asked, and each change takes effect at the next call.
func casePerGeneration(f *Fixture) error {
	var a asks
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.echo")}}); err != nil {
		return err
	}
	if err := f.Register(extension.Registration{Name: "gk", Gate: a.gate("gk", allow)}); err != nil {
		return err
	}
	at, err := f.Start()
	if err != nil {
		return err
	}
	step := func(what string, asked int) error {
		if _, err := f.Call(at.Token, "acme.echo", `{}`, ""); err != nil {
			return fmt.Errorf("acme.echo %s: %w", what, err)
		}
		if got := a.got(); len(got) != asked {
			return fmt.Errorf("gk was asked %d times %s; want %d", len(got), what, asked)
		}
		return nil
	}
	if err := step("with every registration enabled", 1); err != nil {
		return err
	}
	f.Env.Extensions.Set(0, "gk", toolbelt.Enablement{Enabled: false})
	if err := step("once the active generation disables gk", 1); err != nil {
		return err
	}
	f.Env.Extensions.Set(0, "gk", toolbelt.Enablement{Enabled: true, Scopes: []string{"elsewhere"}})
	if err := step("once gk is enabled only for another scope", 1); err != nil {
		return err
	}
	f.Env.Extensions.Set(0, "gk", toolbelt.Enablement{Enabled: true, Scopes: []string{Scope}})
	if err := step("once gk is enabled for the call's scope again", 2); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	f.Env.Extensions.Set(Pinned, "acme", toolbelt.Enablement{Enabled: false})
	if err := wantForbidden(second(f.Call(at.Token, "acme.echo", `{}`, "")), "acme.echo once the pinned generation disables acme"); err != nil {
		return err
	}
	b, err := f.Start()
	if err != nil {
		return err
	}
	if err := wantForbidden(second(f.Call(b.Token, "acme.echo", `{}`, "")), "acme.echo for an attempt pinned to a generation that disables acme"); err != nil {
		return err
	}
	g, err := f.TB.Guidance(context.Background(), b.Token, extension.Assertions{})
	if err != nil {
		return err
	}
	for _, info := range g.Operations {
		if info.Name == "acme.echo" {
			return errors.New("the guidance lists acme.echo for an attempt pinned to a generation that disables acme")
		}
	}
	if got := a.got(); len(got) != 2 {
		return fmt.Errorf("gk was asked about an undeclared operation (%d asks)", len(got))
	}
	if _, err := f.Call(b.Token, "emit", `{"type":"test.still"}`, ""); err != nil {
		return fmt.Errorf("the attempt whose binding lists a disabled operation does not run: %w", err)
	}
	f.Env.Extensions.Set(Pinned, "acme", toolbelt.Enablement{Enabled: true})
	if err := step("once the pinned generation enables acme again", 3); err != nil {
		return err
	}
	f.Env.Extensions.Set(0, "acme", toolbelt.Enablement{Enabled: false})
	return wantForbidden(second(f.Call(at.Token, "acme.echo", `{}`, "")), "acme.echo once the active generation disables acme")
}
