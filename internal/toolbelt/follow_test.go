package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// A gate that does not answer within the gate timeout refuses the call
// with gate_failed, whether it watches its context or not; a caller that
// goes while a gate is asked gets its own context's error, not a gate's
// refusal. No test sleeps: the deadline is injected.
func TestGateTimeoutFailsClosed(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	for _, tt := range []struct {
		name    string
		gate    extension.GateFunc
		timeout time.Duration
		gone    bool
	}{
		{"a gate that waits for its deadline", func(ctx context.Context, _ extension.GateRequest) (*extension.WaitPlan, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, time.Nanosecond, false},
		{"a gate that ignores its context", func(context.Context, extension.GateRequest) (*extension.WaitPlan, error) {
			<-release
			return nil, nil
		}, time.Nanosecond, false},
		{"a caller that goes", func(context.Context, extension.GateRequest) (*extension.WaitPlan, error) {
			<-release
			return nil, nil
		}, time.Hour, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := stepSetup(t, []extension.Registration{{Name: "acme", Operations: []extension.Operation{handlerOp("acme.count", okHandler)}}, {Name: "slow", Gate: tt.gate}}, "acme.count", `{}`, "")
			toolbelt.SetGateTimeout(b.tb, tt.timeout)
			ctx, cancel := context.WithCancel(context.Background())
			if tt.gone {
				cancel()
			}
			defer cancel()
			plan, name, err := toolbelt.RunGates(ctx, b.tb, "acme", b.call)
			if tt.gone {
				if !errors.Is(err, context.Canceled) || plan != nil {
					t.Fatalf("gates for a gone caller = %v, %v; want its context's error", plan, err)
				}
				return
			}
			var gr *extension.GateRefusal
			var oe *extension.OperationError
			if plan != nil || name != "slow" || !errors.As(err, &gr) || gr.Gate != "slow" || !errors.As(err, &oe) || oe.Code != toolbelt.ErrGateFailed {
				t.Fatalf("gates = %v from %q, %v; want slow's gate_failed", plan, name, err)
			}
		})
	}
}

// Each extension is handed its own configuration of the active
// generation: a gate its own registration's, a handler its operation
// owner's.
func TestExtensionsAreHandedTheirOwnConfig(t *testing.T) {
	var gateSaw, handlerSaw string
	gated := extension.Registration{Name: "gk", Gate: extension.GateFunc(func(_ context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
		gateSaw = string(req.Authority.Config)
		return nil, nil
	})}
	owner := extension.Registration{Name: "acme", Operations: []extension.Operation{{Name: "acme.count", Summary: "Count.",
		Handler: func(_ context.Context, auth extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
			handlerSaw = string(auth.Config)
			return nil, nil
		}}}}
	f := fixture(t, false)
	for _, r := range []extension.Registration{owner, gated} {
		if err := f.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	f.Env.Extensions.Set(0, "gk", toolbelt.Enablement{Enabled: true, Config: json.RawMessage(`{"who":"gk"}`)})
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "acme.count", `{}`, ""); err != nil {
		t.Fatal(err)
	}
	if gateSaw != `{"who":"gk"}` || handlerSaw != `{}` {
		t.Fatalf("the gate saw %s and the handler %s; want each its own config", gateSaw, handlerSaw)
	}
}

// Actions follow the active generation: a disabled registration's
// actions are neither listed nor served, and one enabled for some scopes
// is served only there.
func TestActionsFollowTheActiveGeneration(t *testing.T) {
	b := setup(t)
	rec := &recorder{}
	host := toolbelt.NewHost(nil)
	b.acts = toolbelt.NewActions(b.ctl, host)
	if err := host.Register(echoAction(rec.handle)); err != nil {
		t.Fatal(err)
	}
	state := toolbelt.Enablement{Enabled: false}
	host.Follow(func(gen int64, reg string) toolbelt.Enablement {
		if gen == 0 && reg == "ext" {
			return state
		}
		return toolbelt.Enablement{Enabled: true}
	})
	act := func() error {
		_, err := b.acts.Act(operator, toolbelt.ActRequest{Action: "ext.echo", Scope: "s1"})
		return err
	}
	if got := b.acts.List(); len(got) != 0 {
		t.Fatalf("a disabled registration's actions are listed: %v", got)
	}
	if err := act(); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("a disabled registration's action: %v, want not found", err)
	}
	state = toolbelt.Enablement{Enabled: true, Scopes: []string{"other"}}
	if got := b.acts.List(); len(got) != 1 {
		t.Fatalf("an action enabled for some scope is not listed: %v", got)
	}
	if err := act(); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("an action outside its scopes: %v, want not found", err)
	}
	state = toolbelt.Enablement{Enabled: true, Scopes: []string{"s1"}}
	if err := act(); err != nil {
		t.Fatalf("an action enabled for its scope: %v", err)
	}
	if len(rec.calls()) != 1 {
		t.Fatalf("the handler ran %d times, want once", len(rec.calls()))
	}
}

// The start gates the scheduler is given follow the generations: a
// registration is listed only when both the generation the first attempt
// would be pinned to and the active one enable it for the Work's scope;
// a registration without a start gate is never listed; the order is the
// registration names'.
func TestStartGatesFollowTheGeneration(t *testing.T) {
	allow := extension.StartGateFunc(func(context.Context, extension.StartRequest) (*extension.WaitPlan, error) { return nil, nil })
	host := toolbelt.NewHost(nil)
	for _, reg := range []extension.Registration{{Name: "zeta", StartGate: allow}, {Name: "alpha", StartGate: allow}, {Name: "plain"}} {
		if err := host.Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	say := map[int64]map[string]toolbelt.Enablement{}
	host.Follow(func(gen int64, reg string) toolbelt.Enablement {
		if e, ok := say[gen][reg]; ok {
			return e
		}
		return toolbelt.Enablement{Enabled: true}
	})
	names := func(gen int64, scope string) []string {
		var out []string
		for _, r := range host.StartGates(gen, scope) {
			out = append(out, r.Name)
		}
		return out
	}
	if got := names(3, "s"); len(got) != 2 || got[0] != "alpha" || got[1] != "zeta" {
		t.Fatalf("start gates %v, want alpha then zeta", got)
	}
	say[3] = map[string]toolbelt.Enablement{"alpha": {Enabled: true, Scopes: []string{"other"}}}
	if got := names(3, "s"); len(got) != 1 || got[0] != "zeta" {
		t.Fatalf("generation 3 enables alpha elsewhere: start gates %v, want zeta", got)
	}
	if got := names(4, "s"); len(got) != 2 {
		t.Fatalf("generation 4 enables both: start gates %v", got)
	}
	say[0] = map[string]toolbelt.Enablement{"zeta": {}}
	if got := names(4, "s"); len(got) != 1 || got[0] != "alpha" {
		t.Fatalf("the active generation disables zeta: start gates %v, want alpha", got)
	}
}
