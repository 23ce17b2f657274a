package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// fakeIngress admits the scopes its config lists.
type fakeIngress struct{ source string }

func (f fakeIngress) Source() string { return f.source }
func (fakeIngress) Serve(context.Context, json.RawMessage, extension.IngressHost) error {
	return nil
}
func (fakeIngress) AdmitsTrace(cfg json.RawMessage, scope string) bool {
	var c struct{ Scopes []string }
	_ = json.Unmarshal(cfg, &c)
	for _, s := range c.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// An ingress's source is in its registration's namespace; a route trace
// may name it only where the active generation enables the registration
// and its ingress admits the scope.
func TestHostIngresses(t *testing.T) {
	h := toolbelt.NewHost(config.NewRegistry())
	for _, src := range []string{"hook", "other.webhook", "hook.Web"} {
		err := h.Register(extension.Registration{Name: "hook", Ingress: fakeIngress{source: src}})
		if !errors.Is(err, extension.ErrInvalid) {
			t.Fatalf("source %s: %v, want ErrInvalid", src, err)
		}
	}
	if err := h.Register(extension.Registration{Name: "hook", Ingress: fakeIngress{source: "hook.webhook"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Register(extension.Registration{Name: "plain"}); err != nil {
		t.Fatal(err)
	}
	if got := h.Ingresses(); len(got) != 1 || got[0].Name != "hook" {
		t.Fatalf("ingresses %+v", got)
	}
	h.Follow(func(_ int64, reg string) toolbelt.Enablement {
		return toolbelt.Enablement{Enabled: true, Scopes: []string{"ops", "dev"}, Config: json.RawMessage(`{"scopes": ["ops", "qa"]}`)}
	})
	for _, c := range []struct {
		source, scope      string
		registered, admits bool
	}{
		{"hook.webhook", "ops", true, true},
		{"hook.webhook", "qa", true, false},  // the ingress admits it, the generation does not enable it there
		{"hook.webhook", "dev", true, false}, // enabled, but the ingress sends nothing there
		{"plain", "ops", false, false},
		{"nobody.webhook", "ops", false, false},
	} {
		if r, a := h.AdmitsTrace(c.source, c.scope); r != c.registered || a != c.admits {
			t.Errorf("AdmitsTrace(%s, %s) = %v %v, want %v %v", c.source, c.scope, r, a, c.registered, c.admits)
		}
	}
	if on, cfg := h.IngressConfig("hook"); !on || string(cfg) != `{"scopes": ["ops", "qa"]}` {
		t.Fatalf("IngressConfig = %v %s", on, cfg)
	}
	h.Follow(func(int64, string) toolbelt.Enablement { return toolbelt.Enablement{Enabled: true, Scopes: []string{}} })
	if on, _ := h.IngressConfig("hook"); on {
		t.Fatal("an ingress enabled in no scope runs")
	}
}

// samplingIngress is a fakeIngress that offers one sample per scope.
type samplingIngress struct{ fakeIngress }

func (samplingIngress) Samples(_ json.RawMessage, scope string) []extension.IngressSample {
	return []extension.IngressSample{{Name: "push-" + scope, Type: "hook.push", CorrelationKey: "k", Data: json.RawMessage(`{"n":1}`)}}
}

// An ingress that offers samples is asked only for the scopes the active
// generation enables it in and it admits a trace in; one that does not
// implement IngressSampler offers none.
func TestHostIngressSamples(t *testing.T) {
	h := toolbelt.NewHost(config.NewRegistry())
	if err := h.Register(extension.Registration{Name: "hook", Ingress: samplingIngress{fakeIngress{source: "hook.webhook"}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Register(extension.Registration{Name: "mute", Ingress: fakeIngress{source: "mute.webhook"}}); err != nil {
		t.Fatal(err)
	}
	h.Follow(func(_ int64, reg string) toolbelt.Enablement {
		return toolbelt.Enablement{Enabled: true, Scopes: []string{"ops", "dev"}, Config: json.RawMessage(`{"scopes": ["ops", "qa"]}`)}
	})
	got := h.IngressSamples("ops")
	if len(got) != 1 || got[0].Source != "hook.webhook" || got[0].Name != "push-ops" || got[0].Type != "hook.push" {
		t.Fatalf("samples in ops = %+v", got)
	}
	for _, scope := range []string{"qa", "dev", "nowhere"} {
		if got := h.IngressSamples(scope); len(got) != 0 {
			t.Errorf("samples in %s = %+v, want none", scope, got)
		}
	}
}
