package toolbelt_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// The tests of the extension call path's steps, each alone (see
// Toolbelt.runExtension for their order).

// stepBundle is a fixture with one running attempt, and the call of op
// with input and requestID its token makes.
type stepBundle struct {
	f    *toolbelttest.Fixture
	tb   *toolbelt.Toolbelt
	a    *toolbelttest.Attempt
	call toolbelt.StepCall
}

func stepSetup(t *testing.T, regs []extension.Registration, op, input, requestID string) *stepBundle {
	t.Helper()
	f := fixture(t, false)
	for _, reg := range regs {
		if err := f.Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	b := &stepBundle{f: f, tb: f.TB.(*toolbelt.Toolbelt), a: a}
	if b.call, err = toolbelt.NewStepCall(context.Background(), b.tb, a.Token, op, input, requestID); err != nil {
		t.Fatal(err)
	}
	return b
}

// insertReplay stores a request record of the attempt's execution.
func (b *stepBundle) insertReplay(t *testing.T, rp storage.Replay) {
	t.Helper()
	ctx := context.Background()
	now := b.f.Env.Clock.Now()
	rp.Execution, rp.CreatedAt, rp.UpdatedAt = b.a.Execution.ID, now, now
	if err := b.f.Env.Store.WithTx(ctx, func(tx storage.Tx) error { return tx.InsertReplay(ctx, &rp) }); err != nil {
		t.Fatal(err)
	}
}

// replay reads the attempt's request record of id (ok false: none).
func (b *stepBundle) replay(t *testing.T, id string) (storage.Replay, bool) {
	t.Helper()
	rp, err := b.f.Env.Store.GetReplay(context.Background(), b.a.Execution.ID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return rp, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return rp, true
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestCallStepEnterFlight(t *testing.T) {
	f := fixture(t, false)
	tb := f.TB.(*toolbelt.Toolbelt)
	waited := make(chan string, 4)
	toolbelt.SetFlightWaitHook(tb, func() { waited <- "waited" })
	ctx := context.Background()
	enter := func(t *testing.T, ctx context.Context, key string) func() {
		t.Helper()
		leave, err := toolbelt.EnterFlight(ctx, tb, key)
		if err != nil {
			t.Fatalf("enter %s: %v", key, err)
		}
		return leave
	}
	noWait := func(t *testing.T) {
		t.Helper()
		select {
		case <-waited:
			t.Fatal("a call waited that had nothing to wait for")
		default:
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"distinct keys run together", func(t *testing.T) {
			a, b := enter(t, ctx, "e\x00r1"), enter(t, ctx, "e\x00r2")
			noWait(t)
			a()
			b()
		}},
		{"a left key enters again at once", func(t *testing.T) {
			enter(t, ctx, "e\x00r1")()
			enter(t, ctx, "e\x00r1")()
			noWait(t)
		}},
		{"the same key waits until the first leaves", func(t *testing.T) {
			leave := enter(t, ctx, "e\x00r1")
			entered := make(chan func(), 1)
			go func() {
				l, err := toolbelt.EnterFlight(ctx, tb, "e\x00r1")
				if err != nil {
					t.Error(err)
				}
				entered <- l
			}()
			<-waited
			select {
			case <-entered:
				t.Fatal("the second call entered while the first was running")
			case <-time.After(20 * time.Millisecond):
			}
			leave()
			select {
			case l := <-entered:
				l()
			case <-time.After(30 * time.Second): // a failure guard only
				t.Fatal("the second call never entered after the first left")
			}
		}},
		{"a caller that goes while it waits gets its context's error", func(t *testing.T) {
			leave := enter(t, ctx, "e\x00r1")
			defer leave()
			gone, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := toolbelt.EnterFlight(gone, tb, "e\x00r1"); !errors.Is(err, context.Canceled) {
				t.Fatalf("a gone caller's wait: %v, want context.Canceled", err)
			}
			<-waited
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestCallStepDecideClaim(t *testing.T) {
	done := storage.Replay{State: storage.ReplayDone, Result: json.RawMessage(`{}`)}
	withheld := storage.Replay{State: storage.ReplayDone, Withheld: true}
	claimedRec := storage.Replay{State: storage.ReplayClaimed}
	tests := []struct {
		name               string
		found              bool
		rp                 storage.Replay
		requestID          string
		handler, sensitive bool
		want               string
	}{
		{"no request ID runs", false, storage.Replay{}, "", true, false, "run"},
		{"a new request ID of a handler is claimed", false, storage.Replay{}, "r1", true, false, "insert"},
		{"a sensitive handler's new request ID is claimed", false, storage.Replay{}, "r1", true, true, "insert"},
		{"a translated operation claims nothing", false, storage.Replay{}, "r1", false, false, "run"},
		{"a finished record replays", true, done, "r1", true, false, "replay"},
		{"a translated operation's finished record replays", true, done, "r1", false, false, "replay"},
		{"a finished record of a sensitive operation runs again", true, done, "r1", true, true, "run"},
		{"a withheld record runs again", true, withheld, "r1", true, false, "run"},
		{"an unfinished claim runs again under it", true, claimedRec, "r1", true, false, "rerun"},
		{"a sensitive operation's unfinished claim runs again under it", true, claimedRec, "r1", true, true, "rerun"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := toolbelt.DecideClaim(tt.found, tt.rp, tt.requestID, tt.handler, tt.sensitive); got != tt.want {
				t.Fatalf("decideClaim = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCallStepClaim(t *testing.T) {
	acme := []extension.Registration{{Name: "acme", Operations: []extension.Operation{handlerOp("acme.count", okHandler)}}}
	tests := []struct {
		name      string
		requestID string
		input     string
		sensitive bool
		before    func(t *testing.T, b *stepBundle)
		// want: replayed output, claimed, the stored record's state ("" for
		// none), the error code ("" for none).
		replay  bool
		out     string
		claimed bool
		state   storage.ReplayState
		code    string
		verdict string
	}{
		{name: "without a request ID nothing is claimed", requestID: ""},
		{name: "a new request ID is claimed", requestID: "r1", claimed: true, state: storage.ReplayClaimed},
		{name: "a finished result replays", requestID: "r1",
			before: func(t *testing.T, b *stepBundle) {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayDone, Result: json.RawMessage(`{"n":1}`)})
			},
			replay: true, out: `{"n":1}`, state: storage.ReplayDone},
		{name: "a finished refusal replays as the same refusal", requestID: "r1",
			before: func(t *testing.T, b *stepBundle) {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayDone, ErrorCode: "nope", ErrorMessage: "no"})
			},
			replay: true, state: storage.ReplayDone, verdict: "nope"},
		{name: "a sensitive operation's finished result is not replayed", requestID: "r1", sensitive: true,
			before: func(t *testing.T, b *stepBundle) {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayDone, Result: json.RawMessage(`{"n":1}`)})
			},
			state: storage.ReplayDone},
		{name: "an unfinished claim is taken over", requestID: "r1",
			before: func(t *testing.T, b *stepBundle) {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayClaimed})
			},
			claimed: true, state: storage.ReplayClaimed},
		{name: "a changed body is a request conflict", requestID: "r1", input: `{"other":1}`,
			before: func(t *testing.T, b *stepBundle) {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayDone, Result: json.RawMessage(`{"n":1}`)})
			},
			state: storage.ReplayDone, code: toolbelt.ErrRequestConflict.Code},
		{name: "the lease guard comes before the replay lookup", requestID: "r1",
			before: func(t *testing.T, b *stepBundle) {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayDone, Result: json.RawMessage(`{"n":1}`)})
				if _, err := b.f.Recover(b.a); err != nil { // the call's epoch is superseded
					t.Fatal(err)
				}
			},
			state: storage.ReplayDone, code: kernel.ErrStaleEpoch.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := tt.input
			if input == "" {
				input = `{}`
			}
			b := stepSetup(t, acme, "acme.count", input, tt.requestID)
			if tt.before != nil {
				tt.before(t, b)
			}
			replay, out, claimed, err := toolbelt.Claim(context.Background(), b.tb, b.call, true, tt.sensitive)
			var oe *extension.OperationError
			switch {
			case tt.verdict != "":
				if !errors.As(err, &oe) || oe.Code != tt.verdict {
					t.Fatalf("claim: %v, want the stored refusal %s", err, tt.verdict)
				}
			case tt.code != "":
				mustCode(t, err, tt.code)
			case err != nil:
				t.Fatal(err)
			}
			if replay != tt.replay || string(out) != tt.out || claimed != tt.claimed {
				t.Fatalf("claim = replay %v %s claimed %v; want replay %v %s claimed %v", replay, out, claimed, tt.replay, tt.out, tt.claimed)
			}
			rp, ok := b.replay(t, "r1")
			if got := map[bool]storage.ReplayState{true: rp.State}[ok]; got != tt.state {
				t.Fatalf("request record r1 is %q, want %q", got, tt.state)
			}
		})
	}
}

func TestCallStepReleaseClaim(t *testing.T) {
	tests := []struct {
		name    string
		claimed bool
		kept    bool
	}{
		{"a claim is given back, even for a gone caller", true, false},
		{"a call that claimed nothing leaves the record alone", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := stepSetup(t, nil, "acme.count", `{}`, "r1")
			b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayClaimed})
			gone, cancel := context.WithCancel(context.Background())
			cancel()
			toolbelt.ReleaseClaim(gone, b.tb, b.call, tt.claimed)
			if _, ok := b.replay(t, "r1"); ok != tt.kept {
				t.Fatalf("after the release the claim exists: %v, want %v", ok, tt.kept)
			}
		})
	}
}

func stepGate(f func() (*extension.WaitPlan, error)) extension.Gate {
	return extension.GateFunc(func(context.Context, extension.GateRequest) (*extension.WaitPlan, error) { return f() })
}

func TestCallStepRunGates(t *testing.T) {
	acme := extension.Registration{Name: "acme", Operations: []extension.Operation{handlerOp("acme.count", okHandler)}}
	refuse := stepGate(func() (*extension.WaitPlan, error) {
		return nil, &extension.OperationError{Code: "not_now", Message: "later"}
	})
	fail := stepGate(func() (*extension.WaitPlan, error) { return nil, errors.New("gate secret ghs_x") })
	boom := stepGate(func() (*extension.WaitPlan, error) { panic("ghs_x") })
	parks := stepGate(func() (*extension.WaitPlan, error) { return &extension.WaitPlan{Types: []string{"gate.done"}}, nil })
	pass := stepGate(func() (*extension.WaitPlan, error) { return nil, nil })
	tests := []struct {
		name  string
		gates map[string]extension.Gate
		// want: the answering gate ("" for none), the refusal's code ("" for
		// none), whether it parks.
		gate  string
		code  string
		parks bool
	}{
		{name: "no gate lets the call through"},
		{name: "passing gates let it through", gates: map[string]extension.Gate{"ga": pass, "gb": pass}},
		{name: "the operation owner's own gate is not asked", gates: map[string]extension.Gate{"acme": refuse}},
		{name: "a refusal is the gate's verdict", gates: map[string]extension.Gate{"ga": refuse}, gate: "ga", code: "not_now"},
		{name: "an error without a verdict is gate_failed", gates: map[string]extension.Gate{"ga": fail}, gate: "ga", code: toolbelt.ErrGateFailed},
		{name: "a panic is gate_failed", gates: map[string]extension.Gate{"ga": boom}, gate: "ga", code: toolbelt.ErrGateFailed},
		{name: "a plan parks the call", gates: map[string]extension.Gate{"ga": parks}, gate: "ga", parks: true},
		{name: "gates answer in name order", gates: map[string]extension.Gate{"gb": parks, "ga": refuse}, gate: "ga", code: "not_now"},
		{name: "the first answer ends the round", gates: map[string]extension.Gate{"ga": parks, "gb": refuse}, gate: "ga", parks: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			regs := []extension.Registration{acme}
			for name, g := range tt.gates {
				if name == "acme" {
					regs[0].Gate = g
					continue
				}
				regs = append(regs, extension.Registration{Name: name, Gate: g})
			}
			b := stepSetup(t, regs, "acme.count", `{}`, "")
			plan, name, err := toolbelt.RunGates(context.Background(), b.tb, "acme", b.call)
			if name != tt.gate || (plan != nil) != tt.parks {
				t.Fatalf("gates = plan %v from %q (%v); want parks %v from %q", plan, name, err, tt.parks, tt.gate)
			}
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var gr *extension.GateRefusal
			var oe *extension.OperationError
			if !errors.As(err, &gr) || gr.Gate != tt.gate || !errors.As(err, &oe) || oe.Code != tt.code {
				t.Fatalf("refusal %v; want gate %s's refusal %s", err, tt.gate, tt.code)
			}
			if strings.Contains(err.Error(), "ghs_x") {
				t.Fatalf("the refusal %q shows the gate's text", err)
			}
		})
	}
}

func TestCallStepTranslate(t *testing.T) {
	tests := []struct {
		name string
		tr   extension.Translator
		// want: the error's text part ("" for success), or for a verdict
		// its code.
		verdict string
		failure string
	}{
		{name: "an emission is accepted and the call recorded in its transaction",
			tr: func(context.Context, extension.Authority, json.RawMessage) (extension.Emission, error) {
				return extension.Emission{Type: "acme.counted", Data: json.RawMessage(`{"n":1}`)}, nil
			}},
		{name: "a refusal is the translator's verdict", verdict: "bad_count",
			tr: func(context.Context, extension.Authority, json.RawMessage) (extension.Emission, error) {
				return extension.Emission{}, fmt.Errorf("wrapped: %w", &extension.OperationError{Code: "bad_count", Message: "no"})
			}},
		{name: "an error without a verdict names its type only", failure: "of type *errors.errorString",
			tr: func(context.Context, extension.Authority, json.RawMessage) (extension.Emission, error) {
				return extension.Emission{}, errors.New("translator secret ghs_x")
			}},
		{name: "a panic names the value's type only", failure: "of type panic(string)",
			tr: func(context.Context, extension.Authority, json.RawMessage) (extension.Emission, error) {
				panic("ghs_x")
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := extension.Registration{Name: "acme", Operations: []extension.Operation{{Name: "acme.count", Summary: "Counts.", Emit: tt.tr}}}
			b := stepSetup(t, []extension.Registration{reg}, "acme.count", `{}`, "")
			out, rec, err := toolbelt.Translate(context.Background(), b.tb, b.call, tt.tr)
			evs, lerr := b.f.Events("acme.counted")
			if lerr != nil {
				t.Fatal(lerr)
			}
			var oe *extension.OperationError
			switch {
			case tt.verdict != "":
				if !errors.As(err, &oe) || oe.Code != tt.verdict {
					t.Fatalf("translate: %v, want the verdict %s", err, tt.verdict)
				}
			case tt.failure != "":
				if err == nil || !strings.Contains(err.Error(), tt.failure) || strings.Contains(err.Error(), "ghs_x") {
					t.Fatalf("translate: %v, want a failure %q without the translator's text", err, tt.failure)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(out), `"event_id"`) || len(evs) != 1 || !rec.Done || rec.Result != toolbelt.ResultOK {
					t.Fatalf("translate = %s, events %d, record %+v; want one event and the call recorded ok", out, len(evs), rec)
				}
				return
			}
			if len(evs) != 0 || rec.Done {
				t.Fatalf("a refused translation emitted %d events and recorded %+v", len(evs), rec)
			}
		})
	}
}

func TestCallStepHandle(t *testing.T) {
	b := stepSetup(t, nil, "acme.count", `{}`, "")
	answer := func(out string, err error) extension.Handler {
		return func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(out), err
		}
	}
	tests := []struct {
		name    string
		h       extension.Handler
		out     string
		verdict string
		failure string
	}{
		{name: "a result is compacted", h: answer(" { \"b\" : 1 ,\"a\":[ 2 ] } ", nil), out: `{"b":1,"a":[2]}`},
		{name: "no result is the empty object", h: answer("", nil), out: `{}`},
		{name: "a result that is not an object fails", h: answer(`[1]`, nil), failure: "not a JSON object"},
		{name: "a refusal is the handler's verdict", h: answer(`{"x":1}`, &extension.OperationError{Code: "nope"}), verdict: "nope"},
		{name: "a wrapped refusal is a verdict too", h: answer("", fmt.Errorf("w: %w", &extension.OperationError{Code: "nope"})), verdict: "nope"},
		{name: "an error without a verdict names its type only", h: answer("", errors.New("ghs_x")), failure: "handler of operation acme.count failed with an error of type *errors.errorString"},
		{name: "a panic names the value's type only", h: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			panic(errors.New("ghs_x"))
		}, failure: "of type panic(*errors.errorString)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, oe, err := toolbelt.Handle(context.Background(), tt.h, b.call)
			switch {
			case tt.failure != "":
				if err == nil || !strings.Contains(err.Error(), tt.failure) || strings.Contains(err.Error(), "ghs_x") || out != nil || oe != nil {
					t.Fatalf("handle = %s, %v, %v; want only a failure %q without the handler's text", out, oe, err, tt.failure)
				}
			case tt.verdict != "":
				if err != nil || oe == nil || oe.Code != tt.verdict || out != nil {
					t.Fatalf("handle = %s, %v, %v; want only the verdict %s", out, oe, err, tt.verdict)
				}
			default:
				if err != nil || oe != nil || string(out) != tt.out {
					t.Fatalf("handle = %s, %v, %v; want %s", out, oe, err, tt.out)
				}
			}
		})
	}
}

func TestCallStepRecord(t *testing.T) {
	tests := []struct {
		name      string
		claimed   bool
		sensitive bool
		oe        *extension.OperationError
		// want: the request record afterwards ("" state: none) and whether
		// the call record was written in the step's transaction.
		state    storage.ReplayState
		result   string
		code     string
		withheld bool
		done     bool
	}{
		{name: "a result finishes the claim and records the call", claimed: true, state: storage.ReplayDone, result: `{"n":1}`, done: true},
		{name: "a verdict finishes the claim; its call is recorded after", claimed: true, oe: &extension.OperationError{Code: "nope", Message: "no"}, state: storage.ReplayDone, code: "nope"},
		{name: "a sensitive result is withheld", claimed: true, sensitive: true, state: storage.ReplayDone, withheld: true, done: true},
		{name: "a sensitive verdict is withheld", claimed: true, sensitive: true, oe: &extension.OperationError{Code: "nope"}, state: storage.ReplayDone, withheld: true},
		{name: "without a claim only the call is recorded", done: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := ""
			if tt.claimed {
				id = "r1"
			}
			b := stepSetup(t, nil, "acme.count", `{}`, id)
			if tt.claimed {
				b.insertReplay(t, storage.Replay{RequestID: "r1", Operation: "acme.count", InputHash: hashOf(`{}`), State: storage.ReplayClaimed})
			}
			// The handler's effect happened: the record is written even
			// when the caller has gone.
			gone, cancel := context.WithCancel(context.Background())
			cancel()
			rec, err := toolbelt.Record(gone, b.tb, b.call, tt.claimed, tt.sensitive, json.RawMessage(`{"n":1}`), tt.oe)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Done != tt.done || (tt.done && rec.Result != toolbelt.ResultOK) {
				t.Fatalf("call record %+v, want written %v", rec, tt.done)
			}
			rp, ok := b.replay(t, "r1")
			if got := map[bool]storage.ReplayState{true: rp.State}[ok]; got != tt.state {
				t.Fatalf("request record is %q, want %q", got, tt.state)
			}
			if ok && (string(rp.Result) != tt.result || rp.ErrorCode != tt.code || rp.Withheld != tt.withheld) {
				t.Fatalf("request record %+v; want result %s, code %q, withheld %v", rp, tt.result, tt.code, tt.withheld)
			}
			calls, err := b.f.Env.Store.ListToolbeltCalls(context.Background(), &storage.ListToolbeltCallsParams{Execution: b.a.Execution.ID})
			if err != nil {
				t.Fatal(err)
			}
			if (len(calls) == 1) != tt.done {
				t.Fatalf("call records stored %+v, want written %v", calls, tt.done)
			}
		})
	}
}
