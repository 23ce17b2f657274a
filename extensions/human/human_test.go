package human

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

// memPort is the Port in memory, with the storage rules: one open
// approval per key, decided once, consumed once.
type memPort struct {
	n     int
	rows  map[string]Approval
	woken []string
}

func newMem() *memPort { return &memPort{rows: map[string]Approval{}} }

func (m *memPort) Get(_ context.Context, id string) (Approval, error) {
	a, ok := m.rows[id]
	if !ok {
		return a, fmt.Errorf("%w: %s", extension.ErrNotFound, id)
	}
	return a, nil
}

func (m *memPort) Open(_ context.Context, k Key) (Approval, error) {
	for _, a := range m.rows {
		if a.Work == k.Work && a.Kind == k.Kind && a.Operation == k.Operation && a.InputHash == k.InputHash && a.ConsumedAt.IsZero() {
			return a, nil
		}
	}
	return Approval{}, extension.ErrNotFound
}

func (m *memPort) Create(ctx context.Context, a Approval) (Approval, error) {
	if _, err := m.Open(ctx, Key{a.Work, a.Kind, a.Operation, a.InputHash}); err == nil {
		return a, extension.ErrConflict
	}
	m.n++
	a.ID = fmt.Sprintf("apr_%d", m.n)
	m.rows[a.ID] = a
	return a, nil
}

func (m *memPort) Decide(_ context.Context, d Decision) (Approval, error) {
	a, ok := m.rows[d.ID]
	if !ok {
		return a, extension.ErrNotFound
	}
	if a.State != StatePending {
		return a, extension.ErrConflict
	}
	a.State, a.Actor, a.Note, a.DecidedAt = d.State, d.Actor, d.Note, d.At
	m.rows[d.ID] = a
	if d.Wake {
		m.woken = append(m.woken, a.Work)
	}
	return a, nil
}

func (m *memPort) Consume(_ context.Context, id string, at time.Time) (Approval, error) {
	a, ok := m.rows[id]
	if !ok {
		return a, extension.ErrNotFound
	}
	if !a.ConsumedAt.IsZero() {
		return a, extension.ErrConflict
	}
	a.ConsumedAt = at
	m.rows[id] = a
	return a, nil
}

func (m *memPort) List(_ context.Context, q ListQuery) ([]Approval, error) {
	var out []Approval
	for _, a := range m.rows {
		if a.Scope == q.Scope && (q.State == "" || a.State == q.State) {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

type fixture struct {
	x    *Extension
	port *memPort
	now  time.Time
	cfg  json.RawMessage
}

func newFixture(cfg string) *fixture {
	f := &fixture{port: newMem(), now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), cfg: json.RawMessage(cfg)}
	f.x = New(Options{
		Port: f.port, Now: func() time.Time { return f.now },
		Resolve: func(list []string) ([]string, error) {
			var out []string
			for _, n := range list {
				switch n {
				case "@ops.writer":
					out = append(out, "ops.deploy", "ops.merge")
				case "!ops.merge":
					out = removeOp(out, "ops.merge")
				default:
					out = append(out, n)
				}
			}
			return out, nil
		},
		ConfigAt: func(context.Context, int64) (json.RawMessage, error) { return f.cfg, nil },
	})
	return f
}

func removeOp(ops []string, op string) []string {
	var out []string
	for _, o := range ops {
		if o != op {
			out = append(out, o)
		}
	}
	return out
}

func (f *fixture) call(t *testing.T, op, input string) (*extension.WaitPlan, error) {
	t.Helper()
	return f.x.Gate(context.Background(), extension.GateRequest{
		Authority: extension.Authority{Scope: "ops", Work: "wrk_1", Binding: "agent", Config: f.cfg},
		Operation: op, Input: json.RawMessage(input),
	})
}

func (f *fixture) act(t *testing.T, name, input string) (json.RawMessage, error) {
	t.Helper()
	for _, a := range f.x.Actions() {
		if a.Name == name {
			return a.Handler(context.Background(), extension.ActionRequest{Action: name, Caller: "operator:alice", Scope: "ops", Input: json.RawMessage(input), Event: "evt_1"})
		}
	}
	t.Fatalf("no action %s", name)
	return nil, nil
}

func approvalOf(t *testing.T, plan *extension.WaitPlan) string {
	t.Helper()
	var out struct{ Approval string }
	if plan == nil || json.Unmarshal(plan.Output, &out) != nil || out.Approval == "" {
		t.Fatalf("plan %+v names no approval", plan)
	}
	return out.Approval
}

func code(err error) string {
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}

func TestApprovalPassesExactlyOnce(t *testing.T) {
	f := newFixture(`{"operations":["@ops.writer","!ops.merge"],"timeout":"1h"}`)
	if plan, err := f.call(t, "ops.merge", `{}`); plan != nil || err != nil {
		t.Fatalf("a call the denial removes: %+v, %v", plan, err)
	}
	if plan, err := f.call(t, "ops.other", `{}`); plan != nil || err != nil {
		t.Fatalf("a call not listed: %+v, %v", plan, err)
	}
	plan, err := f.call(t, "ops.deploy", `{"b":1,"a":2}`)
	if err != nil {
		t.Fatal(err)
	}
	id := approvalOf(t, plan)
	if plan.Timeout != time.Hour || len(plan.Types) != 1 || plan.Types[0] != EventDecided || plan.Keys[0] != "wrk_1" {
		t.Fatalf("plan = %+v", plan)
	}
	// Waiting still: the same call parks on the same approval.
	if again, err := f.call(t, "ops.deploy", `{"a":2,"b":1}`); err != nil || approvalOf(t, again) != id {
		t.Fatalf("the same call (canonically) while pending: %+v, %v", again, err)
	}
	if _, err := f.act(t, ActionApprove, `{"approval":"`+id+`","note":"go"}`); err != nil {
		t.Fatal(err)
	}
	if len(f.port.woken) != 1 || f.port.woken[0] != "wrk_1" {
		t.Fatalf("the decision woke %v", f.port.woken)
	}
	// Approving it again answers it as it is.
	if _, err := f.act(t, ActionApprove, `{"approval":"`+id+`"}`); err != nil {
		t.Fatalf("a repeated approval: %v", err)
	}
	if plan, err := f.call(t, "ops.deploy", `{"a":2,"b":1}`); plan != nil || err != nil {
		t.Fatalf("the approved call: %+v, %v", plan, err)
	}
	next, err := f.call(t, "ops.deploy", `{"a":2,"b":1}`)
	if err != nil || approvalOf(t, next) == id {
		t.Fatalf("the second identical call: %+v, %v; want a new approval", next, err)
	}
	other, err := f.call(t, "ops.deploy", `{"a":3}`)
	if err != nil || approvalOf(t, other) == approvalOf(t, next) {
		t.Fatalf("a call with another input: %+v, %v; want a new approval", other, err)
	}
}

func TestDenialRefusesWithTheReason(t *testing.T) {
	f := newFixture(`{"operations":["ops.deploy"]}`)
	plan, _ := f.call(t, "ops.deploy", `{}`)
	id := approvalOf(t, plan)
	if _, err := f.act(t, ActionDeny, `{"approval":"`+id+`"}`); code(err) != CodeInvalid {
		t.Fatalf("a denial without a reason: %v", err)
	}
	if _, err := f.act(t, ActionDeny, `{"approval":"`+id+`","reason":"not today"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.act(t, ActionApprove, `{"approval":"`+id+`"}`); code(err) != CodeDecided {
		t.Fatalf("approving a denied approval: %v", err)
	}
	_, err := f.call(t, "ops.deploy", `{}`)
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != CodeDenied || !strings.Contains(oe.Message, "not today") || !strings.Contains(oe.Message, "operator:alice") {
		t.Fatalf("the denied call: %v", err)
	}
	if _, err := f.act(t, ActionApprove, `{"approval":"apr_none"}`); code(err) != CodeNotFound {
		t.Fatalf("an unknown approval: %v", err)
	}
}

func TestApprovalExpires(t *testing.T) {
	f := newFixture(`{"operations":["ops.deploy"]}`)
	plan, _ := f.call(t, "ops.deploy", `{}`)
	id := approvalOf(t, plan)
	if plan.Timeout != DefaultTimeout {
		t.Fatalf("the default timeout = %v", plan.Timeout)
	}
	f.now = f.now.Add(DefaultTimeout)
	out, err := f.act(t, ActionList, `{"state":"expired"}`)
	if err != nil || !strings.Contains(string(out), id) {
		t.Fatalf("the expired approvals: %s, %v", out, err)
	}
	if _, err := f.act(t, ActionApprove, `{"approval":"`+id+`"}`); code(err) != CodeExpired {
		t.Fatalf("approving an expired approval: %v", err)
	}
	if _, err := f.call(t, "ops.deploy", `{}`); code(err) != CodeExpired {
		t.Fatalf("the call after the expiry: %v", err)
	}
	if again, err := f.call(t, "ops.deploy", `{}`); err != nil || approvalOf(t, again) == id {
		t.Fatalf("the call after that: %+v, %v; want a new approval", again, err)
	}
}

func TestStartApproval(t *testing.T) {
	f := newFixture(`{"bindings":["deploy"]}`)
	req := extension.StartRequest{Scope: "ops", Work: "wrk_2", Binding: "deploy", Generation: 1}
	if plan, err := f.x.AllowStart(context.Background(), extension.StartRequest{Scope: "ops", Work: "wrk_3", Binding: "other"}); plan != nil || err != nil {
		t.Fatalf("a binding not listed: %+v, %v", plan, err)
	}
	plan, err := f.x.AllowStart(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	id := approvalOf(t, plan)
	if !strings.Contains(plan.Reason, id) {
		t.Fatalf("the reason %q does not name the approval", plan.Reason)
	}
	if _, err := f.act(t, ActionApprove, `{"approval":"`+id+`"}`); err != nil {
		t.Fatal(err)
	}
	if plan, err := f.x.AllowStart(context.Background(), req); plan != nil || err != nil {
		t.Fatalf("the approved start: %+v, %v", plan, err)
	}
}

func TestConfigIsStrict(t *testing.T) {
	x := New(Options{})
	for cfg, want := range map[string]string{
		`{}`:                     "",
		`{"operations":["a.b"]}`: "",
		`{"bogus":1}`:            "/bogus unknown_field",
		`{"timeout":"soon"}`:     "/timeout invalid_value",
		`{"timeout":"-1h"}`:      "/timeout invalid_value",
		`{"bindings":[""]}`:      "/bindings/0 invalid_value",
		`{"operations":"a.b"}`:   "/operations wrong_type",
		`{"operations":[1]}`:     "/operations/0 wrong_type",
	} {
		err := x.CheckConfig(json.RawMessage(cfg))
		got := ""
		var ce *extension.ConfigError
		if errors.As(err, &ce) {
			got = ce.Problems[0].Pointer + " " + ce.Problems[0].Code
		} else if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("CheckConfig(%s) = %q, want %q", cfg, got, want)
		}
	}
}

func TestInputHashIsCanonical(t *testing.T) {
	a, _ := InputHash(json.RawMessage(`{"b": 1, "a": [1.0, "x"]}`))
	b, _ := InputHash(json.RawMessage(`{"a":[1,"x"],"b":1}`))
	c, _ := InputHash(json.RawMessage(`{"a":[1,"y"],"b":1}`))
	if a != b || a == c || len(a) != 64 {
		t.Fatalf("hashes %s %s %s", a, b, c)
	}
}
