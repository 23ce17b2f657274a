package scheduler_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
)

// optional is a scripted executor that can run without an endpoint, except
// for configs it says need one.
type optional struct {
	*schedulertest.Executor
	needs bool
}

func (o optional) NeedsEndpoint(json.RawMessage) bool { return o.needs }

// A binding that grants no operation gets no token and no endpoint when
// its executor can do without (executor.EndpointOptional), unless the
// executor says its config needs the endpoint; an executor that does not
// say so keeps getting both, as a binding with operations does.
func TestBindingWithoutOperationsGetsNoEndpoint(t *testing.T) {
	info := executor.Info{Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}}
	info.Name = "optional"
	without := optional{Executor: schedulertest.New(info)}
	info.Name = "needy"
	needy := optional{Executor: schedulertest.New(info), needs: true}
	h := newHarness(t, func(o *scheduler.Options) {
		o.Executors["optional"], o.Executors["needy"] = without, needy
		bindings := o.Bindings
		o.Bindings = func(ctx context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			switch q.Binding {
			case "bi": // no operation, an executor that can do without
				return scheduler.Binding{Executor: "optional", Config: json.RawMessage(`{}`), Generation: 1, NoOperations: true}, nil
			case "bp": // no operation, but the config needs the endpoint
				return scheduler.Binding{Executor: "needy", Config: json.RawMessage(`{}`), Generation: 1, NoOperations: true}, nil
			case "bs": // operations, on the executor that could do without
				return scheduler.Binding{Executor: "optional", Config: json.RawMessage(`{}`), Generation: 1}, nil
			case "b1": // no operation, an executor that always takes one
				b, err := bindings(ctx, q)
				b.NoOperations = true
				return b, err
			}
			return bindings(ctx, q)
		}
	})
	h.create("bi")
	h.tick()
	bare := without.Next(t)
	if c := bare.Req.Context; c.Token != "" || c.ToolbeltEndpoint != "" || c.ToolbeltTokenFile != "" {
		t.Errorf("a binding without operations got a toolbelt: %+v", c)
	}
	if c := bare.Req.Context; c.ToolbeltDir == "" || c.PlaybookDir == "" {
		t.Errorf("the segment lost the os binary's directory or the playbooks: %+v", c)
	}
	if calls, eps := h.tokens.snapshot(); len(calls) != 0 || len(eps) != 0 {
		t.Fatalf("issuer calls %+v, endpoints %v for a binding without operations", calls, eps)
	}
	for _, b := range []struct {
		binding string
		ex      optional
	}{{"bp", needy}, {"bs", without}} {
		h.create(b.binding)
		h.tick()
		seg := b.ex.Next(t)
		if c := seg.Req.Context; c.Token != "tok-"+seg.Req.ExecutionID+"-claim" || c.ToolbeltEndpoint == "" || c.ToolbeltTokenFile == "" {
			t.Errorf("binding %s: context %+v, want a token and an endpoint", b.binding, c)
		}
	}
	h.create("b1")
	h.tick()
	if c := h.plain.Next(t).Req.Context; c.Token == "" || c.ToolbeltEndpoint == "" {
		t.Errorf("an executor that always takes an endpoint got none: %+v", c)
	}
	if calls, eps := h.tokens.snapshot(); len(calls) != 3 || len(eps) != 3 {
		t.Fatalf("issuer calls %+v, endpoints %v; want three", calls, eps)
	}
}
