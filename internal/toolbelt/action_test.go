package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// recorder is an action handler that keeps every request it was handed
// and answers with what it returns.
type recorder struct {
	mu     sync.Mutex
	seen   []extension.ActionRequest
	answer func(extension.ActionRequest) (json.RawMessage, error)
}

func (r *recorder) handle(_ context.Context, req extension.ActionRequest) (json.RawMessage, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req)
	r.mu.Unlock()
	if r.answer != nil {
		return r.answer(req)
	}
	return json.Marshal(map[string]string{"caller": req.Caller, "event": req.Event})
}

func (r *recorder) calls() []extension.ActionRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// withActions gives the bundle an action registry holding reg.
func (b *bundle) withActions(t *testing.T, reg extension.Registration) {
	t.Helper()
	host := toolbelt.NewHost(nil)
	b.acts = toolbelt.NewActions(b.ctl, host)
	if err := host.Register(reg); err != nil {
		t.Fatal(err)
	}
}

func echoAction(h extension.ActionHandler) extension.Registration {
	return extension.Registration{Name: "ext", Actions: []extension.Action{{Name: "ext.echo", Summary: "Echo the request.", Handler: h}}}
}

func (b *bundle) actionEvents(t *testing.T) []storage.Event {
	t.Helper()
	evs, err := b.store.ListEvents(context.Background(), &storage.ListEventsParams{Type: kernel.TypeAction})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// An action is recorded as a core.action Event stamped with the operator
// from the context, and its handler gets that operator as its Caller,
// with the Event's id and the request id.
func TestActStampsTheOperatorOnEventAndHandler(t *testing.T) {
	b := setup(t)
	rec := &recorder{}
	b.withActions(t, echoAction(rec.handle))
	res, err := b.acts.Act(operator, toolbelt.ActRequest{Action: "ext.echo", Scope: "s1", Input: json.RawMessage(`{"b": 2, "a": "x"}`), DeliveryID: "act-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := rec.calls()
	if len(got) != 1 {
		t.Fatalf("the handler ran %d times, want once", len(got))
	}
	want := extension.ActionRequest{Action: "ext.echo", Caller: "operator:ann", Scope: "s1", Input: json.RawMessage(`{"a":"x","b":2}`), RequestID: "act-1", Event: res.Event.ID}
	if h := got[0]; h.Action != want.Action || h.Caller != want.Caller || h.Scope != want.Scope || h.Work != "" ||
		string(h.Input) != string(want.Input) || h.RequestID != want.RequestID || h.Event != want.Event || h.Event == "" {
		t.Errorf("the handler got %+v, want %+v", h, want)
	}
	wantResult := `{"caller":"operator:ann","event":"` + res.Event.ID + `"}`
	if string(res.Result) != wantResult {
		t.Errorf("result %s, want %s", res.Result, wantResult)
	}
	b.reopen(t)
	ev, err := b.store.GetEvent(context.Background(), res.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != kernel.TypeAction || ev.Source != kernel.SourceAction || ev.Actor != "operator:ann" || ev.Scope != "s1" ||
		ev.Work != "" || ev.Parent != "" || ev.DeliveryID != "act-1" {
		t.Errorf("the stored event is %+v, want core.action from core.action by operator:ann in s1", ev)
	}
	if string(ev.Data) != `{"action":"ext.echo","input":{"a":"x","b":2}}` {
		t.Errorf("event data %s", ev.Data)
	}
}

// With a Work, the Event is about that Work and joins its causal chain,
// but it is not routed: it is never queued as the Work's input.
func TestActAboutAWork(t *testing.T) {
	b := setup(t)
	rec := &recorder{}
	b.withActions(t, echoAction(rec.handle))
	w := b.createWork(t, kernel.CreateWorkRequest{})
	before := inputsOf(t, b.store, w.ID)
	res, err := b.acts.Act(operator, toolbelt.ActRequest{Action: "ext.echo", Scope: "s1", Work: w.ID, DeliveryID: "act-w"})
	if err != nil {
		t.Fatal(err)
	}
	created, err := b.store.GetEvent(context.Background(), w.CreatedEvent)
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Work != w.ID || res.Event.Parent != w.CreatedEvent || res.Event.Root != created.Root || res.Event.CorrelationKey != "" {
		t.Errorf("event %+v, want it about Work %s, derived from its core.work.created", res.Event, w.ID)
	}
	if got := rec.calls(); len(got) != 1 || got[0].Work != w.ID || string(got[0].Input) != `{}` {
		t.Errorf("the handler got %+v, want Work %s and input {}", got, w.ID)
	}
	if after := inputsOf(t, b.store, w.ID); !slices.Equal(after, before) {
		t.Errorf("the Work's inputs went from %v to %v: a core.action Event must not be routed", before, after)
	}

	other := b.createWork(t, kernel.CreateWorkRequest{Scope: "s2"})
	for name, req := range map[string]toolbelt.ActRequest{
		"another scope's Work": {Action: "ext.echo", Scope: "s1", Work: other.ID},
		"no such Work":         {Action: "ext.echo", Scope: "s1", Work: "wrk_missing"},
	} {
		_, err := b.acts.Act(operator, req)
		if kernel.CodeOf(err) != kernel.ErrInvalidAction.Code || !errors.Is(err, extension.ErrInvalid) {
			t.Errorf("%s: %v, want invalid_action", name, err)
		}
	}
	if n := len(rec.calls()); n != 1 {
		t.Errorf("the handler ran %d times, want only for the valid request", n)
	}
}

// A retried request (the same delivery id) accepts no second Event and
// hands the handler the same request id and Event; under that delivery id
// another action, input or operator is a conflict that runs nothing.
func TestActRetryAcceptsOneEvent(t *testing.T) {
	b := setup(t)
	rec := &recorder{}
	reg := echoAction(rec.handle)
	reg.Actions = append(reg.Actions, extension.Action{Name: "ext.other", Summary: "Another.", Handler: rec.handle})
	b.withActions(t, reg)
	req := toolbelt.ActRequest{Action: "ext.echo", Scope: "s1", Input: json.RawMessage(`{"n":1,"m":2}`), DeliveryID: "act-r"}
	first, err := b.acts.Act(operator, req)
	if err != nil {
		t.Fatal(err)
	}
	b.reopen(t)
	b.withActions(t, reg)
	// The same input with its members in another order is the same
	// request.
	req.Input = json.RawMessage(`{"m":2,"n":1}`)
	again, err := b.acts.Act(operator, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Event.ID != first.Event.ID || !again.Event.Replayed || first.Event.Replayed {
		t.Fatalf("retry event %s (replayed %v), first %s (replayed %v): want the first one, replayed", again.Event.ID, again.Event.Replayed, first.Event.ID, first.Event.Replayed)
	}
	calls := rec.calls()
	if len(calls) != 2 || calls[1].Event != calls[0].Event || calls[1].RequestID != "act-r" || calls[0].RequestID != "act-r" {
		t.Fatalf("handler requests %+v, want the same event and request id twice", calls)
	}
	for name, r := range map[string]struct {
		ctx context.Context
		req toolbelt.ActRequest
	}{
		"another input":    {operator, toolbelt.ActRequest{Action: "ext.echo", Scope: "s1", Input: json.RawMessage(`{"n":2}`), DeliveryID: "act-r"}},
		"another action":   {operator, toolbelt.ActRequest{Action: "ext.other", Scope: "s1", Input: json.RawMessage(`{"n":1,"m":2}`), DeliveryID: "act-r"}},
		"another operator": {kernel.WithActor(context.Background(), "operator:bob"), toolbelt.ActRequest{Action: "ext.echo", Scope: "s1", Input: json.RawMessage(`{"n":1,"m":2}`), DeliveryID: "act-r"}},
	} {
		_, err := b.acts.Act(r.ctx, r.req)
		if kernel.CodeOf(err) != kernel.ErrEventConflict.Code || !errors.Is(err, extension.ErrConflict) {
			t.Errorf("%s under a used delivery id: %v, want event_conflict", name, err)
		}
	}
	if n := len(rec.calls()); n != 2 {
		t.Errorf("the handler ran %d times, want 2 (no conflicting request runs it)", n)
	}
	if evs := b.actionEvents(t); len(evs) != 1 {
		t.Errorf("%d core.action events, want 1", len(evs))
	}
}

func TestActRefusals(t *testing.T) {
	b := setup(t)
	refusal := &extension.OperationError{Code: "not_today", Message: "the action refuses today; try tomorrow"}
	var answer json.RawMessage
	var fail error
	var panicking bool
	rec := &recorder{answer: func(extension.ActionRequest) (json.RawMessage, error) {
		if panicking {
			panic("boom: token=canary-7f3a")
		}
		return answer, fail
	}}
	b.withActions(t, echoAction(rec.handle))
	act := func(ctx context.Context, req toolbelt.ActRequest) error {
		_, err := b.acts.Act(ctx, req)
		return err
	}
	ok := toolbelt.ActRequest{Action: "ext.echo", Scope: "s1"}

	if err := act(context.Background(), ok); kernel.CodeOf(err) != kernel.ErrActorRequired.Code || !errors.Is(err, extension.ErrUnauthorized) {
		t.Errorf("no operator: %v, want actor_required", err)
	}
	if err := act(operator, toolbelt.ActRequest{Action: "ext.nope", Scope: "s1"}); kernel.CodeOf(err) != toolbelt.ErrActionNotFound.Code || !errors.Is(err, extension.ErrNotFound) {
		t.Errorf("unknown action: %v, want action_not_found", err)
	}
	for _, in := range []string{`[1]`, `"x"`, `{"a":1,"a":2}`, `{`, `{"big":"` + strings.Repeat("x", toolbelt.MaxActionInput) + `"}`} {
		if err := act(operator, toolbelt.ActRequest{Action: "ext.echo", Scope: "s1", Input: json.RawMessage(in)}); kernel.CodeOf(err) != kernel.ErrInvalidAction.Code {
			t.Errorf("input %.20s…: %v, want invalid_action", in, err)
		}
	}
	if err := act(operator, toolbelt.ActRequest{Action: "ext.echo"}); kernel.CodeOf(err) != kernel.ErrInvalidEvent.Code {
		t.Errorf("no scope: %v, want invalid_event", err)
	}
	if n := len(rec.calls()); n != 0 {
		t.Fatalf("the handler ran %d times for refused requests", n)
	}
	if evs := b.actionEvents(t); len(evs) != 0 {
		t.Fatalf("refused requests recorded %d events", len(evs))
	}

	// The handler's own refusal reaches the caller as it is; the request
	// is still on record.
	fail = refusal
	var oe *extension.OperationError
	if err := act(operator, ok); !errors.As(err, &oe) || *oe != *refusal {
		t.Errorf("handler refusal: %v, want %v", err, refusal)
	}
	if evs := b.actionEvents(t); len(evs) != 1 || evs[0].Actor != "operator:ann" {
		t.Errorf("after a refusal: events %+v, want the request recorded", evs)
	}
	// Failures of the handler are the host's, never a refusal of the
	// request: a plain error, a panic, a result that is not an object.
	fail = errors.New("backend down: token=canary-7f3a")
	if err := act(operator, ok); err == nil || errors.As(err, &oe) || kernel.CodeOf(err) != "" {
		t.Errorf("handler error: %v, want a host error", err)
	} else if strings.Contains(err.Error(), "canary-7f3a") || !strings.Contains(err.Error(), "*errors.errorString") {
		t.Errorf("handler error %q: want its Go type, never its text (it may hold a credential)", err)
	}
	fail, answer = nil, json.RawMessage(`[1,2]`)
	if err := act(operator, ok); err == nil || kernel.CodeOf(err) != "" || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("array result: %v, want a host error", err)
	}
	answer, panicking = nil, true
	if err := act(operator, ok); err == nil || !strings.Contains(err.Error(), "panic(string)") || strings.Contains(err.Error(), "canary-7f3a") {
		t.Errorf("panic: %v, want a host error naming the panic's type, never its value", err)
	}
	panicking = false
	if res, err := b.acts.Act(operator, ok); err != nil || string(res.Result) != `{}` {
		t.Errorf("empty result = %s, %v; want {}", res.Result, err)
	}

	// A registry without actions has none.
	bare := toolbelt.NewActions(b.ctl, toolbelt.NewHost(nil))
	if _, err := bare.Act(operator, ok); kernel.CodeOf(err) != toolbelt.ErrActionNotFound.Code {
		t.Errorf("no registry: %v, want action_not_found", err)
	}
	if got := bare.List(); got == nil || len(got) != 0 {
		t.Errorf("no registry lists %v, want an empty list", got)
	}
}

func TestActionsRegister(t *testing.T) {
	h := func(context.Context, extension.ActionRequest) (json.RawMessage, error) { return nil, nil }
	act := func(name string) extension.Action {
		return extension.Action{Name: name, Summary: "Does it.", Handler: h}
	}
	for name, c := range map[string]struct {
		reg  extension.Registration
		kind error
	}{
		"bad registration name": {extension.Registration{Name: "Ext", Actions: []extension.Action{act("Ext.a")}}, extension.ErrInvalid},
		"outside the namespace": {extension.Registration{Name: "ext", Actions: []extension.Action{act("other.a")}}, extension.ErrInvalid},
		"the bare namespace":    {extension.Registration{Name: "ext", Actions: []extension.Action{act("ext")}}, extension.ErrInvalid},
		"upper case":            {extension.Registration{Name: "ext", Actions: []extension.Action{act("ext.Go")}}, extension.ErrInvalid},
		"listed twice":          {extension.Registration{Name: "ext", Actions: []extension.Action{act("ext.a"), act("ext.a")}}, extension.ErrConflict},
		"an operation's name": {extension.Registration{Name: "ext", Actions: []extension.Action{act("ext.a")},
			Operations: []extension.Operation{{Name: "ext.a", Summary: "Op.", Handler: okHandler}}}, extension.ErrConflict},
		"no summary":        {extension.Registration{Name: "ext", Actions: []extension.Action{{Name: "ext.a", Handler: h}}}, extension.ErrInvalid},
		"no handler":        {extension.Registration{Name: "ext", Actions: []extension.Action{{Name: "ext.a", Summary: "S."}}}, extension.ErrInvalid},
		"schema not object": {extension.Registration{Name: "ext", Actions: []extension.Action{{Name: "ext.a", Summary: "S.", Handler: h, InputSchema: json.RawMessage(`{"type":"string"}`)}}}, extension.ErrInvalid},
		"schema not json":   {extension.Registration{Name: "ext", Actions: []extension.Action{{Name: "ext.a", Summary: "S.", Handler: h, InputSchema: json.RawMessage(`[`)}}}, extension.ErrInvalid},
	} {
		host := toolbelt.NewHost(nil)
		acts := toolbelt.NewActions(nil, host)
		// The refused registration carries a good action too: nothing of
		// it may register.
		c.reg.Actions = append([]extension.Action{act(c.reg.Name + ".good")}, c.reg.Actions...)
		if err := host.Register(c.reg); !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", name, err, c.kind)
		}
		if got := acts.List(); len(got) != 0 {
			t.Errorf("%s: a refused registration registered %v", name, got)
		}
	}

	host := toolbelt.NewHost(nil)
	acts := toolbelt.NewActions(nil, host)
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	if err := host.Register(extension.Registration{Name: "zed", Actions: []extension.Action{act("zed.b"), {Name: "zed.a", Summary: "A.", Handler: h, InputSchema: schema}}}); err != nil {
		t.Fatal(err)
	}
	if err := host.Register(extension.Registration{Name: "alpha", Actions: []extension.Action{act("alpha.x")}}); err != nil {
		t.Fatal(err)
	}
	if err := host.Register(extension.Registration{Name: "zed"}); !errors.Is(err, extension.ErrConflict) {
		t.Errorf("the same registration name again: %v, want a conflict", err)
	}
	got := acts.List()
	want := []toolbelt.ActionInfo{
		{Name: "alpha.x", Registration: "alpha", Summary: "Does it.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "zed.a", Registration: "zed", Summary: "A.", InputSchema: schema},
		{Name: "zed.b", Registration: "zed", Summary: "Does it.", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	if len(got) != len(want) {
		t.Fatalf("List = %+v", got)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Registration != want[i].Registration || got[i].Summary != want[i].Summary || string(got[i].InputSchema) != string(want[i].InputSchema) {
			t.Errorf("List[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The toolbelt never serves an action: a binding that names one does not
// make it callable, and the handler never runs for an execution.
func TestToolbeltNeverServesAnAction(t *testing.T) {
	f := fixture(t, false)
	ran := false
	reg := extension.Registration{Name: "acme", Actions: []extension.Action{{Name: "acme.echo", Summary: "Echo.",
		Handler: func(context.Context, extension.ActionRequest) (json.RawMessage, error) { ran = true; return nil, nil }}}}
	if err := f.Register(reg); err != nil {
		t.Fatal(err)
	}
	tb := f.TB.(*toolbelt.Toolbelt)
	if tb.Declared("acme.echo") || slices.Contains(tb.Operations(), "acme.echo") {
		t.Fatal("the toolbelt declares an action as an operation")
	}
	// The test binding names acme.echo among its operations.
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "acme.echo", `{}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Errorf("an execution calling an action: %v, want forbidden", err)
	}
	if ran {
		t.Error("an execution ran an action's handler")
	}
}
