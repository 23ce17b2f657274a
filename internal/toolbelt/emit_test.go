package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// emitFixture is a production toolbelt with its refusal log captured and,
// when allowed is set, the configured emit rule (EmitAllowed). acme's
// acme.count translates its input's "type" into an emission; other is a
// second registration, so other.* is a registration's family.
func emitFixture(t *testing.T, allowed func(scope, binding, eventType string) bool) (*toolbelttest.Fixture, *toolbelttest.Attempt, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	h := toolbelttest.Harness{Name: "emit", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		o := env.Options()
		o.EmitAllowed = allowed
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		return toolbelt.New(o)
	}}
	f, err := toolbelttest.NewFixture(t.TempDir(), h, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	translate := func(_ context.Context, _ extension.Authority, in json.RawMessage) (extension.Emission, error) {
		var v struct{ Type string }
		if err := json.Unmarshal(in, &v); err != nil {
			return extension.Emission{}, err
		}
		return extension.Emission{Type: v.Type}, nil
	}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{{Name: "acme.count", Summary: "Counts.", Emit: translate}}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Register(extension.Registration{Name: "other", Operations: []extension.Operation{handlerOp("other.ping", okHandler)}}); err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	return f, a, logs
}

func call(f *toolbelttest.Fixture, a *toolbelttest.Attempt, op, input string) error {
	_, err := f.TB.Call(context.Background(), a.Token, extension.CallRequest{Operation: op, Input: json.RawMessage(input)})
	return err
}

func wantBareForbidden(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) || kernel.CodeOf(err) != "forbidden" {
		t.Fatalf("%s: %v, want the bare 403 forbidden", what, err)
	}
}

func countEvents(t *testing.T, f *toolbelttest.Fixture, typ string) int {
	t.Helper()
	evs, err := f.Events(typ)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestTranslatedEmissionCarriesOnlyItsOwnFamily: an operation's Emit
// translator emits its own registration's family; another registration's
// family, or any family but its own, is refused with the bare 403 and its
// precise reason logged, and nothing is accepted.
func TestTranslatedEmissionCarriesOnlyItsOwnFamily(t *testing.T) {
	f, a, logs := emitFixture(t, nil)
	if err := call(f, a, "acme.count", `{"type":"acme.counted"}`); err != nil {
		t.Fatalf("a translation of the registration's own family: %v", err)
	}
	if n := countEvents(t, f, "acme.counted"); n != 1 {
		t.Fatalf("acme.counted accepted %d times", n)
	}
	for _, typ := range []string{"other.pinged", "deploy.done"} {
		wantBareForbidden(t, call(f, a, "acme.count", `{"type":"`+typ+`"}`), "a translation into "+typ)
		if n := countEvents(t, f, typ); n != 0 {
			t.Fatalf("a refused translation accepted %d %s", n, typ)
		}
		if !strings.Contains(logs.String(), "translated its input into "+typ) {
			t.Fatalf("the refusal's reason is not logged:\n%s", logs.String())
		}
	}
	// The refusal kept the attempt's authority.
	if err := call(f, a, "acme.count", `{"type":"acme.counted"}`); err != nil {
		t.Fatalf("after a refused translation: %v", err)
	}
}

// TestConfiguredEmitFamilies: with the configured rule, an execution's own
// emissions (emit, create_work's input) are refused with the bare 403
// outside the families it allows; a registration's family is still the
// 422 family_not_allowed, and a translated emission follows its own rule,
// not the configured one.
func TestConfiguredEmitFamilies(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	allowed := func(scope, binding, eventType string) bool {
		mu.Lock()
		asked = append(asked, scope+"/"+binding+"/"+eventType)
		mu.Unlock()
		return strings.HasPrefix(eventType, "deploy.")
	}
	f, a, logs := emitFixture(t, allowed)
	if err := call(f, a, "emit", `{"type":"deploy.done"}`); err != nil {
		t.Fatalf("an allowed family: %v", err)
	}
	wantBareForbidden(t, call(f, a, "emit", `{"type":"ci.passed"}`), "emit of a family the configuration does not allow")
	if !strings.Contains(logs.String(), "authorization.emit does not list the ci family") {
		t.Fatalf("the refusal's reason is not logged:\n%s", logs.String())
	}
	wantBareForbidden(t, call(f, a, "create_work", `{"input":{"type":"ci.requested"}}`), "create_work with an input of a family not allowed")
	if n := countEvents(t, f, "ci.passed") + countEvents(t, f, "ci.requested"); n != 0 {
		t.Fatalf("refused emissions accepted %d events", n)
	}
	if err := call(f, a, "emit", `{"type":"acme.counted"}`); kernel.CodeOf(err) != "family_not_allowed" || !errors.Is(err, extension.ErrInvalid) {
		t.Fatalf("emit of a registration's family: %v, want 422 family_not_allowed", err)
	}
	if err := call(f, a, "acme.count", `{"type":"acme.counted"}`); err != nil {
		t.Fatalf("a translated emission is not under the configured rule: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := toolbelttest.Scope + "/" + toolbelttest.Binding + "/deploy.done"
	if len(asked) == 0 || asked[0] != want {
		t.Fatalf("the rule was asked %v, want first %s", asked, want)
	}
	for _, q := range asked {
		if strings.Contains(q, "acme.") {
			t.Fatalf("the configured rule was asked about a registration's family: %v", asked)
		}
	}
}
