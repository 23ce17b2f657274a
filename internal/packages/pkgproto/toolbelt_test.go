package pkgproto_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// The Python package's gate behind the production toolbelt: its refusal
// reaches the caller verbatim, and its time-out and its crash are
// gate_failed, with the operation never run.
func TestPackageGateAtTheToolbelt(t *testing.T) {
	needPython(t)
	h := newHarness()
	inst := h.start(t, pyecho(t))
	f, err := toolbelttest.NewFixture(t.TempDir(), toolbelttest.Harness{Name: "pkgproto", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		o := env.Options()
		// The package's own gate timeout is the one that answers.
		o.GateTimeout = time.Hour
		return toolbelt.New(o)
	}}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var ran atomic.Int32
	acme := extension.Registration{Name: "acme", Operations: []extension.Operation{{Name: "acme.echo", Summary: "Echo.",
		Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			ran.Add(1)
			return json.RawMessage(`{"ok":true}`), nil
		}}}}
	if err := f.Register(acme); err != nil {
		t.Fatal(err)
	}
	if err := f.Register(inst.Registration()); err != nil {
		t.Fatal(err)
	}
	// In this order: the crash leaves the package restarting.
	for _, c := range []struct {
		mode, code string
		// then is what the test does while the call waits, given the
		// timers' mark before the call.
		then func(mark int)
	}{
		{mode: "allow"},
		{mode: "refuse", code: "not_allowed"},
		{mode: "hang", code: toolbelt.ErrGateFailed, then: func(mark int) { h.timers.fireSince(t, gateTimeout, mark) }},
		{mode: "crash", code: toolbelt.ErrGateFailed},
	} {
		t.Run(c.mode, func(t *testing.T) {
			f.Env.Extensions.Set(0, "pyecho", toolbelt.Enablement{Enabled: true, Config: json.RawMessage(`{"` + c.mode + `":["acme.echo"]}`)})
			a, err := f.Start()
			if err != nil {
				t.Fatal(err)
			}
			before := ran.Load()
			mark := h.timers.mark()
			done := make(chan error, 1)
			go func() {
				_, err := f.TB.Call(context.Background(), a.Token, extension.CallRequest{Operation: "acme.echo", Input: json.RawMessage(`{}`)})
				done <- err
			}()
			if c.then != nil {
				c.then(mark)
			}
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the call did not end")
			}
			if c.code == "" {
				if err != nil || ran.Load() != before+1 {
					t.Fatalf("an allowed call = %v (ran %d times)", err, ran.Load()-before)
				}
				return
			}
			var gr *extension.GateRefusal
			var oe *extension.OperationError
			if !errors.As(err, &gr) || gr.Gate != "pyecho" || !errors.As(err, &oe) || oe.Code != c.code {
				t.Fatalf("refusal = %v, want pyecho's %s", err, c.code)
			}
			if ran.Load() != before {
				t.Fatal("a refused operation ran")
			}
			if strings.Contains(err.Error(), "crashing") {
				t.Fatalf("the refusal %q shows the package's output", err)
			}
		})
	}
}
